// Package verify runs a small real workload in each machine-learning
// framework a host has — allocate on the GPU, multiply two matrices, wait
// for the result — and reports whether it ran on a GPU. The workloads are
// Python scripts embedded in gpuenv; each prints one JSON line that verify
// parses. They run through the host handle, so inside a root other than
// "/" they run under chroot, with the root's own interpreter.
package verify

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// DefaultTimeout bounds one workload: importing a framework and starting
// CUDA takes seconds, the product itself milliseconds.
const DefaultTimeout = 60 * time.Second

//go:embed scripts/*.py
var scripts embed.FS

// Script returns the embedded workload of a framework ("pytorch",
// "tensorflow", "jax").
func Script(framework string) (string, error) {
	b, err := scripts.ReadFile("scripts/" + framework + ".py")
	if err != nil {
		return "", fmt.Errorf("no workload for framework %q", framework)
	}
	return string(b), nil
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

// Outcome is how a workload ended.
type Outcome string

// The outcomes. Only OnGPU is success.
const (
	OnGPU      Outcome = "on_gpu"      // ran, and the product was computed on a GPU
	NotOnGPU   Outcome = "not_on_gpu"  // ran, but the framework found no GPU
	Failed     Outcome = "failed"      // the script reported an error
	Crashed    Outcome = "crashed"     // the interpreter died without a result
	TimedOut   Outcome = "timed_out"   // killed at the timeout
	NotStarted Outcome = "not_started" // the interpreter could not be started
)

// Result is one workload's run.
type Result struct {
	Workload
	Outcome Outcome `json:"outcome"`
	// Version, BuildCUDA and Device are what the framework said about
	// itself: its version, the CUDA it was built for, the GPU it ran on.
	Version   string `json:"version,omitempty"`
	BuildCUDA string `json:"build_cuda,omitempty"`
	Device    string `json:"device,omitempty"`
	// Seconds is how long the allocation, product and synchronisation
	// took, as the script measured it.
	Seconds float64 `json:"seconds,omitempty"`
	// Elapsed is the whole run, interpreter start-up and import included.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Error is the script's error, or why the run ended without one.
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
	// Stderr is the end of what the interpreter wrote to stderr.
	Stderr string `json:"stderr,omitempty"`
}

// OK reports whether the workload ran on a GPU.
func (r Result) OK() bool { return r.Outcome == OnGPU }

// report is the JSON line a workload script prints.
type report struct {
	Marker    int     `json:"gpuenv_verify"`
	Framework string  `json:"framework"`
	Version   string  `json:"version"`
	BuildCUDA string  `json:"build_cuda"`
	Device    string  `json:"device"`
	OnGPU     bool    `json:"on_gpu"`
	NoGPU     bool    `json:"no_gpu"`
	Seconds   float64 `json:"seconds"`
	Error     string  `json:"error"`
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

// stderrTail keeps the last lines of stderr, where a crash says why.
func stderrTail(b []byte) string {
	const keep = 12
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// Run runs w's workload on h, killed after timeout (DefaultTimeout when
// zero). h's runner must end the whole process group when the context
// ends (ProcessGroupRunner does): a framework starts helper processes.
func Run(ctx context.Context, h *host.Host, w Workload, timeout time.Duration) Result {
	res := Result{Workload: w}
	script, err := Script(w.Framework)
	if err != nil {
		res.Outcome, res.Error = NotStarted, err.Error()
		return res
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	// python -c SCRIPT FRAMEWORK: the framework's name is sys.argv[1].
	err = h.Run(rctx, host.Command{
		Argv:   []string{w.Interpreter, "-c", script, w.Framework},
		Stdout: &stdout,
		Stderr: &stderr,
	})
	res.Elapsed = time.Since(start)
	res.Stderr = stderrTail(stderr.Bytes())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
	}
	rep, parsed := parse(stdout.Bytes())
	switch {
	case rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		res.Outcome = TimedOut
		res.Error = fmt.Sprintf("no result within %s: killed", timeout)
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
		res.Error = fmt.Sprintf("%s could not be started (exit status %d)", w.Interpreter, exit.ExitCode())
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
		return res
	}
	res.Version, res.BuildCUDA, res.Device, res.Seconds = rep.Version, rep.BuildCUDA, rep.Device, rep.Seconds
	res.Error = rep.Error
	switch {
	case rep.OnGPU && rep.Error == "" && err == nil:
		res.Outcome = OnGPU
	case rep.NoGPU:
		res.Outcome = NotOnGPU
	case !rep.OnGPU && rep.Error == "":
		res.Outcome = NotOnGPU
		res.Error = "the product was not computed on a GPU"
	default:
		res.Outcome = Failed
		if res.Error == "" {
			res.Error = fmt.Sprintf("the interpreter exited with status %d after its result", res.ExitCode)
		}
	}
	return res
}

// ProcessGroupRunner runs each command as the leader of its own process
// group and, when the context ends, kills the whole group: a framework's
// helper processes (compilers, data loaders) must not outlive a timed-out
// workload, nor keep its output pipes open.
type ProcessGroupRunner struct{}

var _ host.Runner = ProcessGroupRunner{}

// waitDelay is how long Run waits for the pipes to close after the
// process ended or was killed.
const waitDelay = 2 * time.Second

// Run starts c.Argv[0] found on PATH and waits for it.
func (ProcessGroupRunner) Run(ctx context.Context, c host.Command) error {
	cmd, err := c.Process(ctx)
	if err != nil {
		return err
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	if cmd.Process != nil {
		// Whatever the leader left behind goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", c.Argv[0], err)
	}
	return nil
}
