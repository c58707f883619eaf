package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/verify"
)

// verifyRunner runs the workloads. It kills each workload's whole process
// group at the timeout; test-only entry points replace it, as they replace
// NVML, so that no flag of the real binary can.
var verifyRunner host.Runner = verify.ProcessGroupRunner{}

func newVerifyCmd(g *globalOptions) *cobra.Command {
	var pythons []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run a small GPU workload in every framework found, and say why one fails",
		Long: `Verify is the smallest reproduction of "my model cannot use the GPU": in each
PyTorch, TensorFlow and JAX installation it finds (the system's Python and
every --python INTERPRETER), it allocates two matrices on the first GPU,
multiplies them and waits for the result, then reports the GPU's name, the
CUDA version the framework was built for and how long the product took.
The workloads are Python scripts built into gpuenv; they run with the
root's own interpreter (under chroot when --root is not "/"), each killed
with its helper processes after --timeout.

When a workload fails or runs without a GPU, verify prints what gpuenv
doctor finds on the host that explains it.

Exit status: 0 every workload ran on a GPU; 2 a workload ran but not on a
GPU, or failed; 1 nothing to verify (no framework found) or verify could not
run.`,
		Example: `  gpuenv verify
  gpuenv verify --python /opt/venv/bin/python --timeout 2m
  sudo gpuenv --root /mnt/image verify --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout %s must be positive", timeout)
			}
			return runVerify(cmd, g, pythons, timeout)
		},
	}
	repeatable(cmd.Flags(), &pythons, "python", "also verify the frameworks of `INTERPRETER`, a path inside the root (repeatable)")
	cmd.Flags().DurationVar(&timeout, "timeout", verify.DefaultTimeout, "kill a workload that has not finished after `D`")
	addJSONFlag(cmd, g)
	return cmd
}

// verifyReport is verify's JSON document.
type verifyReport struct {
	FormatVersion string          `json:"format_version"`
	Root          string          `json:"root"`
	Results       []verify.Result `json:"results"`
	// Verified is true when every workload ran on a GPU.
	Verified bool `json:"verified"`
	// Explanation holds doctor's checks that explain a failure: its
	// problems, and the warnings about a failed framework.
	Explanation []doctor.Check `json:"explanation"`
	// CreatedDeviceNodes are the device files (/dev/nvidia*) that were not
	// there before the workloads ran: the driver's libraries create them
	// when they run as root. verify, unlike the commands that only look,
	// may do that, and says so.
	CreatedDeviceNodes []string `json:"created_device_nodes,omitempty"`
}

// deviceNodes lists the root's NVIDIA device files.
func deviceNodes(h *host.Host) map[string]bool {
	out := map[string]bool{}
	for _, pat := range []string{"/dev/nvidia*", "/dev/nvidia-caps/*"} {
		m, _ := h.Glob(pat)
		for _, p := range m {
			out[p] = true
		}
	}
	return out
}

func runVerify(cmd *cobra.Command, g *globalOptions, pythons []string, timeout time.Duration) error {
	ctx := cmd.Context()
	v := newVerifyView(g)
	h, err := openHost(g)
	if err != nil {
		return err
	}
	obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
	work := verify.Workloads(obs)
	if len(work) == 0 {
		rep := &verifyReport{FormatVersion: "1.0", Root: obs.Root, Results: []verify.Result{}, Explanation: []doctor.Check{}}
		if err := v.NothingToVerify(rep, pythons); err != nil {
			return err
		}
		return &exitCodeError{code: exitError}
	}
	runner, err := host.New(g.Root, append(slices.Clone(hostOptions), host.WithRunner(verifyRunner))...)
	if err != nil {
		return err
	}
	if err := v.Start(len(work), timeout); err != nil {
		return err
	}
	rep := &verifyReport{FormatVersion: "1.0", Root: obs.Root, Verified: true}
	var failed []verify.Result
	nodesBefore := deviceNodes(h)
	for _, w := range work {
		r := verify.Run(ctx, runner, w, timeout)
		rep.Results = append(rep.Results, r)
		if !r.OK() {
			rep.Verified = false
			failed = append(failed, r)
		}
		if err := v.Result(r); err != nil {
			return err
		}
	}
	for p := range deviceNodes(h) {
		if !nodesBefore[p] {
			rep.CreatedDeviceNodes = append(rep.CreatedDeviceNodes, p)
		}
	}
	slices.Sort(rep.CreatedDeviceNodes)
	if err := v.CreatedDeviceNodes(rep.CreatedDeviceNodes); err != nil {
		return err
	}
	rep.Explanation = []doctor.Check{}
	if len(failed) > 0 {
		dr, err := doctorReport(g, h, obs)
		if err != nil {
			return err
		}
		rep.Explanation = explain(dr, failed)
	}
	if err := v.Report(rep); err != nil {
		return err
	}
	if !rep.Verified {
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// verifyView shows verify's progress and result, for a person or as JSON;
// the flags choose one, once, in newVerifyView. Each method returns the
// first write error.
type verifyView interface {
	// NothingToVerify says that no framework was found; rep is the empty
	// report and pythons are the --python interpreters.
	NothingToVerify(rep *verifyReport, pythons []string) error
	// Start comes before the first of n workloads runs.
	Start(n int, timeout time.Duration) error
	// Result comes after each workload.
	Result(r verify.Result) error
	// CreatedDeviceNodes comes after the last workload, with the device
	// files the workloads created (often none).
	CreatedDeviceNodes(paths []string) error
	// Report comes last, with the whole report.
	Report(rep *verifyReport) error
}

// newVerifyView chooses verify's view from the flags: the report as one
// JSON document at the end with --json, else lines for a person as each
// workload finishes.
func newVerifyView(g *globalOptions) verifyView {
	if g.JSON {
		return &verifyJSON{g: g}
	}
	return &verifyHuman{out: printer{w: g.Stdout}, errw: g.Stderr, root: g.Root}
}

// verifyJSON prints the report, and nothing before it.
type verifyJSON struct {
	g *globalOptions
}

var _ verifyView = (*verifyJSON)(nil)

func (v *verifyJSON) NothingToVerify(rep *verifyReport, _ []string) error {
	return writeJSON(v.g, rep)
}

func (v *verifyJSON) Start(int, time.Duration) error    { return nil }
func (v *verifyJSON) Result(verify.Result) error        { return nil }
func (v *verifyJSON) CreatedDeviceNodes([]string) error { return nil }

func (v *verifyJSON) Report(rep *verifyReport) error {
	return writeJSON(v.g, rep)
}

// verifyHuman prints a line per workload as it finishes, then, when one
// failed, doctor's explanation.
type verifyHuman struct {
	// out is stdout; it keeps the first write error.
	out printer
	// errw is stderr, for saying that there is nothing to verify.
	errw io.Writer
	// root is --root as the user wrote it.
	root string
}

var _ verifyView = (*verifyHuman)(nil)

func (v *verifyHuman) NothingToVerify(_ *verifyReport, pythons []string) error {
	p := &printer{w: v.errw}
	p.printf("Nothing to verify: no PyTorch, TensorFlow or JAX in the system's Python%s.\n", pythonsText(pythons))
	p.printf("Name a virtual environment's interpreter with --python.\n")
	return p.err
}

func (v *verifyHuman) Start(n int, timeout time.Duration) error {
	v.out.printf("Verifying %s in %s (timeout %s each)\n", countWord(n, "workload"), v.root, timeout)
	return v.out.err
}

func (v *verifyHuman) Result(r verify.Result) error {
	writeResult(&v.out, r)
	return v.out.err
}

func (v *verifyHuman) CreatedDeviceNodes(paths []string) error {
	if len(paths) > 0 {
		v.out.printf("The workloads created device files that were not there: %s (the driver's libraries make them when they run as root).\n", strings.Join(paths, ", "))
	}
	return v.out.err
}

func (v *verifyHuman) Report(rep *verifyReport) error {
	if rep.Verified {
		return v.out.err
	}
	if len(rep.Explanation) == 0 {
		v.out.printf("\ngpuenv doctor finds nothing on the host that explains it; the output above is the framework's own.\n")
	} else {
		v.out.printf("\nWhy, according to gpuenv doctor:\n")
		for _, c := range rep.Explanation {
			writeCheck(&v.out, c)
		}
	}
	return v.out.err
}

func pythonsText(pythons []string) string {
	if len(pythons) == 0 {
		return ""
	}
	return " or in " + strings.Join(pythons, ", ")
}

// explain picks doctor's checks that bear on the failed workloads: every
// problem, and any warning about one of those frameworks.
func explain(r *doctor.Report, failed []verify.Result) []doctor.Check {
	var out []doctor.Check
	for _, c := range r.Checks {
		switch c.Status {
		case doctor.Problem:
			out = append(out, c)
		case doctor.Warning:
			for _, f := range failed {
				if strings.HasSuffix(c.ID, ":"+doctor.FrameworkID(f.Interpreter, f.Framework)) {
					out = append(out, c)
					break
				}
			}
		}
	}
	return out
}

func writeResult(p *printer, r verify.Result) {
	v := r.Version
	if v == "" {
		v = r.Workload.Version
	}
	what := strings.TrimSpace(fmt.Sprintf("%s %s", r.Framework, v)) + " in " + r.Interpreter
	if r.OK() {
		line := fmt.Sprintf("  ✓ %s: %s", what, r.Device)
		if r.BuildCUDA != "" {
			line += ", built for CUDA " + r.BuildCUDA
		}
		p.printf("%s; matrix product in %.3f s\n", line, r.Seconds)
		return
	}
	how := map[verify.Outcome]string{
		verify.NotOnGPU:   "ran, but not on a GPU",
		verify.Failed:     "failed",
		verify.Crashed:    "crashed",
		verify.TimedOut:   "timed out",
		verify.NotStarted: "did not start",
	}[r.Outcome]
	p.printf("  ✗ %s %s: %s\n", what, how, r.Error)
	if r.BuildCUDA != "" {
		p.printf("      built for CUDA %s\n", r.BuildCUDA)
	}
	for _, line := range strings.Split(r.Stderr, "\n") {
		if line != "" {
			p.printf("      stderr: %s\n", line)
		}
	}
}
