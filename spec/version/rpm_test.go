package version

import "testing"

func TestCompareRPM(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"3:570.124.06-1.el9", "3:570.86.15-1.el9", 1},
		{"12.4.1-1", "12.4.0-1", 1},
		{"1:1.0-1", "2.0-1", 1},
		{"1.0~rc1-1", "1.0-1", -1},
		{"1.0a-1", "1.0-1", 1},
		{"1.0-1.el9", "1.0-1.el9", 0},
		{"1.01-1", "1.1-1", 0},
	}
	for _, tt := range tests {
		if got := CompareRPM(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareRPM(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := CompareRPM(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareRPM(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}
