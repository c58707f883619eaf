package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
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
// as a saved plan's are) and no apply made after it is in effect. Every
// word of it is said by v.
func rollForward(ctx context.Context, g *globalOptions, h *host.Host, to int, autoApprove bool, v runView) error {
	rec, obs, err := forwardPlan(ctx, g, h, to)
	if err != nil {
		return v.Failed(err)
	}
	if err := v.Forward(to, rec.Plan); err != nil {
		return v.Failed(err)
	}
	if !rec.Plan.Empty() {
		ok, err := confirm(g, autoApprove, fmt.Sprintf("Do you want to roll forward to generation %d?", to))
		if err != nil {
			return v.Failed(err)
		}
		if !ok {
			return v.Failed(v.Cancelled())
		}
	}
	devices := newDeviceSettings(h)
	if c, ok := devices.(io.Closer); ok {
		defer c.Close()
	}
	res, err := apply.Apply(ctx, h, rec.Plan, apply.Options{
		Hook:         v,
		StateDir:     g.stateDir(),
		Command:      fmt.Sprintf("rollback --to %d", to),
		Before:       obs,
		Executor:     &apply.HostExecutor{Host: h, Devices: devices, Driver: newDriverVersion(h), Indexes: providers.IndexesOf(h)},
		Generate:     providers.GeneratorOf(h),
		JournalPoint: applyHooks.journalPoint,
	})
	if err != nil && res != nil && res.ExitCode() == exitAttention {
		return v.Attention(res, err)
	}
	if err != nil {
		return v.Failed(err)
	}
	return v.Forwarded(to, res)
}

// forwardPlan reads generation to's recorded plan and checks that it
// still fits the host, observed again.
func forwardPlan(ctx context.Context, g *globalOptions, h *host.Host, to int) (*apply.Recorded, *facts.Observation, error) {
	gens, err := apply.History(h, g.stateDir())
	if err != nil {
		return nil, nil, err
	}
	for _, m := range gens {
		if m.ID > to && m.Kind == apply.KindApply && m.UndoneBy == 0 && m.Status == apply.StatusApplied {
			return nil, nil, fmt.Errorf("generation %d, applied after generation %d, is in effect: rolling forward to %d would keep it. Roll back to before generation %d first (gpuenv rollback --to %d), then run gpuenv rollback --to %d", m.ID, to, to, to, to-1, to)
		}
	}
	rec, err := apply.ReadRecorded(h, g.stateDir(), to)
	if err != nil {
		return nil, nil, err
	}
	if rec.Before == nil {
		return nil, nil, fmt.Errorf("generation %d keeps no observation of the host it was planned on, so gpuenv cannot check that its plan still fits: apply its spec again instead", to)
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
	if err := planner.Save(rec.Plan, rec.Before, nil, providers.Kinds()).CheckFresh(obs); err != nil {
		if stale, ok := errors.AsType[*planner.StaleError](err); ok {
			return nil, nil, fmt.Errorf("the host is not as it was when generation %d was planned: its %s changed since. Roll back to the generation it was applied after, or apply its spec again and review the new plan",
				to, joinWords(stale.Changed))
		}
		return nil, nil, err
	}
	return rec, obs, nil
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
