package apply

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Recorded is what an apply generation keeps of how it was made: its
// plan and the observation of the host it was planned from. Rolling
// forward to an undone generation applies the plan again, once the host
// is as that observation says, as a saved plan is checked.
type Recorded struct {
	Meta   Meta
	Plan   *plan.Plan
	Before *facts.Observation
}

// ReadRecorded reads the plan and the observation generation id of the
// state directory stateDir inside h's root keeps, each after checking
// that it can be trusted. Before is nil when the generation kept none.
func ReadRecorded(h *host.Host, stateDir string, id int) (*Recorded, error) {
	s, kind, err := newStore(h, stateDir, nil)
	if err != nil {
		return nil, err
	}
	if kind == stateMissing || kind == stateEmpty {
		return nil, fmt.Errorf("there is no generation %d: the state directory %s holds none", id, stateDir)
	}
	m, err := s.Meta(id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no generation %d", id)
	}
	if err != nil {
		return nil, err
	}
	if m.Kind != KindApply {
		return nil, fmt.Errorf("generation %d is a %s, not an apply: only an apply's plan can be applied again", id, m.Kind)
	}
	rec := &Recorded{Meta: m}
	read := func(name string, v any) (bool, error) { return s.readGenerationJSON(id, name, "JSON", v) }
	rec.Plan = new(plan.Plan)
	ok, err := read(planName, rec.Plan)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("generation %d keeps no plan (%s), so it cannot be applied again", id, planName)
	}
	if err := ValidatePlan(rec.Plan); err != nil {
		return nil, fmt.Errorf("generation %d's plan: %w", id, err)
	}
	obs := new(facts.Observation)
	if ok, err = read(observeName, obs); err != nil {
		return nil, err
	}
	if ok {
		rec.Before = obs
	}
	return rec, nil
}
