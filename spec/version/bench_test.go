package version

import "testing"

var (
	sinkVersion Version
	sinkInt     int
	sinkBool    bool
)

func BenchmarkParse(b *testing.B) {
	for _, s := range []string{"535.261.03", "9.1.0.70", "2.1.0.dev20230801+cu121"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkVersion, _ = Parse(s)
			}
		})
	}
}

func BenchmarkCompare(b *testing.B) {
	for _, p := range [][2]string{
		{"570.124.06", "570.26"},
		{"12.4", "12.4.0"},
		{"2.5.1+cu124", "2.5.1+cu121"},
	} {
		x, y := MustParse(p[0]), MustParse(p[1])
		b.Run(p[0]+"_vs_"+p[1], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkInt = x.Compare(y)
			}
		})
	}
}

func BenchmarkCheck(b *testing.B) {
	for _, p := range [][2]string{
		{"535.261.03", "535.261.03"},
		{">= 535, < 560", "550.54.15"},
		{"12.4 || 12.6 || ~12.8", "12.8.1"},
		{">= 2.1.0.dev0, != 2.1.0rc1", "2.1.0.dev20230801+cu121"},
	} {
		c, v := MustParseConstraint(p[0]), MustParse(p[1])
		b.Run(p[0], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkBool = c.Check(v)
			}
		})
	}
}

func BenchmarkParseConstraint(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = ParseConstraint(">= 535, < 560 || 570.*")
	}
}
