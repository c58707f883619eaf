package verify

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// fake writes an executable shell script standing in for a Python
// interpreter and returns its path. The script sees the workload as "$2",
// the framework's name as "$3" and the configuration as "$4", as python -c
// does.
func fake(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "python")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// live is a launcher on the running system, as gpuenv itself.
func live(timeout time.Duration) *Launcher {
	return &Launcher{Root: "/", Runner: ProcessGroupRunner{}, Env: os.Environ(), Timeout: timeout}
}

const okLine = `{"gpuenv_verify": 1, "framework": "pytorch", "version": "2.5.1+cu124", "build_cuda": "12.4", "device": "NVIDIA H100 80GB HBM3", "on_gpu": true, "seconds": 0.25}`

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		want    Result
		stderr  string
	}{
		{
			name:   "on the GPU, after the framework's own output",
			script: "echo 'Loading weights'\necho '" + okLine + "'",
			want:   Result{Outcome: OnGPU, Version: "2.5.1+cu124", BuildCUDA: "12.4", Device: "NVIDIA H100 80GB HBM3", Seconds: 0.25},
		},
		{
			name:   "no GPU found",
			script: `echo '{"gpuenv_verify": 1, "framework": "pytorch", "version": "2.3.1+cpu", "build_cuda": "", "on_gpu": false, "no_gpu": true, "error": "torch.cuda.is_available() is False (a CPU-only build)"}'`,
			want:   Result{Outcome: NotOnGPU, Version: "2.3.1+cpu", Error: "torch.cuda.is_available() is False (a CPU-only build)"},
		},
		{
			name:   "framework error",
			script: `echo '{"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": false, "error": "RuntimeError: CUDA error: no kernel image is available for execution on the device"}'`,
			want:   Result{Outcome: Failed, Error: "RuntimeError: CUDA error: no kernel image is available for execution on the device", Kind: KindNoKernel},
		},
		{
			name:   "crash by signal",
			script: "echo 'Fatal Python error: Segmentation fault' >&2\nkill -SEGV $$",
			want:   Result{Outcome: Crashed, Error: "the interpreter was killed by signal 11 (segmentation fault) before printing a result", ExitCode: -1, Kind: KindCrash},
			stderr: "Fatal Python error: Segmentation fault",
		},
		{
			name:   "exit without a result",
			script: "echo 'ImportError: libcudnn.so.8: cannot open shared object file' >&2\nexit 3",
			want:   Result{Outcome: Crashed, Error: "the interpreter exited with status 3 before printing a result", ExitCode: 3, Kind: KindCrash},
			stderr: "libcudnn.so.8",
		},
		{
			name: "timeout kills the helpers too",
			// The helper holds stdout open: without killing the group, the
			// run would wait for it.
			script:  "sleep 30 &\nsleep 30",
			timeout: 300 * time.Millisecond,
			want:    Result{Outcome: TimedOut, Error: "no result within 300ms: killed", ExitCode: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Workload{Interpreter: fake(t, tt.script), Framework: "pytorch"}
			start := time.Now()
			got := live(tt.timeout).Run(context.Background(), Job{Workload: w})
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("run took %s", took)
			}
			if !strings.Contains(got.Stderr, tt.stderr) {
				t.Errorf("stderr %q lacks %q", got.Stderr, tt.stderr)
			}
			got.Stderr, got.Elapsed = "", 0
			tt.want.Workload = w
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

func TestRunNotStarted(t *testing.T) {
	w := Workload{Interpreter: filepath.Join(t.TempDir(), "missing", "python"), Framework: "jax"}
	got := live(time.Second).Run(context.Background(), Job{Workload: w})
	if got.Outcome != NotStarted || !strings.Contains(got.Error, "no such file") {
		t.Errorf("got %s: %s", got.Outcome, got.Error)
	}
	got = live(time.Second).Run(context.Background(), Job{Workload: Workload{Interpreter: "/bin/true", Framework: "mxnet"}})
	if got.Outcome != NotStarted || got.Error != `no workload for framework "mxnet"` {
		t.Errorf("unknown framework: %s: %s", got.Outcome, got.Error)
	}
}

// TestRunArguments: the interpreter gets -c, the embedded script, the
// framework's name and the configuration.
func TestRunArguments(t *testing.T) {
	for _, fw := range []string{"pytorch", "tensorflow", "jax"} {
		script, err := Script(fw)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		py := fake(t, `printf '%s' "$2" > `+dir+`/script; echo "$1 $3" > `+dir+`/args; printf '%s' "$4" > `+dir+"/config\necho '"+strings.ReplaceAll(okLine, "pytorch", fw)+"'")
		cfg := Config{Device: GPU, CuDNN: true, Steps: 3, Batch: 8}
		got := live(5*time.Second).Run(context.Background(), Job{Workload: Workload{Interpreter: py, Framework: fw}, Config: cfg})
		if got.Outcome != OnGPU {
			t.Fatalf("%s: %s %s", fw, got.Outcome, got.Error)
		}
		args, _ := os.ReadFile(dir + "/args")
		sent, _ := os.ReadFile(dir + "/script")
		if string(args) != "-c "+fw+"\n" || string(sent) != script {
			t.Errorf("%s: args %q, script sent intact: %v", fw, args, string(sent) == script)
		}
		if sent, _ := os.ReadFile(dir + "/config"); string(sent) != `{"device":"cuda","cudnn":true,"amp":false,"steps":3,"batch":8}` {
			t.Errorf("%s: configuration %s", fw, sent)
		}
	}
}

// TestScriptsWithoutFramework runs the embedded scripts with a real
// Python that has none of the frameworks: each must still print its one
// JSON line, naming the missing module.
func TestScriptsWithoutFramework(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	for _, fw := range []string{"pytorch", "tensorflow", "jax"} {
		mod := map[string]string{"pytorch": "torch", "tensorflow": "tensorflow", "jax": "jax"}[fw]
		got := live(60*time.Second).Run(context.Background(), Job{Workload: Workload{Interpreter: py, Framework: fw}})
		switch got.Outcome {
		case OnGPU, NotOnGPU:
			// This Python has the framework: the script ran it.
			if got.Version == "" {
				t.Errorf("%s: ran without reporting its version", fw)
			}
		case Failed:
			if !strings.Contains(got.Error, "No module named '"+mod+"'") && got.Version == "" {
				t.Errorf("%s: failed without naming the missing module: %s", fw, got.Error)
			}
		default:
			t.Errorf("%s: %s: %s (stderr %s)", fw, got.Outcome, got.Error, got.Stderr)
		}
	}
}

// TestRunInChroot runs a workload inside a root other than "/": the
// interpreter is the root's, started under chroot(8).
func TestRunInChroot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	if _, err := exec.LookPath("chroot"); err != nil {
		t.Skip("no chroot(8)")
	}
	root := t.TempDir()
	copyWithLibraries(t, "/bin/sh", root)
	py := filepath.Join(root, "opt/venv/bin/python")
	if err := os.MkdirAll(filepath.Dir(py), 0o755); err != nil {
		t.Fatal(err)
	}
	// The fake answers only when it runs inside the root: the marker file
	// exists there and nowhere else.
	if err := os.WriteFile(filepath.Join(root, "inside-the-root"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(py, []byte("#!/bin/sh\n[ -e /inside-the-root ] && echo '"+okLine+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Launcher{Root: root, Runner: ProcessGroupRunner{}, Env: os.Environ(), Timeout: 10 * time.Second}
	got := l.Run(context.Background(), Job{Workload: Workload{Interpreter: "/opt/venv/bin/python", Framework: "pytorch"}})
	if got.Outcome != OnGPU {
		t.Errorf("in the chroot: %s: %s (stderr %s)", got.Outcome, got.Error, got.Stderr)
	}
	got = l.Run(context.Background(), Job{Workload: Workload{Interpreter: "/opt/other/bin/python", Framework: "pytorch"}})
	if got.Outcome != NotStarted {
		t.Errorf("missing interpreter in the chroot: %s: %s", got.Outcome, got.Error)
	}
}

var lddPath = regexp.MustCompile(`(/\S+)`)

// copyWithLibraries copies a program and the shared libraries ldd lists
// into root at the same paths.
func copyWithLibraries(t *testing.T, prog, root string) {
	t.Helper()
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", prog, err)
	}
	files := []string{prog}
	for _, m := range lddPath.FindAllString(string(out), -1) {
		files = append(files, m)
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWorkloads(t *testing.T) {
	obs := &facts.Observation{Python: []facts.PythonEnv{
		{Interpreter: "/opt/a/bin/python", Frameworks: []facts.Framework{{Name: "pytorch", Version: "2.5.1"}, {Name: "jax", Version: "0.4.30"}}},
		{Interpreter: "/usr/bin/python3", Frameworks: []facts.Framework{{Name: "mxnet"}}},
		{Interpreter: "/opt/a/bin/python", Frameworks: []facts.Framework{{Name: "pytorch"}}},
	}}
	got := Workloads(obs)
	want := []Workload{{"/opt/a/bin/python", "pytorch", "2.5.1"}, {"/opt/a/bin/python", "jax", "0.4.30"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
