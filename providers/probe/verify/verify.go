// Package verify is the troubleshooting guide's minimal reproduction, run
// for real. First a check without any framework (package cudacheck): the
// driver's libcuda loads, starts, and runs a kernel on every GPU. Then, in
// each PyTorch, TensorFlow and JAX installation found, a few training steps
// of a tiny convolutional classifier on synthetic MNIST-shaped data, one
// process per GPU, with cuDNN and mixed precision. A step that fails is
// run again with synchronous launches, without cuDNN and without mixed
// precision, to tell which layer the failure follows. Everything runs as
// the user being verified, with their groups and HOME.
//
// The workloads are Python scripts embedded in gpuenv; each prints one
// JSON line that verify parses. They run through a Launcher, so inside a
// root other than "/" they run under chroot, with the root's own
// interpreter.
package verify

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/facts"
)

// DefaultTimeout bounds one workload: importing a framework, starting
// CUDA and compiling the kernels takes seconds, the steps themselves
// milliseconds each.
const DefaultTimeout = 60 * time.Second

// DefaultSteps and DefaultBatch size the training: enough steps for the
// loss to fall clearly, few enough to take a second on a GPU.
const (
	DefaultSteps = 20
	DefaultBatch = 64
)

//go:embed scripts/*.py
var scripts embed.FS

// commonScript is the part of every workload that is not the framework's:
// reading the configuration, timing the steps, judging the loss, printing
// the report.
const commonScript = "common"

// Script returns the embedded workload of a framework ("pytorch",
// "tensorflow", "jax"): the common part, then the framework's.
func Script(framework string) (string, error) {
	b, err := scripts.ReadFile("scripts/" + framework + ".py")
	if err != nil || framework == commonScript {
		return "", fmt.Errorf("no workload for framework %q", framework)
	}
	common, err := scripts.ReadFile("scripts/" + commonScript + ".py")
	if err != nil {
		return "", err
	}
	return string(common) + "\n" + string(b), nil
}

// Workload is one framework in one Python environment.
type Workload struct {
	Interpreter string `json:"interpreter"` // path inside the root
	Framework   string `json:"framework"`
	// Version is the version observation found, for messages before the
	// workload reports its own.
	Version string `json:"observed_version,omitempty"`
}

// Workloads lists every framework gpuenv knows a workload for in the
// observed Python environments, in observation order.
func Workloads(obs *facts.Observation) []Workload {
	var out []Workload
	seen := map[string]bool{}
	for _, env := range obs.Python {
		for _, fw := range env.Frameworks {
			if _, err := Script(fw.Name); err != nil {
				continue
			}
			key := env.Interpreter + "\x00" + fw.Name
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Workload{Interpreter: env.Interpreter, Framework: fw.Name, Version: fw.Version})
		}
	}
	return out
}

// Device is where workloads run.
type Device string

// The devices: every visible GPU, one process each, or the CPU in one
// process (to check the workloads themselves on a machine without a GPU).
const (
	GPU Device = "cuda"
	CPU Device = "cpu"
)

// Config is what a workload script is asked to do; it is passed to the
// script as JSON.
type Config struct {
	Device Device `json:"device"`
	CuDNN  bool   `json:"cudnn"`
	// AMP is mixed precision: autocast to float16 with loss scaling on a
	// GPU, to bfloat16 on the CPU.
	AMP   bool `json:"amp"`
	Steps int  `json:"steps"`
	Batch int  `json:"batch"`
}

// Target is one GPU a workload process is given alone.
type Target struct {
	// Index is the GPU's place among the GPUs verify's environment shows
	// (its CUDA ordinal there).
	Index int `json:"index"`
	// Visible is the CUDA_VISIBLE_DEVICES value that shows this GPU
	// alone: its UUID, or the entry of CUDA_VISIBLE_DEVICES that names it.
	Visible    string `json:"cuda_visible_devices"`
	Name       string `json:"name,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	Capability string `json:"compute_capability,omitempty"`
}

// Job is one run of a workload.
type Job struct {
	Workload
	Config Config
	// Target is the GPU the process sees alone; nil leaves
	// CUDA_VISIBLE_DEVICES as it is.
	Target *Target
	// Env is added to the launcher's environment.
	Env []string
}

// Outcome is how a workload ended.
type Outcome string

// The outcomes. OnGPU is success on a GPU, OnCPU on the CPU when the CPU
// was asked for.
const (
	OnGPU      Outcome = "on_gpu"      // trained on a GPU, and the loss fell
	OnCPU      Outcome = "on_cpu"      // trained on the CPU, as asked, and the loss fell
	NotOnGPU   Outcome = "not_on_gpu"  // ran, but the framework found no GPU
	Failed     Outcome = "failed"      // the script reported an error
	Crashed    Outcome = "crashed"     // the interpreter died without a result
	TimedOut   Outcome = "timed_out"   // killed at the timeout
	NotStarted Outcome = "not_started" // the interpreter could not be started
)

// Identity is whom a workload ran as, as it saw itself.
type Identity struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups"`
	Home   string   `json:"home"`
}

// Result is one workload's run.
type Result struct {
	Workload
	Target *Target `json:"gpu,omitempty"`
	Config Config  `json:"config"`
	// Env is what the run added to the environment (CUDA_VISIBLE_DEVICES,
	// CUDA_LAUNCH_BLOCKING).
	Env     []string `json:"env,omitempty"`
	Outcome Outcome  `json:"outcome"`
	// Version, BuildCUDA and CuDNNVersion are what the framework said
	// about itself; Device and Capability about the GPU it ran on.
	Version      string `json:"version,omitempty"`
	BuildCUDA    string `json:"build_cuda,omitempty"`
	CuDNNVersion string `json:"cudnn_version,omitempty"`
	Device       string `json:"device,omitempty"`
	Capability   string `json:"compute_capability,omitempty"`
	// CuDNN says whether cuDNN was on; AMP is the mixed-precision type
	// ("float16", "bfloat16"), "" without.
	CuDNN bool   `json:"cudnn"`
	AMP   string `json:"amp,omitempty"`
	// Steps and Losses are the training steps run and each one's loss.
	Steps  int       `json:"steps,omitempty"`
	Losses []float64 `json:"losses,omitempty"`
	// StepSeconds is the median step after the first; FirstStepSeconds
	// the first (which compiles and autotunes); Seconds all of them.
	StepSeconds      float64 `json:"step_seconds,omitempty"`
	FirstStepSeconds float64 `json:"first_step_seconds,omitempty"`
	Seconds          float64 `json:"seconds,omitempty"`
	// MemoryPeak is the most GPU memory the framework held; MemoryFree
	// and MemoryTotal the GPU's at the end (or when it failed).
	MemoryPeak  uint64 `json:"memory_peak_bytes,omitempty"`
	MemoryFree  uint64 `json:"memory_free_bytes,omitempty"`
	MemoryTotal uint64 `json:"memory_total_bytes,omitempty"`
	// TensorsOnDevice counts the parameters and inputs found on the
	// device before training.
	TensorsOnDevice int       `json:"tensors_on_device,omitempty"`
	Identity        *Identity `json:"identity,omitempty"`
	// Elapsed is the whole run, interpreter start-up and import included.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Phase is where the workload was when it failed: import, device,
	// data, model, forward, backward, optimizer, step, check.
	Phase string `json:"phase,omitempty"`
	// Kind classifies the error (Kinds).
	Kind Kind `json:"kind,omitempty"`
	// Error is the framework's error, or why the run ended without one.
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
	// Stderr is the end of what the interpreter wrote to stderr.
	Stderr string `json:"stderr,omitempty"`
	// Narrowing says which layer a failure follows, from the runs
	// repeated with one thing changed.
	Narrowing *Narrowing `json:"narrowing,omitempty"`
	// OutOfMemory says, when the GPU ran out of memory, who holds it and
	// what to try.
	OutOfMemory *OutOfMemory `json:"out_of_memory,omitempty"`
}

// OK reports whether the workload trained where it was asked to.
func (r Result) OK() bool {
	return r.Outcome == OnGPU || r.Outcome == OnCPU && r.Config.Device == CPU
}

// report is the JSON line a workload script prints.
type report struct {
	Marker          int       `json:"gpuenv_verify"`
	Framework       string    `json:"framework"`
	Version         string    `json:"version"`
	BuildCUDA       string    `json:"build_cuda"`
	CuDNNVersion    string    `json:"cudnn_version"`
	Device          string    `json:"device"`
	Capability      string    `json:"capability"`
	CuDNN           bool      `json:"cudnn"`
	AMP             string    `json:"amp"`
	OnGPU           bool      `json:"on_gpu"`
	NoGPU           bool      `json:"no_gpu"`
	Phase           string    `json:"phase"`
	Steps           int       `json:"steps"`
	Losses          []float64 `json:"losses"`
	StepSeconds     float64   `json:"step_seconds"`
	FirstStep       float64   `json:"first_step_seconds"`
	Seconds         float64   `json:"seconds"`
	MemoryPeak      uint64    `json:"memory_peak"`
	MemoryFree      uint64    `json:"memory_free"`
	MemoryTotal     uint64    `json:"memory_total"`
	TensorsOnDevice int       `json:"tensors_on_device"`
	Identity        *Identity `json:"identity"`
	Error           string    `json:"error"`
	ErrorType       string    `json:"error_type"`
}

// parse finds the last line of stdout that is a workload report;
// frameworks print their own lines before it.
func parse(stdout []byte) (report, bool) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r report
		if err := json.Unmarshal([]byte(line), &r); err == nil && r.Marker == 1 {
			return r, true
		}
	}
	return report{}, false
}

// maxReportOutput bounds what verify keeps of a workload's standard
// output: its report is the last line, a few kilobytes, and what a
// framework prints before it is not read.
const maxReportOutput = 1 << 20

// Run runs j's workload, killed with its helper processes after the
// launcher's timeout (DefaultTimeout when zero).
func (l *Launcher) Run(ctx context.Context, j Job) Result {
	res := Result{Workload: j.Workload, Target: j.Target, Config: j.Config}
	script, err := Script(j.Framework)
	if err != nil {
		res.Outcome, res.Error = NotStarted, err.Error()
		return res
	}
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	env := l.Env
	if j.Target != nil {
		res.Env = append(res.Env, "CUDA_VISIBLE_DEVICES="+j.Target.Visible)
	}
	res.Env = append(res.Env, j.Env...)
	for _, kv := range res.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = SetEnv(env, k, v)
	}
	cfg, err := json.Marshal(j.Config)
	if err != nil {
		res.Outcome, res.Error = NotStarted, err.Error()
		return res
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Both ends are bounded: a workload may print without end.
	stdout, stderr := childproc.Tail{Max: maxReportOutput}, childproc.Tail{}
	start := time.Now()
	// python -c SCRIPT FRAMEWORK CONFIG: sys.argv[1] is the framework's
	// name, sys.argv[2] what to do.
	err = l.Runner.Run(rctx, l.command([]string{j.Interpreter, "-c", script, j.Framework, string(cfg)}, env, &stdout, &stderr))
	res.Elapsed = time.Since(start)
	res.Stderr = stderr.Text(0)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
	}
	rep, parsed := parse(stdout.Bytes())
	switch {
	case rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		res.Outcome = TimedOut
		res.Error = fmt.Sprintf("no result within %s: killed", timeout)
		if parsed {
			res.Phase = rep.Phase
		}
		return res
	case ctx.Err() != nil:
		res.Outcome, res.Error = Failed, "interrupted: "+ctx.Err().Error()
		return res
	case err != nil && exit == nil:
		res.Outcome, res.Error = NotStarted, err.Error()
		return res
	case !parsed && exit != nil && (exit.ExitCode() == 126 || exit.ExitCode() == 127) && stdout.Len() == 0:
		// The shell's and chroot's codes for a program that is missing or
		// cannot be executed.
		res.Outcome = NotStarted
		res.Error = fmt.Sprintf("%s could not be started (exit status %d)", j.Interpreter, exit.ExitCode())
		return res
	case !parsed:
		res.Outcome = Crashed
		res.Error = "the interpreter ended without a result"
		if exit != nil {
			if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Error = fmt.Sprintf("the interpreter was killed by signal %d (%s) before printing a result", int(ws.Signal()), ws.Signal())
			} else {
				res.Error = fmt.Sprintf("the interpreter exited with status %d before printing a result", exit.ExitCode())
			}
		}
		res.Kind = classify(res.Error, res.Stderr, "")
		return res
	}
	res.fill(rep)
	switch {
	case rep.OnGPU && rep.Error == "" && err == nil:
		res.Outcome = OnGPU
	case j.Config.Device == CPU && rep.Phase == "done" && rep.Error == "" && err == nil:
		res.Outcome = OnCPU
	case rep.NoGPU:
		res.Outcome = NotOnGPU
	case !rep.OnGPU && rep.Error == "":
		res.Outcome = NotOnGPU
		res.Error = "the model was not trained on a GPU"
	default:
		res.Outcome = Failed
		if res.Error == "" {
			res.Error = fmt.Sprintf("the interpreter exited with status %d after its result", res.ExitCode)
		}
		res.Kind = classify(res.Error, res.Stderr, rep.ErrorType)
	}
	return res
}

// fill copies what the script reported.
func (r *Result) fill(rep report) {
	r.Version, r.BuildCUDA, r.CuDNNVersion = rep.Version, rep.BuildCUDA, rep.CuDNNVersion
	r.Device, r.Capability, r.CuDNN, r.AMP = rep.Device, rep.Capability, rep.CuDNN, rep.AMP
	r.Steps, r.Losses = rep.Steps, rep.Losses
	r.StepSeconds, r.FirstStepSeconds, r.Seconds = rep.StepSeconds, rep.FirstStep, rep.Seconds
	r.MemoryPeak, r.MemoryFree, r.MemoryTotal = rep.MemoryPeak, rep.MemoryFree, rep.MemoryTotal
	r.TensorsOnDevice, r.Identity = rep.TensorsOnDevice, rep.Identity
	r.Error = rep.Error
	if rep.Error != "" {
		r.Phase = rep.Phase
	}
}
