package framework

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestFatbinArchs: the targets of every container of a real ELF object's
// .nv_fatbin section, cubins as sm_ and PTX as compute_, with padding
// between containers; none for an object without CUDA code.
func TestFatbinArchs(t *testing.T) {
	root := t.TempDir()
	unit := func(ptx uint32, sms ...uint32) []hosttest.FatbinEntry {
		var c []hosttest.FatbinEntry
		for i, sm := range sms {
			c = append(c, hosttest.FatbinEntry{SM: sm, Payload: 100 + 13*i})
		}
		if ptx != 0 {
			c = append(c, hosttest.FatbinEntry{PTX: true, SM: ptx, Payload: 333})
		}
		return c
	}
	data := hosttest.Fatbin(unit(90, 50, 60, 70), unit(0, 75, 80, 86, 90))
	// Eight bytes of padding, then one more container.
	data = append(data, make([]byte, 8)...)
	data = append(data, hosttest.Fatbin(unit(0, 120))...)
	lib := "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"
	hosttest.BuildFatbinELF(t, filepath.Join(root, lib), "libtorch_cuda.so", data)
	hosttest.BuildELF(t, filepath.Join(root, "/usr/lib/libplain.so"), "libplain.so", nil)
	h := hosttest.New(t, root)
	got, err := FatbinArchs(h, lib)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_120", "compute_90"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := FatbinArchs(h, "/usr/lib/libplain.so"); err != nil || len(got) != 0 {
		t.Errorf("an object without CUDA code: %v, %v", got, err)
	}
}

// TestFatbinBounded: a container whose size runs past the section is an
// error, not a read beyond it; every container counts, the last one too;
// a section with more containers than the walk reads gives no answer,
// not a partial one.
func TestFatbinBounded(t *testing.T) {
	bad := hosttest.Fatbin([]hosttest.FatbinEntry{{SM: 80, Payload: 64}})
	bad = bad[:len(bad)-8]
	if _, err := fatbinArchs(bytes.NewReader(bad), int64(len(bad))); err == nil {
		t.Error("a truncated container was read")
	}
	var cs [][]hosttest.FatbinEntry
	for i := 0; i < 40; i++ {
		cs = append(cs, []hosttest.FatbinEntry{{SM: 80, Payload: 8}})
	}
	cs = append(cs, []hosttest.FatbinEntry{{SM: 75, Payload: 8}})
	data := hosttest.Fatbin(cs...)
	got, err := fatbinArchs(bytes.NewReader(data), int64(len(data)))
	if err != nil || !slices.Equal(got, []string{"sm_75", "sm_80"}) {
		t.Errorf("got %v, %v", got, err)
	}
	defer func(n int) { maxContainers = n }(maxContainers)
	maxContainers = 40
	if got, err := fatbinArchs(bytes.NewReader(data), int64(len(data))); err != nil || got != nil {
		t.Errorf("a walk cut short answered %v, %v", got, err)
	}
}

// TestTorchArchsFromFiles: a torch whose version names no wheel variant
// (a Nix or distribution build) gets its targets from libtorch_cuda.so.
func TestTorchArchsFromFiles(t *testing.T) {
	root := t.TempDir()
	site := "/opt/venv/lib/python3.12/site-packages"
	hosttest.WriteFile(t, root, "/opt/venv/pyvenv.cfg", "home = /usr/bin\nversion = 3.12.4\n")
	hosttest.WriteFile(t, root, "/usr/bin/python3.12", "")
	if err := os.MkdirAll(filepath.Join(root, "/opt/venv/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"/opt/venv/bin/python": "python3", "/opt/venv/bin/python3": "/usr/bin/python3.12"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	hosttest.WriteFile(t, root, site+"/torch/version.py", "__version__ = '2.8.0'\ncuda = '12.8'\nhip = None\n")
	var c []hosttest.FatbinEntry
	for _, sm := range []uint32{50, 60, 70, 75, 80, 86, 90} {
		c = append(c, hosttest.FatbinEntry{SM: sm, Payload: 40})
	}
	hosttest.BuildFatbinELF(t, filepath.Join(root, site, "torch/lib/libtorch_cuda.so"), "libtorch_cuda.so", hosttest.Fatbin(c))
	h := hosttest.New(t, root)
	envs, _ := Observe(h, facts.Packages{}, []string{"/opt/venv/bin/python"})
	var fw *facts.Framework
	for i := range envs {
		for j := range envs[i].Frameworks {
			if envs[i].Frameworks[j].Name == PyTorch {
				fw = &envs[i].Frameworks[j]
			}
		}
	}
	if fw == nil {
		t.Fatalf("no torch in %+v", envs)
	}
	if want := []string{"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"}; !slices.Equal(fw.CUDAArchs, want) {
		t.Errorf("archs %v", fw.CUDAArchs)
	}
}

// BenchmarkFatbinArchs walks a section shaped like PyTorch's CUDA
// library's (4000 containers of ten targets), read from a file with one
// positioned read per header as on a host.
func BenchmarkFatbinArchs(b *testing.B) {
	var cs [][]hosttest.FatbinEntry
	for i := 0; i < 4000; i++ {
		var c []hosttest.FatbinEntry
		for _, sm := range []uint32{50, 60, 70, 75, 80, 86, 90, 100, 120} {
			c = append(c, hosttest.FatbinEntry{SM: sm, Payload: 4096})
		}
		cs = append(cs, append(c, hosttest.FatbinEntry{PTX: true, SM: 120, Payload: 4096}))
	}
	data := hosttest.Fatbin(cs...)
	p := filepath.Join(b.TempDir(), "nv_fatbin")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		archs, err := fatbinArchs(f, int64(len(data)))
		if err != nil || len(archs) != 10 {
			b.Fatalf("%v, %v", archs, err)
		}
	}
}
