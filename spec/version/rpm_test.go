package version

import "testing"

func TestCompareRPM(t *testing.T) {
	checkOrder(t, "CompareRPM", func(a, b string) (int, error) { return CompareRPM(a, b), nil }, []comparison{
		{"3:570.124.06-1.el9", "3:570.86.15-1.el9", 1},
		{"12.4.1-1", "12.4.0-1", 1},
		{"1:1.0-1", "2.0-1", 1},
		{"1.0~rc1-1", "1.0-1", -1},
		{"1.0a-1", "1.0-1", 1},
		{"1.0-1.el9", "1.0-1.el9", 0},
		{"1.01-1", "1.1-1", 0},
	})
}
