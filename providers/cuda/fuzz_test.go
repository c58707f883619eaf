package cuda

import (
	"os"
	"testing"
)

func FuzzParseVersionJSON(f *testing.F) {
	if data, err := os.ReadFile("testdata/version-12.4.1.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(v118))
	f.Add([]byte(`{"cuda": {"version": "12.2.140"}}`))
	f.Add([]byte(`{"cuda": {"version": "..."}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, rt, err := ParseVersionJSON(data)
		if err == nil && v == "" {
			t.Fatalf("no error and no version (runtime %q)", rt)
		}
	})
}

func FuzzParseVersionTxt(f *testing.F) {
	f.Add([]byte("CUDA Version 10.2.89\n"))
	f.Add([]byte("CUDA Version 9.0.176\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, rt, err := ParseVersionTxt(data)
		if err == nil && (v == "" || rt == "") {
			t.Fatalf("no error, version %q runtime %q", v, rt)
		}
	})
}
