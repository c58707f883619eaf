package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/verify"
)

func init() {
	commands = append(commands, newVerifyCmd)
}

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
	h, err := openHost(g)
	if err != nil {
		return err
	}
	obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
	work := verify.Workloads(obs)
	if len(work) == 0 {
		if g.JSON {
			if err := writeJSON(g, verifyReport{FormatVersion: "1.0", Root: obs.Root, Results: []verify.Result{}, Explanation: []doctor.Check{}}); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(g.Stderr, "Nothing to verify: no PyTorch, TensorFlow or JAX in the system's Python%s.\n", pythonsText(pythons))
			fmt.Fprintln(g.Stderr, "Name a virtual environment's interpreter with --python.")
		}
		return &exitCodeError{code: exitError}
	}
	runner, err := host.New(g.Root, append(slices.Clone(hostOptions), host.WithRunner(verifyRunner))...)
	if err != nil {
		return err
	}
	p := &printer{w: g.Stdout}
	if !g.JSON {
		p.printf("Verifying %s in %s (timeout %s each)\n", countWord(len(work), "workload"), g.Root, timeout)
	}
	rep := verifyReport{FormatVersion: "1.0", Root: obs.Root, Verified: true}
	var failed []verify.Result
	nodesBefore := deviceNodes(h)
	for _, w := range work {
		r := verify.Run(ctx, runner, w, timeout)
		rep.Results = append(rep.Results, r)
		if !r.OK() {
			rep.Verified = false
			failed = append(failed, r)
		}
		if !g.JSON {
			writeResult(p, r)
		}
	}
	for p := range deviceNodes(h) {
		if !nodesBefore[p] {
			rep.CreatedDeviceNodes = append(rep.CreatedDeviceNodes, p)
		}
	}
	slices.Sort(rep.CreatedDeviceNodes)
	if len(rep.CreatedDeviceNodes) > 0 && !g.JSON {
		p.printf("The workloads created device files that were not there: %s (the driver's libraries make them when they run as root).\n", strings.Join(rep.CreatedDeviceNodes, ", "))
	}
	rep.Explanation = []doctor.Check{}
	if len(failed) > 0 {
		dr, err := doctorReport(g, h, obs)
		if err != nil {
			return err
		}
		rep.Explanation = explain(dr, failed)
	}
	if g.JSON {
		if err := writeJSON(g, rep); err != nil {
			return err
		}
	} else if len(failed) > 0 {
		if len(rep.Explanation) == 0 {
			p.printf("\ngpuenv doctor finds nothing on the host that explains it; the output above is the framework's own.\n")
		} else {
			p.printf("\nWhy, according to gpuenv doctor:\n")
			for _, c := range rep.Explanation {
				writeCheck(p, c)
			}
		}
	}
	if p.err != nil {
		return p.err
	}
	if !rep.Verified {
		return &exitCodeError{code: exitChanges}
	}
	return nil
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
