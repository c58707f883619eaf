package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// applyHooks are test-only entry points into apply, set by test commands
// (a gpuenv that kills itself at a journal point), never by a flag.
var applyHooks struct {
	journalPoint func(n int)
}

// newDriverVersion asks NVML which driver it reports, to check a module
// reload on the live root; nil elsewhere. Tests replace it with go-nvml's
// mock.
var newDriverVersion = func(h *host.Host) apply.DriverVersion {
	if !h.Live() {
		return nil
	}
	return host.LiveDriverVersion()
}

// configured is a planner preparation that only applies the flags.
func configured(f *planFlags) func(*planner.Planner) hcl.Diagnostics {
	return func(pl *planner.Planner) hcl.Diagnostics {
		f.configure(pl)
		return nil
	}
}

// newDeviceSettings gives apply NVML's device settings on the live root;
// a root that is not the running system gets none, as no NVML operation
// runs there. Tests replace it with go-nvml's mock.
var newDeviceSettings = func(h *host.Host) apply.DeviceSettings {
	if !h.Live() {
		return nil
	}
	return host.LiveDeviceSettings()
}

type applyOptions struct {
	planFlags
	autoApprove bool
	noRevert    bool
	lockTimeout time.Duration
	// given are the planning flags given on the command line ("--var"),
	// which a saved plan does not take: it keeps its own.
	given []string
	// rootGiven and stateDirGiven say whether --root and --state-dir were
	// given; when not, a saved plan's own are used.
	rootGiven, stateDirGiven bool
}

func newApplyCmd(g *globalOptions) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply [PATH | PLANFILE]",
		Short: "Make the host match a spec, journaled and reversibly",
		Long: `Apply plans the spec at PATH (default ".") as "gpuenv plan" does, shows the
plan, asks for "yes" on a terminal (without a terminal it needs --auto-approve),
and carries it out. PLANFILE, a plan saved by "gpuenv plan --out", is applied
exactly as saved, after two checks: the facts it was made from have not
changed ("stale plan": plan again), and planning again from the spec and
flags the file keeps (not the spec on disk now, nor apply's own --var,
--var-file, --python, --interrupt-gpu-processes, --root-boots, --target or
--replace, which it refuses) makes
the very same plan; the first difference is named. It is applied to the
--root and --state-dir it was planned for.

Each operation's inverse is journaled before it runs, in a new generation under
the state directory, with the previous bytes of files and the package files of
versions being replaced, so that "gpuenv rollback" can undo it later, offline.
A failing operation stops the apply and reverts the done ones, newest first,
unless --no-revert. Afterwards the host is observed again and apply says
whether it now matches the spec and whether a reboot is still needed.

A driver change whose kernel module differs from the loaded one reloads the
modules after the package transaction when nothing stops it (see "gpuenv plan":
the plan shows the reload's operations, or why a reboot is required instead);
where a reboot remains, apply writes /var/run/reboot-required and
/var/run/reboot-required.pkgs as Debian's packages do.

--target ADDRESS applies only that resource and what it depends on (see
"gpuenv plan"); afterwards apply says what the whole spec still needs.
--replace ADDRESS reinstalls that resource at the version installed now (the
driver's packages and then its module, cuda, cudnn, framework.NAME; see
"gpuenv plan"), for files that were damaged; a failed reinstall is reverted
as any step is.
--lock-timeout DURATION waits that long for another gpuenv to release the
state directory's lock instead of refusing at once.

Exit status: 0 applied (or nothing to do); 1 error, refused (lock held,
unfinished generation, stale plan, declined, not root) or failed and fully
reverted; 3 failed and the revert is incomplete: run "gpuenv rollback".`,
		Example: `  sudo gpuenv apply examples/pytorch-workstation
  gpuenv plan --out tonight.plan && sudo gpuenv apply --auto-approve tonight.plan
  sudo gpuenv apply -replace driver examples/pytorch-workstation`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := "."
			if len(args) == 1 {
				target = args[0]
			}
			for _, name := range planningFlags {
				if cmd.Flags().Changed(name) {
					o.given = append(o.given, "--"+name)
				}
			}
			o.rootGiven, o.stateDirGiven = cmd.Flags().Changed("root"), cmd.Flags().Changed("state-dir")
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			return runApply(ctx, g, &o, target)
		},
	}
	o.planFlags.register(cmd)
	cmd.Flags().BoolVar(&o.autoApprove, "auto-approve", false, "apply without asking for confirmation")
	cmd.Flags().BoolVar(&o.noRevert, "no-revert", false, "on failure, leave the operations already done in place (gpuenv rollback undoes them)")
	addLockTimeoutFlag(cmd, &o.lockTimeout)
	addJSONFlag(cmd, g)
	return cmd
}

// planned is a plan to apply and where it came from.
type planned struct {
	plan   *plan.Plan
	obs    *facts.Observation
	spec   *spec.Spec // nil for a saved plan made without one (tests only)
	files  map[string]*hcl.File
	pythns []string
	// saved names the saved plan file this plan was checked against.
	saved string
}

// savedFile is a saved plan file as read, before any check against the
// host.
type savedFile struct {
	name string
	data []byte
	plan *planner.SavedPlan
}

func runApply(ctx context.Context, g *globalOptions, o *applyOptions, target string) error {
	v := newRunView(g, apply.KindApply)
	if err := applyWith(ctx, g, o, target, v); err != nil {
		return v.Failed(err)
	}
	return nil
}

// applyWith runs apply, every word of it said by v.
func applyWith(ctx context.Context, g *globalOptions, o *applyOptions, target string, v runView) error {
	saved, err := readSavedFile(target)
	if err != nil {
		return err
	}
	if saved != nil {
		// The plan says where it applies, and with which flags; those
		// decide what the host is and what the state directory says.
		if err := useSavedFlags(g, o, saved); err != nil {
			return err
		}
	}
	h, err := openHost(g)
	if err != nil {
		return err
	}
	if h.Live() && os.Geteuid() != 0 {
		return apply.ErrNotRoot
	}
	// What would refuse the apply is said first, before a plan is made
	// and confirmed: a state directory that cannot be trusted, another
	// gpuenv running (who), an unfinished generation (until rollback
	// finishes it, no plan, saved or new, is applied).
	if err := waitForStateLock(ctx, g, h, o.lockTimeout); err != nil {
		return err
	}
	var pl *planned
	if saved != nil {
		pl, err = loadSaved(ctx, g, o, h, saved, v)
	} else {
		pl, err = loadPlanned(ctx, g, o, h, target, v)
	}
	if err != nil {
		return err
	}
	if pl.saved != "" && pl.spec != nil {
		v.Replanned(pl.saved)
	}
	if err := v.Plan(pl.plan); err != nil {
		return err
	}
	if !pl.plan.Empty() {
		ok, err := confirm(g, o.autoApprove, "Do you want to apply these changes?")
		if err != nil {
			return err
		}
		if !ok {
			return v.Cancelled()
		}
	}
	devices := newDeviceSettings(h)
	if c, ok := devices.(io.Closer); ok {
		defer c.Close()
	}
	opts := apply.Options{
		Hook:         v,
		StateDir:     g.stateDir(),
		Command:      "apply",
		NoRevert:     o.noRevert,
		Before:       pl.obs,
		Executor:     &apply.HostExecutor{Host: h, Devices: devices, Driver: newDriverVersion(h), Indexes: providers.IndexesOf(h)},
		Generate:     providers.GeneratorOf(h),
		JournalPoint: applyHooks.journalPoint,
	}
	if pl.spec != nil {
		opts.Recheck = func(ctx context.Context) (*apply.Recheck, error) {
			again, diags := observeThenPlan(ctx, h, pl.spec, pl.pythns, configured(o.planFlags.untargeted()))
			p := again.plan
			if diags.HasErrors() || p == nil {
				return nil, fmt.Errorf("planning again: %s", diags.Error())
			}
			rc := &apply.Recheck{Remaining: len(p.Steps), NeedsReboot: p.NeedsReboot, After: again.obs}
			for _, s := range p.Steps {
				rc.Steps = append(rc.Steps, s.Address)
			}
			return rc, nil
		}
	}
	res, err := apply.Apply(ctx, h, pl.plan, opts)
	if err != nil && res != nil && res.ExitCode() == exitAttention {
		// The journal could not be written part-way: the host may be
		// half-changed, and only rollback knows how far.
		return v.Attention(res, err)
	}
	if err != nil {
		return err
	}
	return v.Result(res, pl.spec != nil)
}

// savedHooks are test-only entry points, set by test commands, never by a
// flag: acceptUnplanned lets apply carry out a saved plan that keeps no
// spec, as the tests' hand-made plans of fake hosts are, checked against
// the facts' fingerprint only.
var savedHooks struct {
	acceptUnplanned bool
}

// useSavedFlags refuses planning flags given with a saved plan, which
// keeps its own, and takes the plan's --root and --state-dir where they
// were not given; given and different, they are refused.
func useSavedFlags(g *globalOptions, o *applyOptions, sf *savedFile) error {
	if len(o.given) > 0 {
		return fmt.Errorf("%s cannot be given with a saved plan: %s keeps the values it was planned with, and apply plans again with those. To change them, make the plan again: gpuenv plan %s ... --out FILE", o.given[0], sf.name, o.given[0])
	}
	from := sf.plan.From
	if from == nil {
		return nil
	}
	if o.rootGiven {
		root, err := filepath.Abs(g.Root)
		if err != nil {
			return fmt.Errorf("--root: %w", err)
		}
		if root != from.Root {
			return fmt.Errorf("%s was planned for --root %s, not %s: apply it with --root %s, or plan again for %s", sf.name, from.Root, root, from.Root, root)
		}
	}
	g.Root = from.Root
	if o.stateDirGiven && g.stateDir() != from.StateDir {
		return fmt.Errorf("%s was planned with --state-dir %s, not %s: apply it with --state-dir %s, or plan again", sf.name, from.StateDir, g.stateDir(), from.StateDir)
	}
	g.StateDir = from.StateDir
	fi, err := os.Stat(g.Root)
	if err != nil {
		return fmt.Errorf("the saved plan's --root: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the saved plan's --root %s is not a directory", g.Root)
	}
	return nil
}

// loadSaved checks a saved plan against the host and against its own
// spec: it plans again from the spec and flags the plan keeps and the
// host's facts now, refuses the plan when the facts it depends on changed
// ("stale") or when the new plan differs from it in any way, and
// otherwise returns the new plan, which is the saved one.
func loadSaved(ctx context.Context, g *globalOptions, o *applyOptions, h *host.Host, sf *savedFile, v runView) (*planned, error) {
	sp := sf.plan
	refuse := func(d *hcl.Diagnostic) (*planned, error) {
		v.Diagnostics(nil, hcl.Diagnostics{d})
		return nil, &exitCodeError{code: exitError}
	}
	stale := func(obs *facts.Observation) error {
		err := sp.CheckFresh(obs)
		if stale, ok := errors.AsType[*planner.StaleError](err); ok {
			_, err = refuse(stale.Diagnostic())
		}
		return err
	}
	if sp.From == nil {
		if !savedHooks.acceptUnplanned {
			return nil, fmt.Errorf("%s keeps no copy of the spec it was planned from, so apply cannot plan it again to check that it is what plan would say: make it again with gpuenv plan --out FILE", sf.name)
		}
		pythons := append([]string(nil), o.pythons...)
		for _, s := range sp.Steps {
			for _, op := range s.Operations {
				if op.Packages != nil && op.Packages.Venv != "" {
					pythons = append(pythons, path.Join(op.Packages.Venv, "bin", "python"))
				}
			}
		}
		obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
		if err := stale(obs); err != nil {
			return nil, err
		}
		return &planned{plan: &sp.Plan, obs: obs, saved: sf.name}, nil
	}

	from := sp.From
	o.pythons, o.interrupt, o.rootBoots, o.targets, o.replace = from.Pythons, from.InterruptGPUProcesses, from.RootBoots, from.Targets, from.Replace
	s, diags := spec.Load(from.Spec.Path, from.Spec.LoadOptions())
	if diags.HasErrors() {
		v.Diagnostics(s.Files, diags)
		return nil, fmt.Errorf("%s: the spec it keeps does not load (above), so it cannot be planned again: make the plan again with gpuenv plan --out FILE", sf.name)
	}
	pd, more := observeThenPlan(ctx, h, s, o.pythons, planPreparation(g, h, &o.planFlags))
	diags = append(diags, more...)
	// The facts come first: a plan made before the host changed is stale,
	// whatever planning again says.
	if err := stale(pd.obs); err != nil {
		return nil, err
	}
	if len(diags) > 0 {
		v.Diagnostics(s.Files, diags)
	}
	if pd.plan == nil || diags.HasErrors() {
		return nil, &exitCodeError{code: exitError}
	}
	if err := planner.CompareSaved(sf.data, planner.Save(pd.plan, pd.obs, from, providers.Kinds())); err != nil {
		if d, ok := errors.AsType[*planner.DiffersError](err); ok {
			return refuse(d.Diagnostic())
		}
		return nil, fmt.Errorf("%s: %w", sf.name, err)
	}
	pd.saved = sf.name
	return pd, nil
}

// loadPlanned plans the spec at target.
func loadPlanned(ctx context.Context, g *globalOptions, o *applyOptions, h *host.Host, target string, v runView) (*planned, error) {
	lo, diags := o.vars.loadOptions(g.Env)
	var s *spec.Spec
	if !diags.HasErrors() {
		s, diags = loadSpec(target, lo, diags)
	}
	if diags.HasErrors() {
		var files map[string]*hcl.File
		if s != nil {
			files = s.Files
		}
		v.Diagnostics(files, diags)
		return nil, &exitCodeError{code: exitError}
	}
	if err := checkPrograms(h, "--python", o.pythons); err != nil {
		return nil, err
	}
	pd, more := observeThenPlan(ctx, h, s, o.pythons, configured(&o.planFlags))
	diags = append(diags, more...)
	if len(diags) > 0 {
		v.Diagnostics(s.Files, diags)
	}
	if pd.plan == nil || diags.HasErrors() {
		return nil, &exitCodeError{code: exitError}
	}
	return pd, nil
}

// confirm asks question on a terminal and accepts only "yes"; without a
// terminal it needs --auto-approve, since nobody is there to answer.
func confirm(g *globalOptions, autoApprove bool, question string) (bool, error) {
	if autoApprove {
		return true, nil
	}
	f, ok := g.Stdin.(*os.File)
	if !ok || !isTerminalFile(f) {
		return false, errors.New("standard input is not a terminal, so there is no one to confirm: pass --auto-approve to go ahead without a prompt")
	}
	fmt.Fprintf(g.Stdout, "\n%s\n  Only 'yes' will be accepted.\n\n  Enter a value: ", question)
	line, err := bufio.NewReader(g.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return strings.TrimSpace(line) == "yes", nil
}

func isTerminalFile(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
