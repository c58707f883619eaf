package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
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
}

func newApplyCmd(g *globalOptions) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply [PATH | PLANFILE]",
		Short: "Make the host match a spec, journaled and reversibly",
		Long: `Apply plans the spec at PATH (default ".") as "gpuenv plan" does, shows the
plan, asks for "yes" on a terminal (without a terminal it needs --auto-approve),
and carries it out. PLANFILE, a plan saved by "gpuenv plan --out", is applied
exactly as saved, after checking that the facts it was made from have not
changed ("stale plan": plan again).

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

Exit status: 0 applied (or nothing to do); 1 error, refused (lock held,
unfinished generation, stale plan, declined, not root) or failed and fully
reverted; 3 failed and the revert is incomplete: run "gpuenv rollback".`,
		Example: `  sudo gpuenv apply examples/pytorch-workstation
  gpuenv plan --out tonight.plan && sudo gpuenv apply --auto-approve tonight.plan`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := "."
			if len(args) == 1 {
				target = args[0]
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			return runApply(ctx, g, &o, target)
		},
	}
	o.planFlags.register(cmd)
	cmd.Flags().BoolVar(&o.autoApprove, "auto-approve", false, "apply without asking for confirmation")
	cmd.Flags().BoolVar(&o.noRevert, "no-revert", false, "on failure, leave the operations already done in place (gpuenv rollback undoes them)")
	addJSONFlag(cmd, g)
	return cmd
}

// planned is a plan to apply and where it came from.
type planned struct {
	plan   *planner.Plan
	obs    *facts.Observation
	spec   *spec.Spec // nil for a saved plan
	files  map[string]*hcl.File
	pythns []string
}

func runApply(ctx context.Context, g *globalOptions, o *applyOptions, target string) error {
	if !g.JSON {
		return applyWith(ctx, g, o, target, nil)
	}
	st := newEventStream(g.Stdout)
	if err := applyWith(ctx, g, o, target, st); err != nil {
		return st.fail(apply.KindApply, err)
	}
	return nil
}

// applyWith runs apply with its human view, or, when st is set, its JSON
// view: every word goes to the event stream instead.
func applyWith(ctx context.Context, g *globalOptions, o *applyOptions, target string, st *eventStream) error {
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
	if err := apply.CheckReady(h, g.stateDir()); err != nil {
		return err
	}
	pl, err := loadPlanned(ctx, g, o, h, target, st)
	if err != nil {
		return err
	}
	if st != nil {
		st.plan(pl.plan)
	} else {
		if err := (&humanPlan{w: g.Stdout, color: g.Color()}).render(pl.plan); err != nil {
			return err
		}
	}
	if !pl.plan.Empty() {
		ok, err := confirm(g, o.autoApprove, "Do you want to apply these changes?")
		if err != nil {
			return err
		}
		if !ok {
			if st != nil {
				return errors.New("apply cancelled: nothing was changed")
			}
			fmt.Fprintln(g.Stderr, "Apply cancelled: nothing was changed.")
			return &exitCodeError{code: exitError}
		}
	}
	devices := newDeviceSettings(h)
	if c, ok := devices.(io.Closer); ok {
		defer c.Close()
	}
	progress, events, live := runViews(g, st)
	opts := apply.Options{
		Events:       events,
		Progress:     live,
		StateDir:     g.stateDir(),
		Command:      "apply",
		NoRevert:     o.noRevert,
		Out:          progress,
		Before:       pl.obs,
		Executor:     &apply.HostExecutor{Host: h, Devices: devices, Driver: newDriverVersion(h), Indexes: providers.IndexesOf(h)},
		JournalPoint: applyHooks.journalPoint,
	}
	if pl.spec != nil {
		opts.Recheck = func(ctx context.Context) (*apply.Recheck, error) {
			again, diags := observeThenPlan(ctx, h, pl.spec, pl.pythns, configured(&o.planFlags))
			p := again.plan
			if diags.HasErrors() || p == nil {
				return nil, fmt.Errorf("planning again: %s", diags.Error())
			}
			rc := &apply.Recheck{Remaining: len(p.Steps), NeedsReboot: p.NeedsReboot}
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
		if st != nil {
			st.diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error(), Detail: "The host needs attention: run gpuenv rollback."}})
			return st.end(res, exitAttention)
		}
		fmt.Fprintf(g.Stderr, "Error: %v\nThe host needs attention: run gpuenv rollback.\n", err)
		return &exitCodeError{code: exitAttention}
	}
	if err != nil {
		return err
	}
	if st != nil {
		return st.end(res, res.ExitCode())
	}
	reportApply(g.Stdout, res, pl.spec != nil)
	if code := res.ExitCode(); code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// runViews are where an apply's or a rollback's text goes, and its
// events: the stream's with --json, the live line's on a terminal.
func runViews(g *globalOptions, st *eventStream) (text io.Writer, events, live func(apply.RunEvent)) {
	switch {
	case st != nil:
		return io.Discard, st.run, nil
	case g.Live():
		l := newLiveLine(g.Stdout, func() int { return terminalWidth(g.Stdout) })
		return l, nil, l.progress
	}
	return g.Stdout, nil, nil
}

// loadPlanned reads a saved plan, refusing a stale one, or plans the spec
// at target.
func loadPlanned(ctx context.Context, g *globalOptions, o *applyOptions, h *host.Host, target string, st *eventStream) (*planned, error) {
	data, err := os.ReadFile(target)
	if err == nil && planner.IsPlanDocument(data) {
		// Read as a spec, it would only get HCL's syntax errors.
		return nil, fmt.Errorf("%s is a plan document, not a saved plan: it lacks the %q marker of a plan saved with the fingerprint of the facts it was made from, so apply cannot tell whether it still fits the host. Save a plan to apply with `gpuenv plan --out FILE`, or apply the spec itself", target, "gpuenv_saved_plan")
	}
	if err == nil && planner.IsSavedPlan(data) {
		sp, err := planner.ReadSavedPlan(strings.NewReader(string(data)))
		if err != nil {
			return nil, err
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
		if err := sp.CheckFresh(obs); err != nil {
			var stale *planner.StaleError
			if errors.As(err, &stale) {
				if st != nil {
					st.diagnostics(hcl.Diagnostics{stale.Diagnostic()})
					return nil, &exitCodeError{code: exitError}
				}
				w := g.diagnosticWriter(nil)
				w.WriteDiagnostic(stale.Diagnostic())
				return nil, &exitCodeError{code: exitError}
			}
			return nil, err
		}
		return &planned{plan: &sp.Plan, obs: obs}, nil
	}
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
		if st != nil {
			st.diagnostics(diags)
			return nil, &exitCodeError{code: exitError}
		}
		writeDiagnostics(g, files, diags)
		return nil, &exitCodeError{code: exitError}
	}
	pd, more := observeThenPlan(ctx, h, s, o.pythons, configured(&o.planFlags))
	diags = append(diags, more...)
	if len(diags) > 0 {
		if st != nil {
			st.diagnostics(diags)
		} else {
			w := g.diagnosticWriter(s.Files)
			w.WriteDiagnostics(diags)
		}
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

// reportApply says how an apply ended.
func reportApply(w io.Writer, res *apply.Result, fromSpec bool) {
	if res.Generation == 0 {
		return
	}
	fmt.Fprintln(w)
	switch res.Status {
	case apply.StatusApplied:
		fmt.Fprintf(w, "Apply complete: %d operations done, %d skipped (generation %d).\n", len(res.Done), len(res.Skipped), res.Generation)
		switch {
		case res.Recheck != nil && res.Recheck.Remaining == 0:
			fmt.Fprintln(w, "The host now matches the spec.")
		case res.Recheck != nil:
			fmt.Fprintf(w, "The host does not match the spec yet: a new plan still has %d steps (%s).\n", res.Recheck.Remaining, strings.Join(res.Recheck.Steps, ", "))
		case !fromSpec:
			fmt.Fprintln(w, "Run gpuenv plan with the spec to confirm that the host now matches it.")
		}
		if res.NeedsReboot {
			fmt.Fprintln(w, "A reboot is needed for the changes to take effect.")
		}
	default:
		fmt.Fprintf(w, "Apply failed at %s: %s\n  %s\n", res.Failed.Step, res.Failed.What, res.Failed.Error)
		if len(res.Failed.LogTail) > 0 {
			fmt.Fprintln(w, "Last lines of the log:")
			for _, l := range res.Failed.LogTail {
				fmt.Fprintln(w, "  | "+l)
			}
		}
		reportReverted(w, res)
	}
	fmt.Fprintf(w, "Log: %s\n", res.LogPath)
}

func reportReverted(w io.Writer, res *apply.Result) {
	switch {
	case res.RevertFailed != nil:
		fmt.Fprintf(w, "Reverted %d operations; undoing %s: %s failed:\n  %s\n", len(res.Reverted), res.RevertFailed.Step, res.RevertFailed.What, res.RevertFailed.Error)
		if res.RevertFailed.Fix != "" {
			fmt.Fprintf(w, "The host needs attention: %s.\n", res.RevertFailed.Fix)
		} else {
			fmt.Fprintln(w, "The host needs attention: run gpuenv rollback to finish reverting.")
		}
	case res.Status == apply.StatusFailed:
		fmt.Fprintf(w, "Not reverted (--no-revert): generation %d is unfinished; gpuenv rollback undoes it.\n", res.Generation)
	default:
		fmt.Fprintf(w, "Reverted the %d operations done; the host is as it was before.\n", len(res.Reverted))
	}
}
