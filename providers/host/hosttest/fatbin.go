package hosttest

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FatbinEntry is one target of a fatbin container: a cubin, or PTX when
// PTX is set, for the SM number SM (80 for sm_80); Payload is the size of
// its (here zeroed) code.
type FatbinEntry struct {
	PTX     bool
	SM      uint32
	Payload int
}

// Fatbin lays out containers of entries as the CUDA toolchain writes a
// .nv_fatbin section (the layout providers/framework/fatbin.go reads:
// a 16-byte container header, 64-byte entry headers, payloads padded to
// 8 bytes).
func Fatbin(containers ...[]FatbinEntry) []byte {
	var out []byte
	for _, c := range containers {
		var body []byte
		for _, e := range c {
			padded := (e.Payload + 7) &^ 7
			h := make([]byte, 64)
			kind := uint16(2)
			if e.PTX {
				kind = 1
			}
			binary.LittleEndian.PutUint16(h[0:], kind)
			binary.LittleEndian.PutUint16(h[2:], 0x0101)
			binary.LittleEndian.PutUint32(h[4:], 64)
			binary.LittleEndian.PutUint64(h[8:], uint64(padded))
			binary.LittleEndian.PutUint32(h[16:], uint32(e.Payload))
			binary.LittleEndian.PutUint32(h[28:], e.SM)
			body = append(body, h...)
			body = append(body, make([]byte, padded)...)
		}
		hdr := make([]byte, 16)
		binary.LittleEndian.PutUint32(hdr[0:], 0xBA55ED50)
		binary.LittleEndian.PutUint16(hdr[4:], 1)
		binary.LittleEndian.PutUint16(hdr[6:], 16)
		binary.LittleEndian.PutUint64(hdr[8:], uint64(len(body)))
		out = append(out, hdr...)
		out = append(out, body...)
	}
	return out
}

// BuildFatbinELF compiles with gcc a shared object at p named soname
// whose .nv_fatbin section holds data, as a CUDA library's does.
func BuildFatbinELF(tb testing.TB, p, soname string, data []byte) {
	tb.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		tb.Skip("gcc not installed")
	}
	var src strings.Builder
	src.WriteString("__attribute__((section(\".nv_fatbin\"), used, aligned(8))) const unsigned char gpuenv_fatbin[] = {")
	for i, b := range data {
		if i > 0 {
			src.WriteByte(',')
		}
		fmt.Fprintf(&src, "%d", b)
	}
	src.WriteString("};\nint gpuenv_x(void) { return 0; }\n")
	scratch := tb.TempDir()
	c := filepath.Join(scratch, "fatbin.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-Wl,-soname,"+soname, "-o", p, c).CombinedOutput(); err != nil {
		tb.Fatalf("gcc %s: %v\n%s", p, err, b)
	}
}
