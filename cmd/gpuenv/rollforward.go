package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
)

// forwardTarget reports whether rollback --to N goes forward: N is an
// apply that a rollback undid. Anything else is for apply.Rollback,
// which says what is wrong with it.
func forwardTarget(h *host.Host, stateDir string, to int) bool {
	if to <= 0 {
		return false
	}
	gens, err := apply.History(h, stateDir)
	if err != nil {
		return false
	}
	for _, m := range gens {
		if m.ID == to {
			return m.Kind == apply.KindApply && m.UndoneBy != 0
		}
	}
	return false
}

// rollForward switches the host forward to generation to, an apply that
// was undone, as NixOS switches to any generation: it applies that
// generation's recorded plan again, as a new generation, once the host is
// what the plan was made from (the facts its fingerprint covers, checked
// as a saved plan's are) and no apply made after it is in effect.
func rollForward(ctx context.Context, g *globalOptions, h *host.Host, to int, autoApprove bool, st *eventStream) error {
	gens, err := apply.History(h, g.stateDir())
	if err != nil {
		return err
	}
	for _, m := range gens {
		if m.ID > to && m.Kind == apply.KindApply && m.UndoneBy == 0 && m.Status == apply.StatusApplied {
			return fmt.Errorf("generation %d, applied after generation %d, is in effect: rolling forward to %d would keep it. Roll back to before generation %d first (gpuenv rollback --to %d), then run gpuenv rollback --to %d", m.ID, to, to, to, to-1, to)
		}
	}
	rec, err := apply.ReadRecorded(h, g.stateDir(), to)
	if err != nil {
		return err
	}
	if rec.Before == nil {
		return fmt.Errorf("generation %d keeps no observation of the host it was planned on, so gpuenv cannot check that its plan still fits: apply its spec again instead", to)
	}
	var pythons []string
	for _, s := range rec.Plan.Steps {
		for _, op := range s.Operations {
			if op.Packages != nil && op.Packages.Venv != "" {
				pythons = append(pythons, path.Join(op.Packages.Venv, "bin", "python"))
			}
		}
	}
	obs := providers.Observe(ctx, h, providers.ObserveOptions{Pythons: pythons})
	if err := planner.Save(rec.Plan, rec.Before, nil).CheckFresh(obs); err != nil {
		if stale, ok := errors.AsType[*planner.StaleError](err); ok {
			return fmt.Errorf("the host is not as it was when generation %d was planned: its %s changed since. Roll back to the generation it was applied after, or apply its spec again and review the new plan",
				to, joinWords(stale.Changed))
		}
		return err
	}
	line := fmt.Sprintf("Rolling forward to generation %d: its plan, applied again; the host is as it was planned from.", to)
	if st != nil {
		st.write(map[string]any{"type": "message", "line": line})
		st.plan(rec.Plan)
	} else {
		fmt.Fprintln(g.Stdout, line)
		fmt.Fprintln(g.Stdout)
		if err := (&humanPlan{w: g.Stdout, color: g.Color()}).render(rec.Plan); err != nil {
			return err
		}
	}
	if !rec.Plan.Empty() {
		ok, err := confirm(g, autoApprove, fmt.Sprintf("Do you want to roll forward to generation %d?", to))
		if err != nil {
			return err
		}
		if !ok {
			if st != nil {
				return errors.New("roll forward cancelled: nothing was changed")
			}
			fmt.Fprintln(g.Stderr, "Roll forward cancelled: nothing was changed.")
			return &exitCodeError{code: exitError}
		}
	}
	devices := newDeviceSettings(h)
	if c, ok := devices.(io.Closer); ok {
		defer c.Close()
	}
	progress, events, live := runViews(g, st)
	res, err := apply.Apply(ctx, h, rec.Plan, apply.Options{
		Events:       events,
		Progress:     live,
		StateDir:     g.stateDir(),
		Command:      fmt.Sprintf("rollback --to %d", to),
		Out:          progress,
		Before:       obs,
		Executor:     &apply.HostExecutor{Host: h, Devices: devices, Driver: newDriverVersion(h), Indexes: providers.IndexesOf(h)},
		JournalPoint: applyHooks.journalPoint,
	})
	if err != nil && res != nil && res.ExitCode() == exitAttention {
		if st != nil {
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
	if res.Generation != 0 && res.Status == apply.StatusApplied {
		fmt.Fprintf(g.Stdout, "\nRolled forward to generation %d: %d operations done, %d skipped (generation %d).\n", to, len(res.Done), len(res.Skipped), res.Generation)
		if res.NeedsReboot {
			fmt.Fprintln(g.Stdout, "A reboot is needed for the changes to take effect.")
		}
		fmt.Fprintf(g.Stdout, "Log: %s\n", res.LogPath)
	} else if res.Generation != 0 {
		reportApply(g.Stdout, res, false)
	}
	if code := res.ExitCode(); code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// joinWords joins words as a sentence does.
func joinWords(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ws[0]
	}
	s := ws[0]
	for _, w := range ws[1 : len(ws)-1] {
		s += ", " + w
	}
	return s + " and " + ws[len(ws)-1]
}
