package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
	"github.com/gpuenv/gpuenv/spec"
)

// verifyRunner runs the workloads and the framework-free check's child.
// It kills each one's whole process group at the timeout; test-only entry
// points replace it, as they replace NVML, so that no flag of the real
// binary can.
var verifyRunner verify.Runner = verify.ProcessGroupRunner{}

// verifyOptions are verify's flags.
type verifyOptions struct {
	vars     varFlags
	pythons  []string
	env      []string
	timeout  time.Duration
	cudaOnly bool
	device   string
	user     string
	steps    int
	batch    int
}

func newVerifyCmd(g *globalOptions) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [PATH]",
		Short: "Check the GPU with and without each framework, on every GPU, as the user, and say why it fails",
		Long: `Verify is the troubleshooting guide's minimal reproduction, run for real.

First, without any framework, it loads the driver's libcuda.so.1 and on
every GPU creates a context, allocates, copies, JIT-compiles a vector-add
kernel from PTX built into gpuenv, runs it and checks the sums: the driver
and the GPU alone. This check runs in a child process, so a crash in the
driver does not take gpuenv down. --cuda-only stops there.

Then, in each PyTorch, TensorFlow and JAX installation found (the system's
Python, every --python INTERPRETER, and the frameworks of the spec at PATH
when one is given), it trains a tiny convolutional classifier on synthetic
MNIST-shaped data for a few steps, one process per GPU, with cuDNN and mixed
precision: every parameter and input must be on the GPU, the loss finite and
falling. It reports each GPU's name and compute capability, the framework's
CUDA and cuDNN versions, the step time and the peak and free memory.

A step that fails is run again with CUDA_LAUNCH_BLOCKING=1, without cuDNN
and without mixed precision, and verify says which layer the failure
follows (driver, CUDA runtime, cuDNN, mixed precision, the device); out of
memory says how much was free, which processes hold the rest, and what to
try. Then it prints what gpuenv doctor finds that explains the failures.

Everything runs as the user (--user, by default SUDO_USER under sudo): with
their uid, groups, HOME, USER, LOGNAME and SHELL, and with standard input,
output and error only, whatever else gpuenv was given open. As sudo's
env_reset, the workloads get an environment built afresh, not gpuenv's own:
a safe PATH (` + verify.SafePath + `), the locale
(LANG, LANGUAGE, LC_*), TERM and TZ, and the CUDA_* and NVIDIA_* variables
verify was started with (CUDA_VISIBLE_DEVICES included); then the
environment block of the spec at PATH, then each --env NAME=VALUE. Inside a --root other than "/" they
run under chroot with the root's interpreter, and the framework-free check,
which needs this machine's driver, does not run.

--device cpu runs the same workloads on the CPU in one process (mixed
precision in bfloat16), to check them on a machine without a GPU.

Exit status: 0 every check ran on every GPU; 2 a check ran but the GPU path
failed; 1 nothing to verify or verify could not run.`,
		Example: `  sudo gpuenv verify
  gpuenv verify --cuda-only
  sudo gpuenv verify --user alice --python /opt/venv/bin/python --timeout 2m
  sudo gpuenv verify --user alice --env LD_LIBRARY_PATH=/opt/nccl/lib
  gpuenv verify examples/pytorch-workstation
  gpuenv verify --device cpu --json`,
		ValidArgsFunction: completeSpecPaths,
		Args:              cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runVerify(cmd, g, &o, args)
		},
	}
	o.vars.register(cmd)
	repeatable(cmd.Flags(), &o.pythons, "python", "also verify the frameworks of `INTERPRETER`, a path inside the root (repeatable)")
	repeatable(cmd.Flags(), &o.env, "env", "set `NAME=VALUE` in the environment of the workloads and the check (repeatable; after the spec's)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", verify.DefaultTimeout, "kill a workload, or the check on a GPU, that has not finished after `D`")
	cmd.Flags().BoolVar(&o.cudaOnly, "cuda-only", false, "only the framework-free check of the driver and every GPU")
	cmd.Flags().StringVar(&o.device, "device", "gpu", "run the workloads on every `DEVICE`: gpu, or cpu (one process)")
	cmd.Flags().StringVar(&o.user, "user", "", "run everything as `NAME` (default: SUDO_USER under sudo, else gpuenv's own user)")
	cmd.Flags().IntVar(&o.steps, "steps", verify.DefaultSteps, "train for `N` steps")
	cmd.Flags().IntVar(&o.batch, "batch", verify.DefaultBatch, "train on batches of `N` images")
	addJSONFlag(cmd, g)
	return cmd
}

// check refuses flags that cannot work together.
func (o *verifyOptions) check() error {
	switch {
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %s must be positive", o.timeout)
	case o.device != "gpu" && o.device != "cpu":
		return fmt.Errorf("--device %q: want gpu or cpu", o.device)
	case o.cudaOnly && o.device == "cpu":
		return fmt.Errorf("--cuda-only checks the GPUs: it does not go with --device cpu")
	case o.steps < 2:
		return fmt.Errorf("--steps %d: the loss needs at least 2 steps to fall", o.steps)
	case o.batch < 1:
		return fmt.Errorf("--batch %d must be positive", o.batch)
	}
	_, err := o.envVars()
	return err
}

// envVars are the --env options, in order.
func (o *verifyOptions) envVars() ([][2]string, error) {
	var out [][2]string
	for _, kv := range o.env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE, such as --env LD_LIBRARY_PATH=/opt/lib", kv)
		}
		if err := verify.CheckEnvName(name); err != nil {
			return nil, fmt.Errorf("--env %q: %w", kv, err)
		}
		if strings.ContainsRune(value, 0) {
			return nil, fmt.Errorf("--env %s: the value holds a NUL byte, which no environment can", name)
		}
		out = append(out, [2]string{name, value})
	}
	return out, nil
}

// verifyReport is verify's JSON document.
type verifyReport struct {
	FormatVersion string `json:"format_version"`
	Root          string `json:"root"`
	*verify.Report
	// CUDACheckExplainedBy are the IDs of doctor's checks in Explanation
	// that bear on a failed framework-free check.
	CUDACheckExplainedBy []string `json:"cuda_check_explained_by,omitempty"`
	// ExplainedBy holds, for each failed result (by its index in
	// Results), the IDs of doctor's checks in Explanation that bear on it.
	ExplainedBy map[int][]string `json:"explained_by,omitempty"`
	// Explanation holds doctor's checks that explain a failure: its
	// problems, and the warnings about a failed framework.
	Explanation []doctor.Check `json:"explanation"`
	// CreatedDeviceNodes are the device files (/dev/nvidia*) that were not
	// there before the workloads ran: the driver's libraries create them
	// when they run as root. verify, unlike the commands that only look,
	// may do that, and says so.
	CreatedDeviceNodes []string `json:"created_device_nodes,omitempty"`
	// Links are the framework-free check's copy bandwidth of each GPU
	// judged against its PCIe link; a direction below half of what the
	// link allows is Slow.
	Links []linkReport `json:"links,omitempty"`
	// Peers are the framework-free check's copies between pairs of GPUs,
	// each judged against the NVLinks or PCIe links between them; a pair
	// below half of what they allow is Slow, one without peer access is
	// said so and not judged.
	Peers []cudacheck.PeerVerdict `json:"peers,omitempty"`
}

// linkReport is one GPU's copies judged against its link.
type linkReport struct {
	Ordinal    int                     `json:"ordinal"`
	UUID       string                  `json:"uuid,omitempty"`
	PCIAddress string                  `json:"pci_address,omitempty"`
	Verdicts   []cudacheck.LinkVerdict `json:"verdicts"`
}

// judgeLinks judges each GPU's measured copies against the PCIe link
// observation found for it (through NVML's UUID and bus id).
func judgeLinks(obs *facts.Observation, c *cudacheck.Report) []linkReport {
	if c == nil {
		return nil
	}
	addr := map[string]string{}
	for _, d := range obs.NVML.Devices {
		addr[strings.ToLower(d.UUID)] = d.PCIBusID
	}
	links := map[string]*facts.PCIeLink{}
	for _, g := range obs.Health.GPUs {
		links[g.PCIAddress] = g.Link
	}
	var out []linkReport
	for _, d := range c.Devices {
		a := addr[strings.ToLower(d.UUID)]
		if v := cudacheck.JudgeLink(d.Bandwidth, links[a]); v != nil {
			out = append(out, linkReport{Ordinal: d.Ordinal, UUID: d.UUID, PCIAddress: a, Verdicts: v})
		}
	}
	return out
}

// judgePeers judges each pair's copies against the links observation
// found for its two GPUs (through NVML's UUID and bus id).
func judgePeers(obs *facts.Observation, c *cudacheck.Report) []cudacheck.PeerVerdict {
	if c == nil {
		return nil
	}
	addr := map[string]string{}
	for _, d := range obs.NVML.Devices {
		addr[strings.ToLower(d.UUID)] = d.PCIBusID
	}
	gpus := map[string]*facts.GPUHealth{}
	for i := range obs.Health.GPUs {
		g := &obs.Health.GPUs[i]
		gpus[g.PCIAddress] = g
	}
	var out []cudacheck.PeerVerdict
	for _, p := range c.Peers {
		a, b := gpus[addr[strings.ToLower(p.FromUUID)]], gpus[addr[strings.ToLower(p.ToUUID)]]
		out = append(out, cudacheck.JudgePeer(p, a, b))
	}
	return out
}

// verifyFormatVersion is the version of verify's JSON document: 2.0 has
// the framework-free check, a result per GPU, and the user.
const verifyFormatVersion = jsonformat.Version

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

// cudaCheckCommand is the hidden command that runs the framework-free
// check's child; gpuenv starts itself (/proc/self/exe, named as it was
// called) with it.
const cudaCheckCommand = "cuda-check"

func runVerify(cmd *cobra.Command, g *globalOptions, o *verifyOptions, args []string) error {
	ctx := cmd.Context()
	v := newVerifyView(g)
	pythons := o.pythons
	var specVars [][2]string
	if len(args) == 1 {
		// The spec gives its frameworks' interpreters and its environment;
		// a spec with errors gives nothing to trust.
		opts, diags := o.vars.loadOptions(g.Env)
		var files map[string]*hcl.File
		if !diags.HasErrors() {
			var s *spec.Spec
			s, diags = loadSpec(args[0], opts, diags)
			files = s.Files
			pythons = pythonsToObserve(s, pythons)
			specVars = environment.Variables(s.Environment)
		}
		if diags.HasErrors() {
			if err := writeDiagnostics(g, files, diags); err != nil {
				return err
			}
			return &exitCodeError{code: exitError}
		}
	}
	h, err := openHost(g)
	if err != nil {
		return err
	}
	if err := checkPrograms(h, "--python", o.pythons); err != nil {
		return err
	}
	obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
	u, err := verifyUser(g, h, obs, o.user)
	if err != nil {
		return err
	}
	extra, err := o.envVars()
	if err != nil {
		return err
	}
	l := &verify.Launcher{Root: h.Root(), Runner: verifyRunner, Env: verify.Environment(g.Env, u, append(specVars, extra...)), Timeout: o.timeout}
	// gpuenv already runs as the user: nothing to change but the
	// environment.
	if u != nil && (uint32(os.Geteuid()) != u.UID || os.Geteuid() == 0) {
		l.User = u
	}

	opts := verify.Options{Launcher: l, Device: verify.GPU, CUDAOnly: o.cudaOnly, Obs: obs, Files: h, Steps: o.steps, Batch: o.batch}
	if o.device == "cpu" {
		opts.Device = verify.CPU
	}
	if !o.cudaOnly {
		opts.Workloads = verify.Workloads(obs)
	}
	if h.Live() {
		opts.CUDACheck = l.CUDACheck("/proc/self/exe", []string{os.Args[0], cudaCheckCommand})
	} else {
		opts.SkipCUDACheck = "it runs this machine's driver, and the root is not this machine's (--root " + g.Root + ")"
	}
	checks := opts.CUDACheck != nil && opts.Device == verify.GPU
	if o.cudaOnly && !checks {
		return fmt.Errorf("--cuda-only: the framework-free check runs only on the running system (--root /)")
	}
	if len(opts.Workloads) == 0 && !checks {
		empty := &verify.Report{User: u, Device: opts.Device, GPUs: []verify.Target{}, Results: []verify.Result{}}
		rep := &verifyReport{FormatVersion: verifyFormatVersion, Root: obs.Root, Report: empty, Explanation: []doctor.Check{}}
		if err := v.NothingToVerify(rep, pythons); err != nil {
			return err
		}
		return &exitCodeError{code: exitError}
	}
	if err := v.Start(verifyStart{Root: g.Root, User: u, Workloads: opts.Workloads, CUDACheck: checks, Device: opts.Device, Timeout: o.timeout, Spec: len(args) == 1}); err != nil {
		return err
	}
	// The view's write errors come back through the callbacks; the first
	// one ends the command once verify is done.
	var viewErr error
	opts.Checked = func(c *cudacheck.Report) { viewErr = cmp.Or(viewErr, v.Checked(c)) }
	opts.Done = func(rs []verify.Result) { viewErr = cmp.Or(viewErr, v.Result(rs)) }
	opts.Running, opts.Finished = v.Running, v.Finished
	nodesBefore := deviceNodes(h)
	rep := &verifyReport{FormatVersion: verifyFormatVersion, Root: obs.Root, Report: verify.Verify(ctx, opts)}
	if viewErr != nil {
		return viewErr
	}
	for p := range deviceNodes(h) {
		if !nodesBefore[p] {
			rep.CreatedDeviceNodes = append(rep.CreatedDeviceNodes, p)
		}
	}
	slices.Sort(rep.CreatedDeviceNodes)
	rep.Explanation = []doctor.Check{}
	if !rep.Verified {
		dr, err := verifyDoctor(g, h, obs, u)
		if err != nil {
			return err
		}
		explainVerify(rep, dr)
	}
	rep.Links = judgeLinks(obs, rep.CUDACheck)
	rep.Peers = judgePeers(obs, rep.CUDACheck)
	if c := rep.CUDACheck; c != nil && h.Live() && os.Geteuid() == 0 {
		recordVerified(g, h, obs, c)
	}
	if err := v.Report(rep); err != nil {
		return err
	}
	if !rep.Verified {
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// verifyUser is whom verify runs as: --user, else SUDO_USER under sudo,
// else nobody in particular (gpuenv's own user, unchanged). Only root can
// run programs as someone else.
func verifyUser(g *globalOptions, h *host.Host, obs *facts.Observation, name string) (*verify.User, error) {
	flag := name != ""
	if !flag {
		name = g.Getenv("SUDO_USER")
	}
	if name == "" {
		return nil, nil
	}
	u, err := verify.LookupUser(h, obs, name)
	if err != nil {
		if !flag {
			return nil, fmt.Errorf("SUDO_USER %s: %w; name the user with --user", name, err)
		}
		return nil, fmt.Errorf("--user %s: %w", name, err)
	}
	if os.Geteuid() != 0 && uint32(os.Geteuid()) != u.UID {
		return nil, fmt.Errorf("running as %s needs root: run gpuenv verify with sudo", name)
	}
	return u, nil
}

// verifyDoctor runs doctor's checks for the user verify ran as.
func verifyDoctor(g *globalOptions, h *host.Host, obs *facts.Observation, u *verify.User) (*doctor.Report, error) {
	if u == nil {
		return doctorReport(g, h, obs)
	}
	in := doctor.Input{Obs: obs, User: &doctor.User{Name: u.Name, UID: u.UID, GID: u.GID}}
	if h.Live() {
		in.Session = sessionVariables(g)
	}
	return doctor.Run(in), nil
}

// explainGroups are doctor's groups that can explain a failure that
// follows each layer.
var explainGroups = map[verify.Layer][]doctor.Group{
	verify.LayerDriver:  {doctor.GroupPCI, doctor.GroupKernel, doctor.GroupNVML, doctor.GroupDevices, doctor.GroupEnv},
	verify.LayerDevice:  {doctor.GroupDevices, doctor.GroupGPUState},
	verify.LayerRuntime: {doctor.GroupCUDA, doctor.GroupFrameworks, doctor.GroupEnv},
	verify.LayerCuDNN:   {doctor.GroupCuDNN, doctor.GroupFrameworks},
	verify.LayerAMP:     {doctor.GroupFrameworks},
}

// explainVerify picks doctor's checks that bear on the failures: every
// problem, and any warning about a failed framework; and points each
// failure at those in its layer's groups (in every group when it was not
// narrowed).
func explainVerify(rep *verifyReport, r *doctor.Report) {
	// concerns says whether c is about res's framework, when c is about
	// a framework at all.
	concerns := func(c doctor.Check, res *verify.Result) bool {
		if c.Group != doctor.GroupFrameworks || c.ID == "framework" {
			return true
		}
		return res != nil && strings.HasSuffix(c.ID, ":"+doctor.FrameworkID(res.Interpreter, res.Framework))
	}
	for _, c := range r.Checks {
		switch c.Status {
		case doctor.Problem:
			rep.Explanation = append(rep.Explanation, c)
		case doctor.Warning:
			for _, res := range rep.Results {
				if !res.OK() && c.Group == doctor.GroupFrameworks && concerns(c, &res) {
					rep.Explanation = append(rep.Explanation, c)
					break
				}
			}
		}
	}
	ids := func(groups []doctor.Group, res *verify.Result) []string {
		var out []string
		for _, c := range rep.Explanation {
			if (groups == nil || slices.Contains(groups, c.Group)) && concerns(c, res) {
				out = append(out, c.ID)
			}
		}
		return out
	}
	if ck := rep.CUDACheck; ck != nil && !ck.OK() {
		rep.CUDACheckExplainedBy = ids(explainGroups[verify.LayerDriver], nil)
	}
	for i := range rep.Results {
		res := &rep.Results[i]
		if res.OK() {
			continue
		}
		var groups []doctor.Group
		if res.Narrowing != nil {
			groups = explainGroups[res.Narrowing.Layer]
		}
		if got := ids(groups, res); len(got) > 0 {
			if rep.ExplainedBy == nil {
				rep.ExplainedBy = map[int][]string{}
			}
			rep.ExplainedBy[i] = got
		}
	}
}
