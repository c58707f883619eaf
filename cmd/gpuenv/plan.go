package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// planFlags are the flags of the commands that plan a spec on this host:
// the spec's input variables, and the Python environments to observe
// besides those the spec names.
type planFlags struct {
	vars      varFlags
	pythons   []string
	interrupt bool
	rootBoots bool
	// targets are -target's addresses.
	targets []string
	// replace are -replace's addresses.
	replace []string
}

func (f *planFlags) register(cmd *cobra.Command) {
	f.vars.register(cmd)
	repeatable(cmd.Flags(), &f.pythons, "python", "also observe the Python environment of `INTERPRETER`, a path inside the root (repeatable)")
	cmd.Flags().BoolVar(&f.interrupt, "interrupt-gpu-processes", false, "let a driver change stop the GPU processes that keep the nvidia modules from being reloaded (the plan names them), instead of asking for a reboot")
	repeatable(cmd.Flags(), &f.targets, "target", "plan only the resource at `ADDRESS` (driver, cuda, framework.pytorch, group.video; a kind alone: all of it) and what it depends on, with a warning that the plan is partial (repeatable)")
	repeatable(cmd.Flags(), &f.replace, "replace", "reinstall the resource at `ADDRESS` (driver, cuda, cudnn, framework.pytorch; framework: every framework) at the version installed now, as Terraform's -replace: for the driver its packages and then its kernel module (repeatable)")
	cmd.Flags().BoolVar(&f.rootBoots, "root-boots", false, "the root is a machine's that will boot (a disk image prepared for a host): plan its kernel-side steps (modules, DKMS, initramfs, blacklist) even where its files say container, or gpuenv runs in a chroot")
}

// configure gives the planner the flags' choices.
func (f *planFlags) configure(pl *planner.Planner) {
	pl.InterruptGPUProcesses = f.interrupt
	pl.Targets = f.targets
	pl.Replace = f.replace
	if f.rootBoots {
		pl.Resolve = planner.ResolveBootingRoot
	}
}

// untargeted are the flags without -target: what the whole spec still
// needs after a targeted apply is planned with them.
func (f *planFlags) untargeted() *planFlags {
	c := *f
	c.targets = nil
	// What -replace reinstalled matches the spec, and asked again it
	// would be reinstalled again: the whole spec is planned without it.
	c.replace = nil
	return &c
}

// planOptions are plan's own flags.
type planOptions struct {
	planFlags
	out              string
	detailedExitcode bool
	recordDrift      bool
	// refreshOnly reports drift since the last apply instead of planning.
	refreshOnly bool
	// facts are the saved observations to plan instead of this host.
	facts []string
	// hosts adds each host's row to --facts --json.
	hosts bool
	// canaries is how many hosts of each group --facts names to try the
	// spec on first.
	canaries int
}

func newPlanCmd(g *globalOptions) *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan [PATH]",
		Short: "Show what must change on this host for it to match a spec",
		Long: `Plan reads the spec at PATH (a .hcl file, or a directory whose *.hcl files form
one spec; default "."), observes the host under --root, and prints every change
gpuenv would make, in the order it would make them: one block per resource
with "+" create, "~" update, "-/+" replace and "-" remove, old and new values,
the reason, and whether the change needs a reboot, reloads the kernel modules
or interrupts GPU processes. Values the spec leaves out are completed from
gpuenv's compatibility tables and shown with the table row they come from.
Warnings say what else on the host stands in the way, with the evidence.

Plan changes nothing. It asks the package manager for candidate versions only
when a package has to change, so a host that matches the spec is planned
without starting a process.

A driver change that replaces the loaded kernel module reloads the modules
after its package transaction when the facts allow it (the running system, no
GPU process, no display on nvidia_drm, a module Secure Boot accepts); otherwise
the step needs a reboot and says why. --interrupt-gpu-processes lets the reload
stop the GPU processes in its way, each named in the plan.

On a container's root (/.dockerenv, /run/.containerenv, a container's cgroup,
systemd-nspawn's /run/systemd/container or process 1's container=) the kernel
and driver are the host's, and in a chroot (an image being built: "/" is not
process 1's root, or no /proc is mounted) the kernel running is the building
machine's: plan plans no kernel module, DKMS build, initramfs, nouveau
blacklist or module reload there, says so once, and refuses a spec that asks
for one. --root-boots says the root is a machine's that will boot (a disk
image prepared for a host), which gets the kernel-side steps.

On Ubuntu, a driver from Ubuntu's archive comes with the archive's signed
prebuilt modules for the running kernel (linux-modules-nvidia-<series>-<release>)
where the archive has them, as ubuntu-drivers installs them: no DKMS build, no
kernel headers, no MOK enrolment under Secure Boot. Otherwise DKMS builds the
module; the driver step's reason says which and why.

--out FILE saves the plan for "gpuenv apply FILE", with a copy of the spec's
files and var files and the flags that changed the plan (--var, GPUENV_VAR_
values, --python, --interrupt-gpu-processes, --root-boots, --target, --replace, --root,
--state-dir); "gpuenv show FILE" prints it again. Apply
plans again from those, applies exactly that plan when it is the same, and
refuses it once the facts it was made from have changed or when it differs
in any way.

--target ADDRESS (repeatable) limits the plan to the steps at ADDRESS (as the
plan prints them: driver, cuda, framework.pytorch, group.video; a kind alone,
such as framework, means all of its resources) and the steps they depend on,
as Terraform's -target does; the plan then carries a warning that it is
partial.

--replace ADDRESS (repeatable) reinstalls a resource that matches the spec
at the version installed now, as Terraform's -replace does, for files that
were damaged or deleted: driver (its packages, apt-get install --reinstall or
dnf reinstall of the exact versions, then the kernel module reload a driver
change gets, or a reboot where the modules cannot be reloaded), cuda, cudnn,
framework.NAME (pip install --force-reinstall --no-deps of the installed
version, or the distribution's package). The plan shows the step as "-/+"
with the reason "requested with -replace". An address that names nothing
gpuenv can reinstall, a resource the spec does not declare, and one that is
not installed are errors naming it. Long flags may be written with one dash, as Terraform's are typed:
-out FILE, -target=driver.

--refresh-only plans nothing and changes nothing: it observes the host and
reports what changed since the newest generation recorded its observation
(after a successful apply; else the one its plan was made from), section by
section (packages, driver, cuda, python …), each value as "~ path: before →
after", "+ path = value" or "- path = value", as Terraform's -refresh-only
reports drift. The spec is not read. With --json it prints a document with
"drift"; with --detailed-exitcode it exits 2 when anything drifted.

Exit status: 0 success (with or without changes), 1 error; with
--detailed-exitcode, 0 no changes, 1 error, 2 changes present (or drift,
with --refresh-only).`,
		Example: `  gpuenv plan examples/pytorch-workstation
  gpuenv plan --json --var cuda=12.6 examples/variables
  gpuenv plan --out tonight.plan && sudo gpuenv apply tonight.plan
  gpuenv plan --detailed-exitcode || [ $? -eq 2 ]
  gpuenv plan -refresh-only
  gpuenv plan -replace driver examples/debian12-distro
  gpuenv plan --facts /srv/gpuenv/facts/ --detailed-exitcode fleet.hcl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(o.facts) > 0 && len(args) > 1 {
				return errFactsArgs
			}
			return cobra.MaximumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			specPath := "."
			if len(args) == 1 {
				specPath = args[0]
			}
			if o.refreshOnly {
				return runRefreshOnly(cmd, g, &o)
			}
			if len(o.facts) > 0 {
				return runPlanFacts(cmd, g, &o, specPath)
			}
			for _, name := range factsOnlyFlags {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s concerns the hosts of --facts, and plan without --facts plans this host: leave it out, or give --facts", name)
				}
			}
			return runPlan(cmd, g, &o, specPath)
		},
	}
	cmd.Long += factsHelp
	o.planFlags.register(cmd)
	cmd.Flags().StringVar(&o.out, "out", "", "save the plan to `FILE` (on this machine, not inside --root) for gpuenv apply")
	cmd.Flags().BoolVar(&o.detailedExitcode, "detailed-exitcode", false, "exit 2 when the plan has changes, 0 when it has none")
	cmd.Flags().BoolVar(&o.refreshOnly, "refresh-only", false, "plan nothing: report what changed on the host since the last apply observed it (drift), section by section; with --detailed-exitcode exit 2 when anything did")
	cmd.Flags().BoolVar(&o.recordDrift, "record-drift", false, "also record the outcome (time, spec digest, change counts, or the error) in the state directory's world-readable drift.json, for doctor --prometheus")
	repeatable(cmd.Flags(), &o.facts, "facts", "plan saved observations instead of this host: a document `FILE` (.json, .json.gz, or an archive .tar, .tar.gz), a directory (its *.json and *.json.gz, below too), or - for JSON lines or a tar archive on stdin (repeatable)")
	cmd.Flags().BoolVar(&o.hosts, "hosts", false, "with --facts --json, also write each host's row, after the groups")
	cmd.Flags().IntVar(&o.canaries, "canaries", 0, "with --facts, name at most `N` hosts of each group to try the spec on first, those whose last apply succeeded before others")
	addJSONFlag(cmd, g)
	return cmd
}

func runPlan(cmd *cobra.Command, g *globalOptions, o *planOptions, specPath string) (err error) {
	ctx := cmd.Context()
	view := newPlanView(g)
	opts, diags := o.vars.loadOptions(g.Env)
	var files map[string]*hcl.File
	var s *spec.Spec
	var p *plan.Plan
	if o.recordDrift {
		defer func() { err = recordDrift(g, specPath, s, p, diags, err) }()
	}
	if !diags.HasErrors() {
		diags = append(diags, notASpec(specPath)...)
	}
	if !diags.HasErrors() {
		s, diags = loadSpec(specPath, opts, diags)
		files = s.Files
	}
	if diags.HasErrors() {
		if err := view.Plan(files, nil, diags); err != nil {
			return err
		}
		return &exitCodeError{code: exitError}
	}

	h, err := openHost(g)
	if err != nil {
		return err
	}
	if err := checkPrograms(h, "--python", o.pythons); err != nil {
		return err
	}
	pd, more := observeThenPlan(ctx, h, s, o.pythons, planPreparation(g, h, &o.planFlags))
	diags = append(diags, more...)
	p = pd.plan
	obs := pd.obs
	if err := view.Plan(files, p, diags); err != nil {
		return err
	}
	if p == nil || diags.HasErrors() {
		return &exitCodeError{code: exitError}
	}
	if o.out != "" {
		from, err := plannedFrom(g, &o.planFlags, specPath, s, opts)
		if err != nil {
			return fmt.Errorf("saving the plan: %w", err)
		}
		if err := savePlan(o.out, p, obs, from); err != nil {
			return err
		}
		if err := view.Saved(o.out, from); err != nil {
			return err
		}
	}
	if o.detailedExitcode && !p.Empty() {
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// notASpec is an error diagnostic when the file at specPath is a saved
// plan, or meant as one, rather than a spec: HCL would only say that
// JSON is not HCL, and an empty plan file would plan as an empty spec.
func notASpec(specPath string) hcl.Diagnostics {
	sf, err := readSavedFile(specPath)
	switch {
	case err != nil:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Not a spec", Detail: err.Error() + "."}}
	case sf != nil:
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "A saved plan, not a spec",
			Detail: fmt.Sprintf("%s is a plan saved by gpuenv plan --out. Print it with: gpuenv show %s. Apply exactly that plan with: %s.",
				specPath, shellWord(specPath), strings.Join(shellWords(applyArgv(specPath, sf.plan.From)), " "))}}
	}
	return nil
}

func loadSpec(specPath string, opts spec.LoadOptions, diags hcl.Diagnostics) (*spec.Spec, hcl.Diagnostics) {
	s, more := spec.Load(specPath, opts)
	return s, append(diags, more...)
}

// pythonsToObserve are the interpreters named by --python and by the
// spec's framework blocks, each once.
func pythonsToObserve(s *spec.Spec, flags []string) []string {
	out := append([]string(nil), flags...)
	for _, p := range s.Interpreters() {
		if !slices.Contains(flags, p) {
			out = append(out, p)
		}
	}
	return out
}

// readApplyStatus reads the status file of the state directory stateDir
// with apply's reader, which checks the state directory can be trusted and
// believes the journal over a status file a run could not rewrite. A
// missing file is no status; one that cannot be read is a warning, since
// plan changes nothing and a user should still see the plan. So is one in
// a state directory that others could have written, which is then not
// believed: plan acts on nothing it reads there.
func readApplyStatus(h *host.Host, stateDir string, diags hcl.Diagnostics) (*plan.ApplyStatus, hcl.Diagnostics) {
	p := path.Join(stateDir, plan.StatusFile)
	st, err := apply.ReadStatus(h, stateDir)
	var insecure *apply.InsecureError
	switch {
	case errors.As(err, &insecure):
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Untrusted state directory",
			Detail:   fmt.Sprintf("The status file %s is not read, so plan cannot tell whether an earlier apply finished: %v. gpuenv apply and rollback refuse this state directory until it is fixed.", p, err),
		})
	case err != nil:
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Unreadable apply status",
			Detail:   fmt.Sprintf("The status file %s could not be read (%v), so plan cannot tell whether an earlier apply finished.", p, err),
		})
	case st == (plan.ApplyStatus{}):
		return nil, diags
	}
	return &st, diags
}

// planPreparation readies a planner as plan does: with the flags'
// choices, and the state directory's status, whose warning a plan
// carries while a generation is unfinished. A saved plan is planned again
// the same way.
func planPreparation(g *globalOptions, h *host.Host, f *planFlags) func(*planner.Planner) hcl.Diagnostics {
	return func(pl *planner.Planner) hcl.Diagnostics {
		f.configure(pl)
		pl.StatusPath = path.Join(g.stateDir(), plan.StatusFile)
		var status hcl.Diagnostics
		pl.Status, status = readApplyStatus(h, g.stateDir(), nil)
		// Whether the person the plan is for may open the GPUs is judged
		// as doctor judges it; a root whose users cannot be read judges
		// no one's, as doctor does.
		pl.User, _ = invokingUser(g, h)
		return status
	}
}

// planningFlags are the flags that change what a plan says; a saved plan
// keeps their values (plannedFrom), and apply takes them from it.
var planningFlags = []string{"var", "var-file", "python", "interrupt-gpu-processes", "root-boots", "target", "replace"}

// plannedFrom is what a plan saved with --out keeps besides the plan:
// the spec at specPath as it was loaded (s, with opts), and the flags that
// changed the plan, so that apply can plan again and compare.
func plannedFrom(g *globalOptions, f *planFlags, specPath string, s *spec.Spec, opts spec.LoadOptions) (*planner.PlannedFrom, error) {
	ss, err := planner.SaveSpec(specPath, s, opts)
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(g.Root)
	if err != nil {
		return nil, err
	}
	return &planner.PlannedFrom{
		Spec:                  ss,
		Root:                  root,
		StateDir:              g.stateDir(),
		Pythons:               slices.Clone(f.pythons),
		InterruptGPUProcesses: f.interrupt,
		RootBoots:             f.rootBoots,
		Targets:               slices.Clone(f.targets),
		Replace:               slices.Clone(f.replace),
	}, nil
}

// savePlan writes the saved plan next to its final name and renames it
// into place, so that an interrupted plan leaves no half-written file for
// apply to find.
func savePlan(name string, p *plan.Plan, obs *facts.Observation, from *planner.PlannedFrom) error {
	var buf bytes.Buffer
	if err := planner.WriteSavedPlan(&buf, p, obs, from, providers.Kinds()); err != nil {
		return fmt.Errorf("saving the plan: %w", err)
	}
	// The plan names packages and users; it is readable by its owner's
	// group as a plan file of Terraform's is, and no wider.
	if err := safefile.WriteFile(name, buf.Bytes(), 0o640, safefile.Options{}); err != nil {
		return fmt.Errorf("saving the plan: %w", err)
	}
	return nil
}

// observeThenPlan is the one way from flags to a plan: it observes h —
// the Python environments --python names (flagPythons) and those the
// spec's framework blocks name — and plans s against that observation.
// prepare, when not nil, readies the planner before it plans (plan gives
// it the state directory's status); its diagnostics come before the
// planner's. The plan is nil when planning failed.
func observeThenPlan(ctx context.Context, h *host.Host, s *spec.Spec, flagPythons []string, prepare func(*planner.Planner) hcl.Diagnostics) (*planned, hcl.Diagnostics) {
	debugf := debugFrom(ctx)
	pythons := pythonsToObserve(s, flagPythons)
	start := time.Now()
	obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
	debugf("observed %s in %s", h.Root(), tookText(time.Since(start)))
	pl := newPlanner(h)
	var diags hcl.Diagnostics
	if prepare != nil {
		diags = prepare(pl)
	}
	start = time.Now()
	p, more := pl.Plan(ctx, s, obs)
	if p != nil {
		debugf("planned in %s: %d steps, %d diagnostics", tookText(time.Since(start)), len(p.Steps), len(more))
	} else {
		debugf("planning failed in %s: %d diagnostics", tookText(time.Since(start)), len(more))
	}
	return &planned{plan: p, obs: obs, spec: s, files: s.Files, pythns: pythons}, append(diags, more...)
}

// newPlanner wires the concrete providers into the planner.
func newPlanner(h *host.Host) *planner.Planner {
	pl := planner.New(providers.Planners()...)
	pl.Candidates = newCandidates(h)
	pl.EndState = providers.EndState
	return pl
}

// newCandidates asks the root's package manager for candidate versions.
// Tests replace it with a table, as they replace NVML through hostOptions:
// no flag of the real binary can.
var newCandidates = func(h *host.Host) planner.Candidates { return providers.Candidates(h) }
