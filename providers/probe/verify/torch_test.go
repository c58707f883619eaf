package verify

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// systemPython is Debian's interpreter, which python3-torch installs
// into; the python3 first on PATH may be another one.
const systemPython = "/usr/bin/python3"

// needTorch skips unless Debian's python3-torch is installed (.ci/run
// installs it).
func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(systemPython, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s cannot import torch (apt-get install python3-torch): %v", systemPython, err)
	}
}

// TestTorchOnCPU runs the PyTorch workload for real, on the CPU, with and
// without mixed precision: the steps run, the loss falls, every parameter
// and input is on the device, and the report is complete.
func TestTorchOnCPU(t *testing.T) {
	needTorch(t)
	for _, amp := range []bool{true, false} {
		cfg := Config{Device: CPU, CuDNN: true, AMP: amp, Steps: DefaultSteps, Batch: DefaultBatch}
		r := live(2*time.Minute).Run(context.Background(), Job{Workload: Workload{Interpreter: systemPython, Framework: "pytorch"}, Config: cfg})
		if !r.OK() || r.Outcome != OnCPU {
			t.Fatalf("amp %v: %s: %s (stderr %s)", amp, r.Outcome, r.Error, r.Stderr)
		}
		if r.Steps != DefaultSteps || len(r.Losses) != DefaultSteps {
			t.Errorf("amp %v: %d steps, %d losses", amp, r.Steps, len(r.Losses))
		}
		if r.Losses[len(r.Losses)-1] >= r.Losses[0] {
			t.Errorf("amp %v: the loss did not fall: %v", amp, r.Losses)
		}
		if r.StepSeconds <= 0 || r.FirstStepSeconds <= 0 || r.Seconds < r.StepSeconds {
			t.Errorf("amp %v: step %g s, first %g s, all %g s", amp, r.StepSeconds, r.FirstStepSeconds, r.Seconds)
		}
		// Two convolutions and a linear layer, weight and bias each, and
		// four batches of images and labels.
		if r.TensorsOnDevice != 6+8 {
			t.Errorf("amp %v: %d tensors on the device, want 14", amp, r.TensorsOnDevice)
		}
		wantAMP := ""
		if amp {
			wantAMP = "bfloat16"
		}
		if r.AMP != wantAMP || r.CuDNN || r.Device != "cpu" || r.Version == "" || r.BuildCUDA != "" {
			t.Errorf("amp %v: amp %q, cudnn %v, device %q, version %q, CUDA %q", amp, r.AMP, r.CuDNN, r.Device, r.Version, r.BuildCUDA)
		}
		if r.Identity == nil || r.Identity.UID != uint32(os.Getuid()) {
			t.Errorf("amp %v: identity %+v", amp, r.Identity)
		}
		t.Logf("amp %v: %d steps, loss %.3f → %.4f, %.1f ms a step (first %.0f ms), %s in all",
			amp, r.Steps, r.Losses[0], r.Losses[len(r.Losses)-1], 1000*r.StepSeconds, 1000*r.FirstStepSeconds, r.Elapsed.Round(time.Millisecond))
	}
}

// TestTorchAsksForGPU: the same workload asked for a GPU with Debian's
// CPU-only build says that it is one, and is not narrowed (no GPU path
// ran).
func TestTorchAsksForGPU(t *testing.T) {
	needTorch(t)
	rep := Verify(context.Background(), Options{
		Launcher:      live(2 * time.Minute),
		Workloads:     []Workload{{Interpreter: systemPython, Framework: "pytorch"}},
		Device:        GPU,
		SkipCUDACheck: "not here",
	})
	if rep.Verified || len(rep.Results) != 1 {
		t.Fatalf("verified %v, %d results", rep.Verified, len(rep.Results))
	}
	r := rep.Results[0]
	if r.Outcome != NotOnGPU || r.Error != "torch.cuda.is_available() is False (a CPU-only build)" || r.Narrowing != nil || r.Target != nil {
		t.Errorf("result %s: %s, narrowing %+v, target %+v", r.Outcome, r.Error, r.Narrowing, r.Target)
	}
}
