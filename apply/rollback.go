package apply

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// RollbackOptions are what a rollback needs besides the host.
type RollbackOptions struct {
	// StateDir is the state directory inside the root.
	StateDir string
	// To restores the host as it was right after generation To (0:
	// before the first apply); negative: undo only the newest apply not
	// yet undone.
	To       int
	Executor Executor
	// Hook is as in Options.
	Hook Hook
	// Confirm is shown what will be undone, while the lock is held, and
	// says whether to go on; nil goes on.
	Confirm func(p *RollbackPlan) bool
	// JournalPoint is as in Options.
	JournalPoint func(n int)
}

// RollbackPlan is what a rollback will undo.
type RollbackPlan struct {
	// Continues is an unfinished rollback generation being finished.
	Continues int `json:"continues,omitempty"`
	// Finishing is set when the newest generation is unfinished (killed,
	// or failed with its revert incomplete) and this rollback finishes
	// reverting it.
	Finishing bool `json:"finishing,omitempty"`
	// Generations are the applies undone, newest first.
	Generations []int `json:"generations"`
	// Undo lists the inverses in the order they run, as "N.K step:
	// what".
	Undo  []string `json:"undo"`
	items []undoItem
}

// ErrDeclined is returned when Confirm said no.
var ErrDeclined = errors.New("declined: nothing was changed")

// loadJournals reads and verifies every generation's journal.
func (s *Store) loadJournals(gens []Meta) (map[int][]Record, error) {
	out := make(map[int][]Record, len(gens))
	for _, m := range gens {
		recs, err := ReadJournal(filepath.Join(s.genAbs(m.ID), journalName), m.Finished != nil)
		if err != nil {
			return nil, fmt.Errorf("generation %d: %w", m.ID, err)
		}
		out[m.ID] = recs
	}
	return out, nil
}

// remaining lists the inverses still to run for apply generation id,
// newest operation first: every operation that began (its inverse is
// journaled) and has not been undone, by the apply's own revert or by a
// rollback.
func remaining(id int, journals map[int][]Record) []undoItem {
	undone := map[int]bool{}
	for _, recs := range journals {
		for _, r := range recs {
			if r.Event == EventUndone && r.Generation == id {
				undone[r.Op] = true
			}
		}
	}
	outcome := map[int]bool{}
	for _, r := range journals[id] {
		if (r.Event == EventDone || r.Event == EventFailed) && r.Op > 0 {
			outcome[r.Op] = true
		}
	}
	var items []undoItem
	at := map[int]int{}
	for _, r := range journals[id] {
		if r.Event != EventBegin || undone[r.Op] || r.Inverse == nil {
			continue
		}
		what := ""
		if r.Operation != nil {
			what = Describe(*r.Operation)
		}
		it := undoItem{gen: id, op: r.Op, step: r.Step, what: what, inv: r.Inverse, interrupted: !outcome[r.Op]}
		// An operation prepared again (PrepareAgainError) has a second
		// begin record, whose inverse is the one that stands.
		if i, seen := at[r.Op]; seen {
			items[i] = it
			continue
		}
		at[r.Op] = len(items)
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].op > items[j].op })
	return items
}

// Rollback undoes the newest apply not yet undone, or (opts.To) every
// apply after generation To, or finishes an unfinished generation, and
// records it as a generation of its own. An error means nothing was done;
// a failed rollback is a Result with StatusFailed.
func Rollback(ctx context.Context, h *host.Host, opts RollbackOptions) (*Result, error) {
	if err := checkRoot(h); err != nil {
		return nil, err
	}
	if _, err := h.Lstat(opts.StateDir); errors.Is(err, fs.ErrNotExist) {
		// Nothing was ever applied on this root: say so without leaving
		// a state directory behind.
		rp, _, err := planRollback(nil, nil, opts.To)
		if err != nil {
			return nil, err
		}
		if len(rp.Generations) == 0 {
			return &Result{Kind: KindRollback, Status: StatusDone}, nil
		}
	}
	store, lock, gens, err := lockStore(h, opts.StateDir, "rollback")
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := store.repair(gens); err != nil {
		return nil, err
	}
	journals, err := store.loadJournals(gens)
	if err != nil {
		return nil, err
	}
	rp, cont, err := planRollback(gens, journals, opts.To)
	if err != nil {
		return nil, err
	}
	if len(rp.Generations) == 0 {
		// Generation 0: nothing to roll back, which the views say.
		return &Result{Kind: KindRollback, Status: StatusDone}, nil
	}
	if opts.Confirm != nil && !opts.Confirm(rp) {
		return nil, ErrDeclined
	}

	var gen *Generation
	var existing []Record
	if cont != nil {
		gen = &Generation{store: store, Meta: *cont}
		existing = journals[cont.ID]
		gen.Meta.Status = StatusRunning
		gen.Meta.Finished = nil
		gen.Meta.PID = os.Getpid()
		if err := gen.save(); err != nil {
			return nil, err
		}
	} else {
		ids := make([]string, len(rp.Generations))
		for i, id := range rp.Generations {
			ids[i] = fmt.Sprint(id)
		}
		gen, err = store.newGeneration(Meta{
			Kind: KindRollback, Command: "rollback", PID: os.Getpid(), Started: time.Now().UTC(), Status: StatusRunning,
			Summary: "undo generation " + strings.Join(ids, ", "), Undoes: rp.Generations, Operations: len(rp.items),
		})
		if err != nil {
			return nil, err
		}
	}
	e, err := startEngine(gen, defaultExecutor(h, opts.Executor), opts.Hook, existing, opts.JournalPoint)
	if err != nil {
		return nil, err
	}
	defer e.close()
	res := &Result{Generation: gen.Meta.ID, Kind: KindRollback, LogPath: gen.LogPath()}
	if cont == nil {
		if err := e.j.append(Record{Event: EventStart, Kind: KindRollback, Ops: len(rp.items)}); err != nil {
			return e.abort(res, err)
		}
	}
	e.say("Rolling back (generation %d): %d inverses. Package managers' output: %s", gen.Meta.ID, len(rp.items), gen.LogPath())
	res.Reverted, res.RevertFailed = e.revert(context.WithoutCancel(ctx), rp.items)
	res.Status = StatusDone
	var failure error
	if res.RevertFailed != nil {
		res.Status = StatusFailed
		failure = errors.New(res.RevertFailed.What + ": " + res.RevertFailed.Error)
	}
	for _, it := range rp.items {
		if it.inv.Kernel != nil && it.inv.Kernel.Action == "rebuild_initramfs" {
			res.NeedsReboot = true
		}
		// The driver's packages put back leave the module of the
		// version undone loaded, which the restored libraries do not
		// match: as after apply, a reboot (or a reload) is needed.
		if it.inv.Kind == plan.OpPackages && driverStep(it.step) {
			res.NeedsReboot = true
		}
	}
	if err := e.finish(res.Status, res.NeedsReboot, failure); err != nil {
		return e.abort(res, err)
	}
	if res.Status == StatusDone {
		// Summaries only: the rollback's journal already says which
		// applies it undid, and reconcile reads it from there when these
		// writes fail.
		for _, id := range rp.Generations {
			m, err := store.Meta(id)
			if err != nil {
				e.say("Warning: generation %d's summary: %v", id, err)
				continue
			}
			m.UndoneBy = gen.Meta.ID
			if m.Status.Unfinished() {
				m.Status = StatusReverted
			}
			if err := store.writeMeta(m); err != nil {
				e.say("Warning: generation %d's summary could not be updated (%v); the next apply or rollback updates it.", id, err)
			}
		}
	}
	return res, nil
}

// planRollback decides what a rollback undoes. It returns the unfinished
// rollback generation to continue, if that is what is to be done.
func planRollback(gens []Meta, journals map[int][]Record, to int) (*RollbackPlan, *Meta, error) {
	if err := damagedInTheWay(gens, to); err != nil {
		return nil, nil, err
	}
	rp := &RollbackPlan{}
	var cont *Meta
	var unfinished *Meta
	for i := range gens {
		if gens[i].Status.Unfinished() {
			unfinished = &gens[i]
		}
	}
	switch {
	case unfinished != nil && to >= 0:
		return nil, nil, fmt.Errorf("generation %d (%s) is unfinished: run `gpuenv rollback` without --to to finish it first", unfinished.ID, unfinished.Kind)
	case unfinished != nil && unfinished.Kind == KindRollback:
		cont = unfinished
		rp.Continues = unfinished.ID
		rp.Finishing = true
		rp.Generations = unfinished.Undoes
	case unfinished != nil:
		rp.Finishing = true
		rp.Generations = []int{unfinished.ID}
	default:
		byID := map[int]Meta{}
		for _, m := range gens {
			byID[m.ID] = m
		}
		if to > 0 {
			m, ok := byID[to]
			switch {
			case !ok:
				return nil, nil, fmt.Errorf("there is no generation %d (see `gpuenv history`)", to)
			case m.Kind != KindApply:
				return nil, nil, fmt.Errorf("generation %d is a rollback; --to names the apply whose result to return to", to)
			case m.Status != StatusApplied:
				return nil, nil, fmt.Errorf("generation %d did not apply (%s); there is no host state after it to return to", to, m.Status)
			case m.UndoneBy != 0:
				return nil, nil, fmt.Errorf("generation %d was undone by generation %d; its result is no longer on the host to return to", to, m.UndoneBy)
			}
		}
		for i := len(gens) - 1; i >= 0; i-- {
			m := gens[i]
			if m.Kind != KindApply || m.Status != StatusApplied || m.UndoneBy != 0 {
				continue
			}
			if to >= 0 && m.ID <= to {
				break
			}
			rp.Generations = append(rp.Generations, m.ID)
			if to < 0 {
				break
			}
		}
	}
	for _, id := range rp.Generations {
		rp.items = append(rp.items, remaining(id, journals)...)
	}
	for _, it := range rp.items {
		rp.Undo = append(rp.Undo, fmt.Sprintf("%d.%d %s: %s", it.gen, it.op, it.step, DescribeInverse(it.inv)))
	}
	return rp, cont, nil
}

// driverStep reports whether step, a journal's step label ("driver", or
// "driver, cuda" for a transaction that served several), names the
// driver's packages.
func driverStep(step string) bool {
	for _, part := range strings.Split(step, ", ") {
		if part == "driver" || part == "driver.purge" {
			return true
		}
	}
	return false
}
