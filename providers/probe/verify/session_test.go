package verify

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck/cudachecktest"
)

// childVar makes this test binary the framework-free check's child, as
// gpuenv's hidden command makes gpuenv.
const childVar = "GPUENV_VERIFY_TEST_CUDA_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childVar) != "" {
		from, _ := strconv.Atoi(os.Args[len(os.Args)-1])
		os.Exit(cudacheck.Child(os.Stdout, from))
	}
	os.Exit(m.Run())
}

// trained is what a fake interpreter prints for a run that trained on the
// GPU it was shown; its device name is CUDA_VISIBLE_DEVICES.
const trained = `echo "{\"gpuenv_verify\": 1, \"framework\": \"$3\", \"version\": \"2.5.1+cu124\", \"build_cuda\": \"12.4\", \"device\": \"$CUDA_VISIBLE_DEVICES\", \"on_gpu\": true, \"phase\": \"done\", \"steps\": 2, \"losses\": [2.3, 1.1], \"step_seconds\": 0.002}"`

// failing prints a failure with the error text given.
func failing(text string) string {
	return `echo '{"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": false, "phase": "backward", "error": "` + text + `", "error_type": "RuntimeError"}'`
}

// TestNarrow: a failed step is run again with one thing changed, and the
// layer it follows is the one whose removal makes it train.
func TestNarrow(t *testing.T) {
	const cudnnErr = "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"
	// The fake fails while its configuration ($4) or environment has
	// what the case names, and trains otherwise.
	when := func(cond, text string) string {
		return "case \"$4 $CUDA_LAUNCH_BLOCKING\" in\n" + cond + ") " + failing(text) + ";;\n*) " + trained + ";;\nesac"
	}
	tests := []struct {
		name   string
		script string
		drv    driverState
		want   *Narrowing
	}{
		{
			name:   "cuDNN",
			script: when(`*'"cudnn":true'*`, cudnnErr),
			drv:    driverState{checked: true},
			want: &Narrowing{Layer: LayerCuDNN, Reason: "it trains with cuDNN off", Reruns: []Rerun{
				{Change: "CUDA_LAUNCH_BLOCKING=1", Outcome: Failed, Phase: "backward", Kind: KindCuDNN, Error: cudnnErr},
				{Change: "cuDNN off", Outcome: OnGPU},
				{Change: "mixed precision off", Outcome: Failed, Phase: "backward", Kind: KindCuDNN, Error: cudnnErr},
			}},
		},
		{
			name:   "mixed precision",
			script: when(`*'"amp":true'*`, "RuntimeError: CUDA error: misaligned address"),
			drv:    driverState{checked: true},
			want: &Narrowing{Layer: LayerAMP, Reason: "it trains without mixed precision", Reruns: []Rerun{
				{Change: "CUDA_LAUNCH_BLOCKING=1", Outcome: Failed, Phase: "backward", Kind: KindCUDA, Error: "RuntimeError: CUDA error: misaligned address"},
				{Change: "cuDNN off", Outcome: Failed, Phase: "backward", Kind: KindCUDA, Error: "RuntimeError: CUDA error: misaligned address"},
				{Change: "mixed precision off", Outcome: OnGPU},
			}},
		},
		{
			name:   "only with both off",
			script: when(`*'"cudnn":true'*|*'"amp":true'*`, cudnnErr),
			drv:    driverState{checked: true},
			want: &Narrowing{Layer: LayerCuDNN, Reason: "it trains only with both cuDNN and mixed precision off: cuDNN's float16 kernels for this GPU", Reruns: []Rerun{
				{Change: "CUDA_LAUNCH_BLOCKING=1", Outcome: Failed, Phase: "backward", Kind: KindCuDNN, Error: cudnnErr},
				{Change: "cuDNN off", Outcome: Failed, Phase: "backward", Kind: KindCuDNN, Error: cudnnErr},
				{Change: "mixed precision off", Outcome: Failed, Phase: "backward", Kind: KindCuDNN, Error: cudnnErr},
				{Change: "cuDNN and mixed precision off", Outcome: OnGPU},
			}},
		},
		{
			name:   "the framework's CUDA, the driver being fine",
			script: failing("RuntimeError: CUDA error: no kernel image is available for execution on the device"),
			drv:    driverState{checked: true},
			want: &Narrowing{Layer: LayerRuntime, Reason: "it fails without cuDNN and without mixed precision too, while the framework-free check runs a kernel on this GPU: the framework's CUDA runtime or its kernels for this GPU", Reruns: []Rerun{
				{Change: "CUDA_LAUNCH_BLOCKING=1", Outcome: Failed, Phase: "backward", Kind: KindNoKernel, Error: "RuntimeError: CUDA error: no kernel image is available for execution on the device"},
				{Change: "cuDNN off", Outcome: Failed, Phase: "backward", Kind: KindNoKernel, Error: "RuntimeError: CUDA error: no kernel image is available for execution on the device"},
				{Change: "mixed precision off", Outcome: Failed, Phase: "backward", Kind: KindNoKernel, Error: "RuntimeError: CUDA error: no kernel image is available for execution on the device"},
				{Change: "cuDNN and mixed precision off", Outcome: Failed, Phase: "backward", Kind: KindNoKernel, Error: "RuntimeError: CUDA error: no kernel image is available for execution on the device"},
			}},
		},
		{
			name:   "the driver: no reruns",
			script: failing("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu."),
			drv:    driverState{checked: true, fault: "init: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (system has unsupported display driver / cuda driver combination)"},
			want:   &Narrowing{Layer: LayerDriver, Reason: "the framework-free check fails on this GPU too: init: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (system has unsupported display driver / cuda driver combination)"},
		},
		{
			name:   "out of memory: no reruns",
			script: failing("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"),
			drv:    driverState{checked: true},
			want:   &Narrowing{Layer: LayerDevice, Reason: "the GPU ran out of memory"},
		},
		{
			name:   "no GPU for the framework, one for the driver",
			script: `echo '{"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": false, "no_gpu": true, "phase": "device", "error": "torch.cuda.is_available() is False"}'`,
			drv:    driverState{checked: true},
			want:   &Narrowing{Layer: LayerRuntime, Reason: "the framework-free check runs a kernel on this GPU, but the framework finds no GPU: the framework's own CUDA is at fault (a CPU-only build, one for a CUDA newer than the driver, or libraries it cannot load)"},
		},
		{
			name:   "no GPU for the framework, the driver unchecked",
			script: `echo '{"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": false, "no_gpu": true, "phase": "device", "error": "torch.cuda.is_available() is False"}'`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := live(10 * time.Second)
			j := Job{Workload: Workload{Interpreter: fake(t, tt.script), Framework: "pytorch"}, Config: Config{Device: GPU, CuDNN: true, AMP: true, Steps: 2, Batch: 8}, Target: &Target{Visible: "0"}}
			first := l.Run(context.Background(), j)
			if first.OK() {
				t.Fatalf("the first run trained: %+v", first)
			}
			got := l.narrow(context.Background(), j, first, tt.drv)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("narrowing (-want +got):\n%s", d)
			}
		})
	}
}

// TestNarrowDevice: a device-side assert in every run is the device's; the
// synchronous run's error is kept, since it names the kernel.
func TestNarrowDevice(t *testing.T) {
	script := "case \"$CUDA_LAUNCH_BLOCKING\" in\n1) " + failing("RuntimeError: CUDA error: device-side assert triggered (in nll_loss_forward)") +
		";;\n*) " + failing("RuntimeError: CUDA error: device-side assert triggered") + ";;\nesac"
	l := live(10 * time.Second)
	j := Job{Workload: Workload{Interpreter: fake(t, script), Framework: "pytorch"}, Config: Config{Device: GPU, CuDNN: true, AMP: false, Steps: 2, Batch: 8}, Target: &Target{Visible: "0"}}
	first := l.Run(context.Background(), j)
	got := l.narrow(context.Background(), j, first, driverState{checked: true})
	want := &Narrowing{Layer: LayerDevice, Reason: "a device-side assert fired, with every option: the synchronous run's error names the kernel", Reruns: []Rerun{
		{Change: "CUDA_LAUNCH_BLOCKING=1", Outcome: Failed, Phase: "backward", Kind: KindDeviceAssert, Error: "RuntimeError: CUDA error: device-side assert triggered (in nll_loss_forward)"},
		{Change: "cuDNN off", Outcome: Failed, Phase: "backward", Kind: KindDeviceAssert, Error: "RuntimeError: CUDA error: device-side assert triggered"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("narrowing (-want +got):\n%s", d)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		text, stderr, typ string
		want              Kind
	}{
		{"OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "", "OutOfMemoryError", KindOutOfMemory},
		{"ResourceExhaustedError: OOM when allocating tensor", "", "ResourceExhaustedError", KindOutOfMemory},
		{"XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.5GiB", "", "XlaRuntimeError", KindOutOfMemory},
		{"RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!", "", "RuntimeError", KindWrongDevice},
		{"RuntimeError: not on cuda:0: parameter 0.weight", "", "RuntimeError", KindWrongDevice},
		{"RuntimeError: CUDA error: an illegal memory access was encountered", "", "RuntimeError", KindIllegalAddress},
		{"RuntimeError: CUDA error: uncorrectable ECC error encountered", "", "RuntimeError", KindECC},
		{"RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "", "RuntimeError", KindBusy},
		{"UnknownError: Failed to get convolution algorithm. This is probably because cuDNN failed to initialize", "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR", "UnknownError", KindCuDNN},
		{"FloatingPointError: the loss is nan at step 3", "", "FloatingPointError", KindNonFinite},
		{"ArithmeticError: the loss did not fall", "", "ArithmeticError", KindNoLearning},
		{"the interpreter was killed by signal 11 (segmentation fault) before printing a result", "", "", KindCrash},
		{"ValueError: something else", "", "ValueError", KindOther},
	}
	for _, tt := range tests {
		if got := classify(tt.text, tt.stderr, tt.typ); got != tt.want {
			t.Errorf("classify(%q) = %s, want %s", tt.text, got, tt.want)
		}
	}
}

func TestGPUTargets(t *testing.T) {
	check := &cudacheck.Report{Count: 2, Devices: []cudacheck.Device{
		{Ordinal: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-aaaa", Capability: "9.0"},
		{Ordinal: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb", Capability: "9.0"},
	}}
	obs := &facts.Observation{NVML: facts.NVML{Devices: []facts.GPUDevice{
		{Index: 0, Name: "Tesla T4", UUID: "GPU-t4-0", ComputeCapability: "7.5"},
		{Index: 1, Name: "Tesla T4"},
	}}}
	tests := []struct {
		name  string
		env   []string
		check *cudacheck.Report
		obs   *facts.Observation
		want  []Target
	}{
		{"every GPU the check found, by UUID", nil, check, obs, []Target{
			{Index: 0, Visible: "GPU-aaaa", Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-aaaa", Capability: "9.0"},
			{Index: 1, Visible: "GPU-bbbb", Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb", Capability: "9.0"},
		}},
		{"CUDA_VISIBLE_DEVICES, as far as CUDA accepted it", []string{"CUDA_VISIBLE_DEVICES=1,0,9"}, check, obs, []Target{
			{Index: 0, Visible: "1", Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-aaaa", Capability: "9.0"},
			{Index: 1, Visible: "0", Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb", Capability: "9.0"},
		}},
		{"CUDA_VISIBLE_DEVICES without the check", []string{"CUDA_VISIBLE_DEVICES= 3, 9"}, nil, obs, []Target{
			{Index: 0, Visible: "3"}, {Index: 1, Visible: "9"},
		}},
		{"CUDA_VISIBLE_DEVICES empty hides every GPU", []string{"CUDA_VISIBLE_DEVICES="}, check, obs, []Target{}},
		{"NVML's GPUs when the check found none", nil, &cudacheck.Report{Count: -1}, obs, []Target{
			{Index: 0, Visible: "GPU-t4-0", Name: "Tesla T4", UUID: "GPU-t4-0", Capability: "7.5"},
			{Index: 1, Visible: "1", Name: "Tesla T4"},
		}},
		{"no GPU known", nil, nil, &facts.Observation{}, []Target{}},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, gpuTargets(tt.env, tt.check, tt.obs)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, d)
		}
	}
}

// cudaChild is the framework-free check's child: this test binary, with
// the fake libcuda.so.1 first on the loader's path.
func cudaChild(t *testing.T, l *Launcher, fakeCUDA string) cudacheck.Start {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc to build the fake libcuda.so.1")
	}
	dir, err := cudachecktest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.Env = append(l.Env, childVar+"=1", "LD_LIBRARY_PATH="+dir, "FAKE_CUDA="+fakeCUDA)
	return l.CUDACheck("/proc/self/exe", []string{os.Args[0], "cuda-check"})
}

// TestVerifyEveryGPU: the check, then one process per GPU at the same
// time, each shown its own GPU; a GPU the driver fails on is narrowed to
// the driver.
func TestVerifyEveryGPU(t *testing.T) {
	dir := t.TempDir()
	// Each run sleeps a second: run one after the other, three GPUs take
	// three seconds.
	script := `echo "$CUDA_VISIBLE_DEVICES" >> ` + dir + `/seen; sleep 1
case "$CUDA_VISIBLE_DEVICES" in
*10111213*) ` + failing("RuntimeError: CUDA error: an illegal memory access was encountered") + `;;
*) ` + trained + `;;
esac`
	l := live(30 * time.Second)
	l.Env = append(l.Env, "FAKE_CUDA_DEVICES=3")
	start := cudaChild(t, l, "wrong:1")
	// The workloads start once the check is done: their time is from
	// then, whatever the check's copies took.
	var began time.Time
	rep := Verify(context.Background(), Options{
		Launcher:  l,
		Workloads: []Workload{{Interpreter: fake(t, script), Framework: "pytorch"}},
		Device:    GPU,
		CUDACheck: start,
		Checked:   func(*cudacheck.Report) { began = time.Now() },
		Steps:     2,
		Batch:     8,
	})
	took := time.Since(began)
	if rep.CUDACheck == nil || len(rep.CUDACheck.Devices) != 3 || rep.CUDACheck.Devices[1].OK() || !rep.CUDACheck.Devices[0].OK() {
		t.Fatalf("check %+v", rep.CUDACheck)
	}
	wantGPUs := []Target{
		{Index: 0, Visible: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", Name: "Fake GPU 0", UUID: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", Capability: "8.0"},
		{Index: 1, Visible: "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", Name: "Fake GPU 1", UUID: "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", Capability: "8.0"},
		{Index: 2, Visible: "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f", Name: "Fake GPU 2", UUID: "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f", Capability: "8.0"},
	}
	if d := cmp.Diff(wantGPUs, rep.GPUs); d != "" {
		t.Errorf("GPUs (-want +got):\n%s", d)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results", len(rep.Results))
	}
	for i, r := range rep.Results {
		if r.Target == nil || r.Target.Index != i {
			t.Errorf("result %d on %+v", i, r.Target)
		}
		if i != 1 && (r.Outcome != OnGPU || r.Device != wantGPUs[i].UUID) {
			t.Errorf("GPU %d: %s on %q: %s", i, r.Outcome, r.Device, r.Error)
		}
	}
	bad := rep.Results[1]
	if bad.Outcome != Failed || bad.Narrowing == nil || bad.Narrowing.Layer != LayerDriver ||
		bad.Narrowing.Reason != "the framework-free check fails on this GPU too: compare: 65535 of 65536 sums are wrong; the first, element 1, is -1 where 3 was expected" {
		t.Errorf("GPU 1: %s, narrowing %+v", bad.Outcome, bad.Narrowing)
	}
	if rep.Verified {
		t.Error("verified with a failing GPU")
	}
	seen, _ := os.ReadFile(dir + "/seen")
	if got := strings.Fields(string(seen)); len(got) != 3 || !slices.Contains(got, wantGPUs[2].Visible) {
		t.Errorf("the runs saw CUDA_VISIBLE_DEVICES %v", got)
	}
	if took > 2900*time.Millisecond {
		t.Errorf("three GPUs took %s: their processes did not run at the same time", took)
	}
}

// TestVerifyCUDAOnly: the check alone, passing on every GPU.
func TestVerifyCUDAOnly(t *testing.T) {
	l := live(30 * time.Second)
	rep := Verify(context.Background(), Options{Launcher: l, Device: GPU, CUDAOnly: true, CUDACheck: cudaChild(t, l, ""),
		Workloads: []Workload{{Interpreter: "/nonexistent", Framework: "pytorch"}}})
	if !rep.Verified || len(rep.Results) != 0 || rep.CUDACheck == nil || len(rep.CUDACheck.Devices) != 2 {
		t.Errorf("verified %v, %d results, check %+v", rep.Verified, len(rep.Results), rep.CUDACheck)
	}
	l = live(30 * time.Second)
	rep = Verify(context.Background(), Options{Launcher: l, Device: GPU, CUDAOnly: true, CUDACheck: cudaChild(t, l, "no-device")})
	if rep.Verified || rep.CUDACheck.Failure == nil || rep.CUDACheck.Failure.Name != "CUDA_ERROR_NO_DEVICE" {
		t.Errorf("verified %v, check %+v", rep.Verified, rep.CUDACheck)
	}
}

// TestVerifyOutOfMemory: who holds the GPU's memory, and what to try.
func TestVerifyOutOfMemory(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"/etc/passwd":         "root:x:0:0:root:/root:/bin/bash\nbob:x:1001:1001::/home/bob:/bin/sh\n",
		"/proc/4242/status":   "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1001\t1001\t1001\t1001\n",
		"/proc/4242/cmdline":  "python\x00train.py\x00--batch\x00512\x00",
		"/proc/77/status":     "Name:\tjupyter\nUid:\t1234\t1234\t1234\t1234\n",
		"/proc/77/cmdline":    "",
		"/proc/other/ignored": "",
	}
	for p, data := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obs := &facts.Observation{NVML: facts.NVML{Devices: []facts.GPUDevice{
		{Index: 0, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-a", MemoryTotal: 40 << 30, MemoryUsed: 39 << 30, Processes: []facts.GPUProcess{
			{PID: 4242, UsedMemory: 30 << 30, Name: "python"},
			{PID: 77, UsedMemory: 9 << 30, Name: "jupyter-lab"},
		}},
		{Index: 1, Name: "NVIDIA A100-SXM4-40GB", UUID: "GPU-b", MemoryTotal: 40 << 30, MemoryUsed: 1 << 30},
	}}}
	script := `case "$CUDA_VISIBLE_DEVICES" in
GPU-a) echo '{"gpuenv_verify": 1, "framework": "pytorch", "on_gpu": false, "phase": "forward", "memory_free": 268435456, "memory_total": 42949672960, "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB", "error_type": "OutOfMemoryError"}';;
*) ` + trained + `;;
esac`
	rep := Verify(context.Background(), Options{
		Launcher:      live(10 * time.Second),
		Workloads:     []Workload{{Interpreter: fake(t, script), Framework: "pytorch"}},
		Device:        GPU,
		SkipCUDACheck: "not here",
		Obs:           obs,
		Files:         dirFS(root),
	})
	r := rep.Results[0]
	want := &OutOfMemory{FreeBytes: 256 << 20, TotalBytes: 40 << 30, Holders: []Holder{
		{PID: 4242, User: "bob", Command: "python train.py --batch 512", UsedBytes: 30 << 30},
		{PID: 77, User: "uid 1234", Command: "jupyter-lab", UsedBytes: 9 << 30},
	}, Advice: []string{
		"a smaller batch (verify's is 64)",
		"gradient checkpointing (torch.utils.checkpoint), which recomputes activations instead of keeping them",
		"GPU 1 (NVIDIA A100-SXM4-40GB), which has 39.0 GiB free: CUDA_VISIBLE_DEVICES=GPU-b",
		"ending the processes above, or waiting for them",
	}}
	if r.Kind != KindOutOfMemory || r.Narrowing == nil || r.Narrowing.Layer != LayerDevice {
		t.Errorf("kind %s, narrowing %+v", r.Kind, r.Narrowing)
	}
	if d := cmp.Diff(want, r.OutOfMemory); d != "" {
		t.Errorf("out of memory (-want +got):\n%s", d)
	}
	if rep.Results[1].OutOfMemory != nil || !rep.Results[1].OK() {
		t.Errorf("GPU 1: %+v", rep.Results[1])
	}
}

// dirFS reads files under a directory, as the host reads its root.
type dirFS string

func (d dirFS) ReadFile(p string) ([]byte, error) { return os.ReadFile(filepath.Join(string(d), p)) }

// TestEnvironment: the workloads' environment is built from an
// allow-list, as sudo's env_reset builds it, not passed on from gpuenv's.
func TestEnvironment(t *testing.T) {
	u := &User{Name: "alice", UID: 1002, GID: 1002, Home: "/home/alice", Shell: "/bin/zsh"}
	env := []string{"PATH=/root/bin:/usr/bin", "HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash", "SUDO_USER=alice", "SUDO_UID=1002", "MAIL=/var/mail/root",
		"CUDA_VISIBLE_DEVICES=1", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "NVIDIA_DRIVER_CAPABILITIES=compute", "AWS_SECRET_ACCESS_KEY=x", "LD_PRELOAD=/tmp/x.so", "PYTHONPATH=/root/py", "NCCL_DEBUG=WARN"}
	want := []string{"PATH=" + SafePath, "CUDA_VISIBLE_DEVICES=1", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "NVIDIA_DRIVER_CAPABILITIES=compute",
		"HOME=/home/alice", "USER=alice", "LOGNAME=alice", "SHELL=/bin/zsh"}
	if d := cmp.Diff(want, Environment(env, u, nil)); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	// The spec's variables, then --env, set or replace.
	set := [][2]string{{"NCCL_DEBUG", "INFO"}, {"PATH", "/opt/bin:/usr/bin"}, {"NCCL_DEBUG", "TRACE"}}
	want = []string{"CUDA_VISIBLE_DEVICES=1", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "NVIDIA_DRIVER_CAPABILITIES=compute",
		"HOME=/home/alice", "USER=alice", "LOGNAME=alice", "SHELL=/bin/zsh", "PATH=/opt/bin:/usr/bin", "NCCL_DEBUG=TRACE"}
	if d := cmp.Diff(want, Environment(env, u, set)); d != "" {
		t.Errorf("env with the spec's and --env (-want +got):\n%s", d)
	}
	// Without a user, gpuenv's own user's names stay.
	want = []string{"PATH=" + SafePath, "CUDA_VISIBLE_DEVICES=1", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "NVIDIA_DRIVER_CAPABILITIES=compute",
		"HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}
	if d := cmp.Diff(want, Environment(env, nil, nil)); d != "" {
		t.Errorf("env as gpuenv's user (-want +got):\n%s", d)
	}
	for _, bad := range []string{"", "1X", "A-B", "A=B", "A B"} {
		if err := CheckEnvName(bad); err == nil {
			t.Errorf("CheckEnvName(%q) accepted", bad)
		}
	}
	if err := CheckEnvName("_LD_library_PATH2"); err != nil {
		t.Error(err)
	}
}

func TestChrootArgs(t *testing.T) {
	u := &User{Name: "alice", UID: 1002, GID: 1002, Home: "/home/alice"}
	if got := u.chrootArgs(); !slices.Equal(got, []string{"--userspec=1002:1002", "--groups=1002"}) {
		t.Errorf("chroot options %v", got)
	}
	u.Groups = []uint32{44, 109}
	if got := u.chrootArgs(); !slices.Equal(got, []string{"--userspec=1002:1002", "--groups=1002,44,109"}) {
		t.Errorf("chroot options %v", got)
	}
}

// TestRunAsUser runs a workload as another user, for real: the uid, gid,
// supplementary groups, HOME, USER and LOGNAME it sees are the user's.
func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing credentials needs root")
	}
	// A directory the user can reach: test directories are private.
	dir, err := os.MkdirTemp("", "gpuenv-verify-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(dir, "python")
	script := `#!/bin/sh
echo "{\"gpuenv_verify\": 1, \"framework\": \"pytorch\", \"on_gpu\": true, \"phase\": \"done\", \"error\": \"$(id -u) $(id -g) $(id -G) $HOME $USER $LOGNAME $(pwd)\"}"
`
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	u := &User{Name: "nobody", UID: 65534, GID: 65534, Groups: []uint32{44}, Home: home}
	l := &Launcher{Root: "/", Runner: ProcessGroupRunner{}, User: u, Env: Environment(os.Environ(), u, nil), Timeout: 10 * time.Second}
	r := l.Run(context.Background(), Job{Workload: Workload{Interpreter: py, Framework: "pytorch"}})
	want := fmt.Sprintf("65534 65534 65534 44 %s nobody nobody %s", home, home)
	if r.Error != want {
		t.Errorf("the workload saw %q, want %q (%s, stderr %s)", r.Error, want, r.Outcome, r.Stderr)
	}

	// The framework-free check's child runs as the user too.
	var out strings.Builder
	err = l.CUDACheck("/bin/sh", []string{"sh", "-c", `id -u >&2; echo "$@" >&2`, "sh"})(context.Background(), 3, io.Discard, &out)
	if err != nil || out.String() != "65534\n--from 3\n" {
		t.Errorf("the check's child: %v, said %q", err, out.String())
	}
}

func TestLookupUser(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0:root:/root:/bin/bash\nalice:x:1002:1002:Alice:/home/alice:/bin/bash\n"
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	obs := &facts.Observation{Groups: []facts.Group{
		{Name: "alice", GID: 1002},
		{Name: "video", GID: 44, Members: []string{"bob", "alice"}},
		{Name: "render", GID: 109, Members: []string{"bob"}},
		{Name: "docker", GID: 999, Members: []string{"alice"}},
	}}
	got, err := LookupUser(h, obs, "alice")
	want := &User{Name: "alice", UID: 1002, GID: 1002, Groups: []uint32{44, 999}, GroupNames: []string{"alice", "video", "docker"}, Home: "/home/alice", Shell: "/bin/bash"}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("LookupUser: %v\n%s", err, cmp.Diff(want, got))
	}
	if _, err := LookupUser(h, obs, "carol"); err == nil || err.Error() != "no user carol in /etc/passwd" {
		t.Errorf("an unknown user: %v", err)
	}
}

// TestWorkloadInheritsNothing: a workload gets neither a descriptor gpuenv
// inherited without close-on-exec (a root shell's `9</etc/shadow`) nor a
// variable of gpuenv's environment outside the allow-list. As root it runs
// as nobody, who could not open the file.
func TestWorkloadInheritsNothing(t *testing.T) {
	dir, err := os.MkdirTemp("", "gpuenv-verify-fds")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "shadow")
	if err := os.WriteFile(secret, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Opened as a shell opens a redirection: without O_CLOEXEC.
	fd, err := syscall.Open(secret, syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	t.Setenv("GPUENV_TEST_SECRET", "s3cr3t")

	py := filepath.Join(dir, "python")
	script := fmt.Sprintf(`#!/bin/sh
leak=$(cat <&%d 2>/dev/null)
echo "{\"gpuenv_verify\": 1, \"framework\": \"pytorch\", \"on_gpu\": true, \"phase\": \"done\", \"error\": \"read [$leak] secret [${GPUENV_TEST_SECRET-unset}]\"}"
`, fd)
	if err := os.WriteFile(py, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var u *User
	if os.Geteuid() == 0 {
		u = &User{Name: "nobody", UID: 65534, GID: 65534, Home: dir}
	}
	l := &Launcher{Root: "/", Runner: ProcessGroupRunner{}, User: u, Env: Environment(os.Environ(), u, nil), Timeout: 10 * time.Second}
	r := l.Run(context.Background(), Job{Workload: Workload{Interpreter: py, Framework: "pytorch"}})
	if want := "read [] secret [unset]"; r.Error != want {
		t.Errorf("the workload saw %q, want %q (%s, stderr %s)", r.Error, want, r.Outcome, r.Stderr)
	}
}
