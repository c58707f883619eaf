package cudnn

import (
	"strings"
	"testing"
)

func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(header9))
	f.Add([]byte(header8))
	f.Add([]byte("#define CUDNN_MAJOR 9\n#define CUDNN_MIN"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseHeader(data)
		if err == nil && strings.Count(v, ".") != 2 {
			t.Fatalf("version %q", v)
		}
	})
}
