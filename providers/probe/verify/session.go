package verify

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
)

// Options are what Verify runs and how.
type Options struct {
	Launcher  *Launcher
	Workloads []Workload
	Device    Device
	// CUDAOnly runs the framework-free check alone.
	CUDAOnly bool
	// CUDACheck starts the framework-free check's child (Launcher's
	// CUDACheck); nil when it cannot run, SkipCUDACheck saying why.
	CUDACheck     cudacheck.Start
	SkipCUDACheck string
	// Obs is the host as observed before: its GPUs when the check cannot
	// list them, and the processes holding their memory.
	Obs *facts.Observation
	// Files reads /proc and /etc/passwd, for the users and command lines
	// of the processes holding GPU memory.
	Files FileReader
	// Steps and Batch size the training (DefaultSteps, DefaultBatch when
	// zero).
	Steps, Batch int
	// Checked, when set, is called after the framework-free check, and
	// Done after each workload with its results on every GPU, narrowed.
	Checked func(c *cudacheck.Report)
	Done    func(rs []Result)
	// Running, when set, is told what runs now, for a live view: the
	// framework-free check (w nil), then each workload, on targets
	// (nil: the one process that sees what the environment shows);
	// Finished, when set, is told each target's end, with its index
	// in targets. Finished may be called from several goroutines at
	// once.
	Running  func(w *Workload, targets []*Target)
	Finished func(i int, r Result)
}

// Report is the whole verification.
type Report struct {
	// User is whom the workloads ran as; nil when as gpuenv itself.
	User   *User  `json:"user"`
	Device Device `json:"device"`
	// CUDACheck is the framework-free check; nil when it did not run,
	// CUDACheckSkipped saying why.
	CUDACheck        *cudacheck.Report `json:"cuda_check,omitempty"`
	CUDACheckSkipped string            `json:"cuda_check_skipped,omitempty"`
	// GPUs are the GPUs each workload ran on, one process each.
	GPUs    []Target `json:"gpus"`
	Results []Result `json:"results"`
	// Verified is true when every check that ran passed on every GPU.
	Verified bool `json:"verified"`
}

// CUDACheck returns the Start that runs the framework-free check's child
// as the launcher's user, with the launcher's environment: exe is the
// program (gpuenv itself) and argv its command line up to the first
// device's ordinal, which comes after "--from".
func (l *Launcher) CUDACheck(exe string, argv []string) cudacheck.Start {
	return func(ctx context.Context, from int, stdout, stderr io.Writer) error {
		c := l.command(append(slices.Clone(argv), "--from", strconv.Itoa(from)), l.Env, stdout, stderr)
		c.Path = exe
		return l.Runner.Run(ctx, c)
	}
}

// Verify runs the framework-free check, then each workload on every GPU,
// narrows every failure and explains every out-of-memory.
func Verify(ctx context.Context, o Options) *Report {
	l := o.Launcher
	rep := &Report{User: l.User, Device: o.Device, GPUs: []Target{}, Results: []Result{}}
	switch {
	case o.Device == CPU:
		rep.CUDACheckSkipped = "the workloads run on the CPU (--device cpu)"
	case o.CUDACheck == nil:
		rep.CUDACheckSkipped = o.SkipCUDACheck
	default:
		timeout := l.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		if o.Running != nil {
			o.Running(nil, nil)
		}
		rep.CUDACheck = cudacheck.Run(ctx, o.CUDACheck, timeout)
		if o.Checked != nil {
			o.Checked(rep.CUDACheck)
		}
	}
	rep.Verified = rep.CUDACheck == nil || rep.CUDACheck.OK()
	if o.CUDAOnly {
		return rep
	}
	cfg := Config{Device: o.Device, CuDNN: true, AMP: true, Steps: o.Steps, Batch: o.Batch}
	if cfg.Steps <= 0 {
		cfg.Steps = DefaultSteps
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	var targets []*Target
	if o.Device == GPU {
		rep.GPUs = gpuTargets(l.Env, rep.CUDACheck, o.Obs)
		for i := range rep.GPUs {
			targets = append(targets, &rep.GPUs[i])
		}
	}
	if len(targets) == 0 {
		// On the CPU, or with no GPU known: one process, which sees what
		// the environment shows.
		targets = []*Target{nil}
	}
	for _, w := range o.Workloads {
		rs := make([]Result, len(targets))
		if o.Running != nil {
			o.Running(&w, targets)
		}
		var wg sync.WaitGroup
		for i, t := range targets {
			wg.Go(func() {
				j := Job{Workload: w, Config: cfg, Target: t}
				r := l.Run(ctx, j)
				r.Narrowing = l.narrow(ctx, j, r, driverOn(rep.CUDACheck, t))
				if r.Kind == KindOutOfMemory && o.Device == GPU {
					r.OutOfMemory = outOfMemory(r, o.Obs, o.Files)
				}
				rs[i] = r
				if o.Finished != nil {
					o.Finished(i, r)
				}
			})
		}
		wg.Wait()
		for _, r := range rs {
			rep.Verified = rep.Verified && r.OK()
		}
		rep.Results = append(rep.Results, rs...)
		if o.Done != nil {
			o.Done(rs)
		}
	}
	return rep
}

// gpuTargets are the GPUs the workloads run on, one process each: the
// entries of CUDA_VISIBLE_DEVICES when the environment sets it (as many
// as CUDA accepted, when the check counted them); else every GPU the
// check found, or NVML listed, each shown to its process by UUID.
func gpuTargets(env []string, check *cudacheck.Report, obs *facts.Observation) []Target {
	out := []Target{}
	checked := func(i int) *cudacheck.Device {
		if check == nil {
			return nil
		}
		for k := range check.Devices {
			if check.Devices[k].Ordinal == i {
				return &check.Devices[k]
			}
		}
		return nil
	}
	if v, set := Getenv(env, "CUDA_VISIBLE_DEVICES"); set {
		var entries []string
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
		// CUDA stops at the first entry that names no GPU.
		if check != nil && check.Count >= 0 && check.Count < len(entries) {
			entries = entries[:check.Count]
		}
		for i, e := range entries {
			t := Target{Index: i, Visible: e}
			if d := checked(i); d != nil {
				t.Name, t.UUID, t.Capability = d.Name, d.UUID, d.Capability
			}
			out = append(out, t)
		}
		return out
	}
	if check != nil && check.Count > 0 {
		for i := range check.Count {
			t := Target{Index: i, Visible: strconv.Itoa(i)}
			if d := checked(i); d != nil {
				t.Name, t.UUID, t.Capability = d.Name, d.UUID, d.Capability
				if d.UUID != "" {
					t.Visible = d.UUID
				}
			}
			out = append(out, t)
		}
		return out
	}
	if obs != nil {
		for _, d := range obs.NVML.Devices {
			t := Target{Index: d.Index, Visible: strconv.Itoa(d.Index), Name: d.Name, UUID: d.UUID, Capability: d.ComputeCapability}
			if d.UUID != "" {
				t.Visible = d.UUID
			}
			out = append(out, t)
		}
	}
	return out
}

// driverOn is what the framework-free check found on t's GPU. A check
// that failed before any device failed for every GPU.
func driverOn(check *cudacheck.Report, t *Target) driverState {
	if check == nil || check.NotStarted != "" || t == nil {
		return driverState{}
	}
	if check.Failure != nil {
		return driverState{checked: true, fault: check.Failure.String()}
	}
	for _, d := range check.Devices {
		if d.Ordinal != t.Index {
			continue
		}
		if d.OK() {
			return driverState{checked: true}
		}
		if d.Failure != nil {
			return driverState{checked: true, fault: d.Failure.String()}
		}
		return driverState{checked: true, fault: "the check did not finish"}
	}
	return driverState{}
}
