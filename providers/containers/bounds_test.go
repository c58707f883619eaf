package containers

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// nested are documents nested far deeper than any configuration, of
// about size bytes, in each way TOML and JSON nest.
func nested(size int) map[string]string {
	n := size / 4
	return map[string]string{
		"toml arrays":       "version = 2\na = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n",
		"toml inline":       "version = 2\na = " + strings.Repeat("{b=", n/2) + "1" + strings.Repeat("}", n/2) + "\n",
		"toml header":       "version = 2\n[" + strings.Repeat("a.", n) + "b]\nc = 1\n",
		"toml dotted key":   "version = 2\n" + strings.Repeat("a.", n) + "b = 1\n",
		"toml inline dots":  "version = 2\na = " + strings.Repeat("{b.c.d=", n/4) + "1" + strings.Repeat("}", n/4) + "\n",
		"toml nested lines": "version = 2\na = [\n" + strings.Repeat("[\n", n/2) + strings.Repeat("]\n", n/2) + "]\n",
		"json arrays":       `{"a": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}",
		"json objects":      `{"a": ` + strings.Repeat(`{"b":`, n/2) + "1" + strings.Repeat("}", n/2) + "}",
	}
}

// planPath is what a plan does with an engine's configuration: parse it
// (observe), merge the runtime in, and compare the merge with the file.
func planPath(doc string) error {
	e, parse, merge := spec.EngineContainerd, parseContainerd, MergeContainerd
	if strings.HasPrefix(doc, "{") {
		e, parse, merge = spec.EngineDocker, parseDocker, MergeDocker
	}
	if _, err := parse(doc); err != nil {
		return err
	}
	out, err := merge(doc, nil)
	if err != nil {
		return err
	}
	sameSettings(e, doc, out)
	return nil
}

// TestNestedConfigIsRefusedFast: a 40 kB and a 200 kB document nested
// thousands deep are refused, naming the depth, in well under a second
// and a few megabytes, where they took 27 s and 777 MB, and more than
// 8 GB.
func TestNestedConfigIsRefusedFast(t *testing.T) {
	for _, size := range []int{40 << 10, 200 << 10} {
		for name, doc := range nested(size) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			err := planPath(doc)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			if err == nil || !strings.Contains(err.Error(), "nested more than 16 levels deep") {
				t.Errorf("%s, %d bytes: %v; want it refused as nested too deep", name, len(doc), err)
			}
			if took > 500*time.Millisecond || alloc > 16<<20 {
				t.Errorf("%s, %d bytes: %v and %d MB to refuse; want well under a second and a few MB", name, len(doc), took, alloc>>20)
			}
		}
	}
}

// TestConfigDepthAllowsRealFiles: the deepest real settings, a float in
// a deep table, brackets and dots inside strings and comments, and a
// multi-line string with extra closing quotes parse as they should.
func TestConfigDepthAllowsRealFiles(t *testing.T) {
	deep := `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.extra.more]
  a = 1.5
  b = [[1.0, 2.0], [3.0, {x.y.z = 4.5}]]
  s = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
  t = 'a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t'
  m = """
[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
"quoted" """""
  n = '''{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'''''
  k = "esc \" [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
`
	for _, doc := range []string{containerdV2, containerdV3, deep} {
		if err := checkTOMLDepth(doc); err != nil {
			t.Errorf("checkTOMLDepth refused a real file: %v\n%s", err, doc)
		}
		if _, err := MergeContainerd(doc, nil); err != nil {
			t.Errorf("MergeContainerd: %v\n%s", err, doc)
		}
	}
	// Brackets after a multi-line string's extra quotes are brackets.
	hidden := "version = 2\nm = \"\"\"x\"\"\"\"\" ; a = " + strings.Repeat("[", 40) + "\n"
	if err := checkTOMLDepth(hidden); err == nil {
		t.Error("brackets after a multi-line string's closing quotes were not counted")
	}
	if err := checkJSONDepth(`{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"[[[[[[[[[[[[[[[[[[[["}`); err != nil {
		t.Errorf("brackets inside a JSON string counted: %v", err)
	}
}

// TestOversizeConfigRefused: a merge's input over MaxConfigSize is
// refused, whatever reads it.
func TestOversizeConfigRefused(t *testing.T) {
	big := "version = 2\n" + strings.Repeat("# padding\n", MaxConfigSize/10+1)
	if _, err := MergeContainerd(big, nil); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
		t.Errorf("MergeContainerd of %d bytes: %v; want larger than 1 MiB", len(big), err)
	}
	if _, err := MergeDocker("{}"+strings.Repeat(" ", MaxConfigSize), nil); err == nil {
		t.Error("MergeDocker read a file over MaxConfigSize")
	}
}

// TestDockerNonObject: daemon.json holding null, an array, a string or
// a number is an error saying what it holds, not a panic; "runtimes":
// null is no runtimes.
func TestDockerNonObject(t *testing.T) {
	for in, kind := range map[string]string{"null": "null", " null\n": "null", "[]": "an array", `"x"`: "a string", "1": "a number", "true": "a boolean"} {
		for name, f := range map[string]func(string) error{
			"parse":   func(s string) error { _, err := parseDocker(s); return err },
			"merge":   func(s string) error { _, err := MergeDocker(s, ptr(true)); return err },
			"unmerge": func(s string) error { _, err := UnmergeDocker(s); return err },
		} {
			err := f(in)
			if err == nil || !strings.Contains(err.Error(), "holds "+kind+", not a JSON object") {
				t.Errorf("%s(%q): %v; want it to say the file holds %s", name, in, err, kind)
			}
		}
	}
	for _, in := range []string{`{"runtimes": null}`, `{"runtimes": {"nvidia": null}}`, `{"runtimes": {"nvidia": null}, "default-runtime": null}`} {
		out, err := MergeDocker(in, ptr(true))
		if err != nil {
			t.Errorf("MergeDocker(%s): %v", in, err)
			continue
		}
		if st, err := parseDocker(out); err != nil || !st.nvidia || st.defaultRuntime != RuntimeName {
			t.Errorf("MergeDocker(%s) = %s: %+v, %v", in, out, st, err)
		}
	}
	if _, err := MergeDocker(`{"runtimes": "x"}`, nil); err == nil || !strings.Contains(err.Error(), `"runtimes" holds a string`) {
		t.Errorf(`MergeDocker({"runtimes": "x"}): %v`, err)
	}
}

// TestObserveEngineRefusesNonRegular: a FIFO as daemon.json, a link to
// a device as config.toml and an oversize file are each an error naming
// the file, at once: plan does not block on them or read them whole.
func TestObserveEngineRefusesNonRegular(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc/docker", "etc/containerd", "etc/crio/crio.conf.d", "dev"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, DockerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(root, "dev/zero"), syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		t.Skipf("cannot make a device node (not root?): %v", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(root, ContainerdConfig)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, CRIODropIn), make([]byte, MaxConfigSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	for e, want := range map[spec.Engine]string{
		spec.EngineDocker:     "is a FIFO, not a regular file",
		spec.EngineContainerd: "is a character device, not a regular file",
		spec.EngineCRIO:       "is larger than 1 MiB",
	} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c := observeEngine(h, e)
			if !c.Exists || !strings.Contains(c.Error, want) || !strings.Contains(c.Error, c.Path) || c.Content != "" {
				t.Errorf("%s: exists %v, error %q, %d bytes of content; want an error naming %s that says %q", e, c.Exists, c.Error, len(c.Content), c.Path, want)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: observing %s has not returned after 5s", e, EngineConfigPath(e))
		}
	}
	var nr *host.NotRegularError
	if _, err := h.ReadFile(DockerConfig); !errors.As(err, &nr) {
		t.Errorf("ReadFile(%s): %v; want a NotRegularError", DockerConfig, err)
	}
}

// BenchmarkNestedConfig is what a plan did with a 40 kB containerd
// configuration nested 20,000 deep: 27 s and 777 MB before the depth was
// bounded.
func BenchmarkNestedConfig(b *testing.B) {
	doc := nested(40 << 10)["toml header"]
	b.ReportAllocs()
	for b.Loop() {
		planPath(doc)
	}
}
