package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Options are what an apply needs besides the host and the plan.
type Options struct {
	// StateDir is the state directory inside the root.
	StateDir string
	// Command names the run in the lock and the generation ("apply").
	Command string
	// Executor runs the operations; nil: a HostExecutor on the host.
	Executor Executor
	// NoRevert leaves the operations done before a failure in place.
	NoRevert bool
	// Hook follows the run: every event goes to it as it happens, and
	// the engine says nothing any other way. Nil: nobody follows.
	Hook Hook
	// Before is the observation the plan was made from, saved in the
	// generation as observation-before.json.
	Before any
	// Recheck observes the host again after a successful apply and says
	// whether it now matches the spec; nil skips it.
	Recheck func(ctx context.Context) (*Recheck, error)
	// JournalPoint is called after each journal record is durable, with
	// their count; tests use it to kill the process there.
	JournalPoint func(n int)
	// Generate makes the content of the files the plan leaves to apply
	// (plan.FileOp.Generate); nil refuses such a plan.
	Generate Generator
}

// Recheck is what a new observation and plan say after an apply.
type Recheck struct {
	// Remaining is how many steps a new plan still has (0: the host
	// matches the spec).
	Remaining   int      `json:"remaining"`
	Steps       []string `json:"steps,omitempty"`
	NeedsReboot bool     `json:"needs_reboot"`
	// After is the observation the new plan was made from, saved in the
	// generation as observation-after.json: what plan -refresh-only
	// compares the host with later.
	After any `json:"-"`
}

// Result is what an apply or rollback did.
type Result struct {
	// Generation is 0 when nothing was to be done and none was made.
	Generation int    `json:"generation"`
	Kind       Kind   `json:"kind"`
	Status     Status `json:"status"`
	// Done are the operations carried out, as "address: description".
	Done    []string `json:"done,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	// Failed is the operation that failed, with the error and the last
	// lines of the log.
	Failed *Failure `json:"failed,omitempty"`
	// Reverted are the inverses run after the failure (or by a rollback).
	Reverted []string `json:"reverted,omitempty"`
	// RevertFailed is the inverse that failed, leaving the revert
	// incomplete.
	RevertFailed *Failure `json:"revert_failed,omitempty"`
	// LogPath is the generation's package-manager log, inside the root.
	LogPath     string   `json:"log,omitempty"`
	NeedsReboot bool     `json:"needs_reboot"`
	Recheck     *Recheck `json:"recheck,omitempty"`
}

// Failure is one failed operation or inverse.
type Failure struct {
	Step    string   `json:"step,omitempty"`
	What    string   `json:"what"`
	Error   string   `json:"error"`
	LogTail []string `json:"log_tail,omitempty"`
	// Fix is what to do before rolling back again, where running
	// rollback again alone would fail the same way (a saved package file
	// to replace).
	Fix string `json:"fix,omitempty"`
}

// fixer is an error that says what a person must do before the step
// that failed can succeed.
type fixer interface{ Fix() string }

// fixOf is err's Fix, "" when it has none.
func fixOf(err error) string {
	var f fixer
	if errors.As(err, &f) {
		return f.Fix()
	}
	return ""
}

// Exit codes, as the design's table gives them.
const (
	ExitOK        = 0
	ExitError     = 1
	ExitAttention = 3
)

// ExitCode is the command's exit status for this result: 0 success, 1 a
// failure fully reverted, 3 a failure that left the host needing
// attention.
func (r *Result) ExitCode() int {
	switch r.Status {
	case StatusReverted:
		return ExitError
	case StatusFailed, StatusRunning:
		return ExitAttention
	}
	return ExitOK
}

// ErrNotRoot is returned for an apply or rollback of the live system by a
// user other than root.
var ErrNotRoot = errors.New("changing the system's packages, files and groups needs root: run gpuenv as root (sudo)")

// UnfinishedError refuses an apply while a generation is unfinished.
type UnfinishedError struct{ Meta Meta }

func (e *UnfinishedError) Error() string {
	return fmt.Sprintf("generation %d (%s, started %s) is unfinished: the host may be between two states. Run `gpuenv rollback` to finish reverting it, then apply again",
		e.Meta.ID, e.Meta.Kind, e.Meta.Started.Local().Format(time.RFC3339))
}

// logTailLines is how much of the log a failure shows.
const logTailLines = 15

// engine is one apply or rollback in progress.
type engine struct {
	gen  *Generation
	exec Executor
	j    *journal
	ws   *Workspace
	logf *os.File
	em   *emitter
	// progress follows the operation running, for a hook that wants it.
	progress *tracker
}

// say emits a message, which a view shows between operations.
func (e *engine) say(format string, args ...any) {
	e.em.emit(RunEvent{Type: RunMessage, Line: fmt.Sprintf(format, args...)})
}

// opEvent names operation n of total for the events.
func opEvent(n, total int, step string, op plan.Operation) *EventOperation {
	return &EventOperation{Index: n, Total: total, Step: step, Kind: string(op.Kind), What: Describe(op)}
}

// started and ended report an operation's start and end; between them
// its progress goes out as it comes.
func (e *engine) started(op *EventOperation) {
	e.em.emit(RunEvent{Type: RunOperationStart, Operation: op})
	e.em.running(op)
	if e.em.wants.Progress {
		e.progress = newTracker(progressEvery, func(p Progress) { e.em.progress(op, p) })
		e.ws.progress = e.progress
	}
}

// settle stops the progress of the operation that ran, before its end is
// told: nothing of it comes after.
func (e *engine) settle() {
	e.progress.close()
	e.progress, e.ws.progress = nil, nil
}

func (e *engine) ended(op *EventOperation, outcome string, start time.Time, err error) {
	e.settle()
	e.em.running(nil)
	ev := RunEvent{Type: RunOperationEnd, Operation: op, Outcome: outcome, Seconds: time.Since(start).Round(time.Millisecond).Seconds()}
	if err != nil {
		ev.Error = err.Error()
	}
	e.em.emit(ev)
}

func checkRoot(h *host.Host) error {
	if h.Live() && os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return nil
}

func defaultExecutor(h *host.Host, x Executor) Executor {
	if x != nil {
		return x
	}
	return &HostExecutor{Host: h}
}

type item struct {
	step string
	op   plan.Operation
}

// planItems lists the operations of a plan in the order they run. A
// package operation that names one of the plan's batched transactions is
// replaced by the transaction at its first appearance, labelled with every
// step it serves, and dropped after that: one transaction, one journal
// entry, one inverse.
func planItems(p *plan.Plan) []item {
	var items []item
	ran := map[int]bool{}
	for _, s := range p.Steps {
		for _, op := range s.Operations {
			if op.Kind == plan.OpPackages && op.Transaction > 0 && op.Transaction <= len(p.Transactions) {
				if ran[op.Transaction] {
					continue
				}
				ran[op.Transaction] = true
				t := p.Transactions[op.Transaction-1]
				tx := t.Op
				items = append(items, item{strings.Join(t.Steps, ", "), plan.Operation{Kind: plan.OpPackages, Transaction: t.ID, Packages: &tx}})
				continue
			}
			items = append(items, item{s.Address, op})
		}
	}
	return items
}

// ValidatePlan checks that every operation of p is one apply can run.
func ValidatePlan(p *plan.Plan) error {
	if p == nil {
		return errors.New("no plan")
	}
	if len(p.Transactions) > 0 {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	for _, it := range planItems(p) {
		if err := validateOp(it.op); err != nil {
			return fmt.Errorf("step %s: %w", it.step, err)
		}
	}
	if err := plan.CheckFormatVersion(p.FormatVersion); err != nil {
		return err
	}
	return nil
}

// Apply runs plan on h: each operation prepared, journaled with its
// inverse, run; on failure the completed ones are reverted newest first
// unless opts.NoRevert. An error means nothing was attempted (refused:
// lock held, unfinished generation, not root, invalid plan); a failed
// apply is a Result whose Status says how it ended.
func Apply(ctx context.Context, h *host.Host, plan *plan.Plan, opts Options) (*Result, error) {
	if err := checkRoot(h); err != nil {
		return nil, err
	}
	if err := ValidatePlan(plan); err != nil {
		return nil, err
	}
	command := opts.Command
	if command == "" {
		command = "apply"
	}
	store, lock, gens, err := lockStore(h, opts.StateDir, command)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if err := store.repair(gens); err != nil {
		return nil, err
	}
	for _, g := range gens {
		if g.Status.Unfinished() {
			return nil, &UnfinishedError{g}
		}
	}
	items := planItems(plan)
	if err := checkGenerators(items, opts.Generate); err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// Generation 0: nothing was to be done, which the views say.
		return &Result{Kind: KindApply, Status: StatusApplied}, nil
	}

	gen, err := store.newGeneration(Meta{
		Kind: KindApply, Command: command, PID: os.Getpid(), Started: time.Now().UTC(), SpecDigest: plan.SpecDigest,
		Summary: summarize(plan), Status: StatusRunning, Operations: len(items),
	})
	if err != nil {
		return nil, err
	}
	e, err := startEngine(gen, defaultExecutor(h, opts.Executor), opts.Hook, nil, opts.JournalPoint)
	if err != nil {
		return nil, err
	}
	defer e.close()
	res := &Result{Generation: gen.Meta.ID, Kind: KindApply, LogPath: gen.LogPath(), NeedsReboot: plan.NeedsReboot}
	if err := gen.writeJSON(planName, plan); err != nil {
		return e.abort(res, err)
	}
	if opts.Before != nil {
		if err := gen.writeJSON(observeName, opts.Before); err != nil {
			return e.abort(res, err)
		}
	}
	if err := e.j.append(Record{Event: EventStart, Kind: KindApply, Ops: len(items)}); err != nil {
		return e.abort(res, err)
	}
	e.say("Applying generation %d: %d operations. Package managers' output: %s", gen.Meta.ID, len(items), gen.LogPath())

	var begun []undoItem
	var done []Expectation
	var failure error
	// An operation, once started, runs to its end even when the user
	// interrupts: killing a package manager half-way leaves dpkg's
	// database needing repair. The interruption stops the apply before
	// the next operation instead, and the revert runs in full.
	run := context.WithoutCancel(ctx)
	for k, it := range items {
		n := k + 1
		what := Describe(it.op)
		start := time.Now()
		if err := ctx.Err(); err != nil {
			failure = fmt.Errorf("interrupted before operation %d: %w", n, err)
			res.Failed = &Failure{Step: it.step, What: what, Error: failure.Error()}
			e.say("Interrupted: stopping before [%d/%d] %s.", n, len(items), it.step)
			if jerr := e.j.append(Record{Event: EventFailed, Op: n, Step: it.step, Operation: &it.op, Error: failure.Error(), Note: "not started: nothing changed"}); jerr != nil {
				return e.abort(res, jerr)
			}
			break
		}
		ev := opEvent(n, len(items), it.step, it.op)
		e.started(ev)
		var inv *Inverse
		op, err := generated(run, it.op, opts.Generate)
		if err == nil {
			it.op = op
			inv, err = safe(func() (*Inverse, error) { return e.exec.Prepare(run, e.ws, n, it.op) })
		}
		var skip *SkipError
		if errors.As(err, &skip) {
			e.ended(ev, "skipped", start, skip)
			res.Skipped = append(res.Skipped, it.step+": "+skip.Reason)
			res.NeedsReboot = true
			if err := e.j.append(Record{Event: EventSkipped, Op: n, Step: it.step, Operation: &it.op, Note: skip.Reason}); err != nil {
				return e.abort(res, err)
			}
			continue
		}
		if err != nil {
			failure = fmt.Errorf("preparing: %w", err)
			e.ended(ev, "failed", start, failure)
			res.Failed = &Failure{Step: it.step, What: what, Error: failure.Error(), LogTail: e.logTail()}
			if jerr := e.j.append(Record{Event: EventFailed, Op: n, Step: it.step, Operation: &it.op, Error: failure.Error(), Note: "not started: nothing changed"}); jerr != nil {
				return e.abort(res, jerr)
			}
			break
		}
		if err := e.j.append(Record{Event: EventBegin, Op: n, Step: it.step, Operation: &it.op, Inverse: inv}); err != nil {
			return e.abort(res, err)
		}
		begun = append(begun, undoItem{gen: gen.Meta.ID, op: n, step: it.step, what: what, inv: inv})
		e.em.emit(RunEvent{Type: RunOperationRun, Operation: ev})
		_, err = safe(func() (*Inverse, error) { return nil, e.exec.Run(run, e.ws, it.op) })
		var again *PrepareAgainError
		if errors.As(err, &again) {
			// Nothing changed: the operation is prepared again, and its
			// new inverse, journaled for the same operation, replaces
			// the first (remaining keeps the last).
			e.ws.say("%s", again.Reason)
			if inv, err = safe(func() (*Inverse, error) { return e.exec.Prepare(run, e.ws, n, it.op) }); err != nil {
				err = fmt.Errorf("preparing again: %w", err)
			} else {
				if jerr := e.j.append(Record{Event: EventBegin, Op: n, Step: it.step, Operation: &it.op, Inverse: inv}); jerr != nil {
					return e.abort(res, jerr)
				}
				begun[len(begun)-1].inv = inv
				_, err = safe(func() (*Inverse, error) { return nil, e.exec.Run(run, e.ws, it.op) })
			}
		}
		e.settle()
		if err != nil {
			failure = err
			e.ended(ev, "failed", start, err)
			res.Failed = &Failure{Step: it.step, What: what, Error: err.Error(), LogTail: e.logTail()}
			if jerr := e.j.append(Record{Event: EventFailed, Op: n, Step: it.step, Error: err.Error()}); jerr != nil {
				return e.abort(res, jerr)
			}
			break
		}
		if err := e.j.append(Record{Event: EventDone, Op: n, Step: it.step}); err != nil {
			return e.abort(res, err)
		}
		e.ended(ev, "done", start, nil)
		res.Done = append(res.Done, it.step+": "+what)
		if it.op.Packages != nil {
			done = append(done, Expectation{Op: it.op.Packages, Inverse: inv.Packages})
		}
	}
	if failure == nil && len(done) > 0 {
		// A package manager that exits 0 is not the last word: the
		// database must show every pin at its version and nothing left
		// half-configured.
		if err := e.exec.Check(run, e.ws, done); err != nil {
			failure = err
			res.Failed = &Failure{Step: "packages", What: "checking the package database", Error: err.Error(), LogTail: e.logTail()}
			e.say("The package database does not show what the plan installed: %v", err)
			if jerr := e.j.append(Record{Event: EventFailed, Note: "package check: " + err.Error()}); jerr != nil {
				return e.abort(res, jerr)
			}
		}
	}
	if failure == nil && ctx.Err() != nil {
		// The signal came while the last operation ran: the apply is
		// not finished until its end record is written, so it reverts
		// like one interrupted earlier.
		failure = fmt.Errorf("interrupted during the last operation: %w", ctx.Err())
		last := items[len(items)-1]
		res.Failed = &Failure{Step: last.step, What: Describe(last.op), Error: failure.Error()}
		e.say("Interrupted: the apply did not finish.")
		if jerr := e.j.append(Record{Event: EventFailed, Note: failure.Error()}); jerr != nil {
			return e.abort(res, jerr)
		}
	}

	switch {
	case failure == nil:
		res.Status = StatusApplied
	case opts.NoRevert:
		e.say("Not reverting (--no-revert): %d operations stay done; `gpuenv rollback` undoes them.", len(begun))
		res.Status = StatusFailed
	default:
		e.say("Reverting %d operations, newest first:", len(begun))
		reverse(begun)
		res.Reverted, res.RevertFailed = e.revert(context.WithoutCancel(ctx), begun)
		if res.RevertFailed != nil {
			res.Status = StatusFailed
		} else {
			res.Status = StatusReverted
		}
	}
	if err := e.finish(res.Status, res.NeedsReboot, failure); err != nil {
		return e.abort(res, err)
	}
	if res.Status == StatusApplied && res.NeedsReboot {
		if err := markRebootRequired(h, rebootPackages(plan)); err != nil {
			e.say("Warning: %s could not be written: %v", RebootRequired, err)
		}
	}
	if res.Status == StatusApplied && opts.Recheck != nil {
		rc, err := opts.Recheck(run)
		if err != nil {
			e.say("Observing the host again failed: %v", err)
		} else {
			res.Recheck = rc
			res.NeedsReboot = res.NeedsReboot || rc.NeedsReboot
			if rc.After != nil {
				if err := gen.writeJSON(observeAfterName, rc.After); err != nil {
					e.say("Warning: the observation after the apply could not be saved (plan -refresh-only compares with the one before it): %v", err)
				}
			}
		}
	}
	return res, nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// safe runs f, turning a panic into an error so that a programming error
// in one executor still ends in a revert.
func safe(f func() (*Inverse, error)) (inv *Inverse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error (panic): %v", r)
		}
	}()
	return f()
}

func startEngine(gen *Generation, x Executor, hook Hook, existing []Record, point func(int)) (*engine, error) {
	logf, err := os.OpenFile(filepath.Join(gen.Path(), logName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	j, err := openJournal(filepath.Join(gen.Path(), journalName), existing, point)
	if err != nil {
		logf.Close()
		return nil, err
	}
	e := &engine{gen: gen, exec: x, j: j, logf: logf, em: newEmitter(hook, gen.Meta.ID)}
	var log io.Writer = logf
	if e.em.wants.Output {
		// The log's lines are the package managers' output as it
		// comes, so the events follow it.
		log = io.MultiWriter(logf, e.em)
	}
	e.ws = &Workspace{Dir: gen.Dir(), Path: gen.Path(), Log: log, Say: func(f string, a ...any) {
		fmt.Fprintf(logf, "gpuenv: "+f+"\n", a...)
		e.em.emit(RunEvent{Type: RunNote, Line: fmt.Sprintf(f, a...)})
	}}
	return e, nil
}

func (e *engine) close() {
	// A run that stopped inside an operation (its journal could not be
	// written) says nothing more of it once it returns.
	e.settle()
	e.em.flush()
	e.j.close()
	e.logf.Close()
}

// revert runs inverses as undo does, between a revert_start and a
// revert_end event.
func (e *engine) revert(ctx context.Context, items []undoItem) ([]string, *Failure) {
	e.em.emit(RunEvent{Type: RunRevertStart, Count: len(items)})
	done, f := e.undo(ctx, items)
	ev := RunEvent{Type: RunRevertEnd, Outcome: "reverted", Count: len(done)}
	if f != nil {
		ev.Outcome, ev.Error = "failed", f.What+": "+f.Error
	}
	e.em.emit(ev)
	return done, f
}

// finish closes the journal with the status and records it in meta.
// An error means the end record could not be written: the generation is
// unfinished. Once the end record is durable the run is over whatever
// happens to meta.json, a summary that the journal overrules (see
// reconcile); failing to write it is only reported.
func (e *engine) finish(st Status, reboot bool, failure error) error {
	if err := e.j.append(Record{Event: EventEnd, Status: st}); err != nil {
		return err
	}
	e.logf.Sync()
	now := time.Now().UTC()
	e.gen.Meta.Status = st
	e.gen.Meta.Finished = &now
	e.gen.Meta.NeedsReboot = reboot
	if failure != nil {
		e.gen.Meta.Error = failure.Error()
	}
	if err := e.gen.save(); err != nil {
		e.say("Warning: the generation's summary could not be updated (%v); its journal records how it ended, and the next apply or rollback updates the summary.", err)
	}
	return nil
}

// abort ends a run whose journal cannot be written: the generation stays
// "running", which is what it is, and rollback finishes it.
func (e *engine) abort(res *Result, err error) (*Result, error) {
	res.Status = StatusRunning
	return res, fmt.Errorf("the journal could not be written, the run stopped: %w", err)
}

// logTail is the end of the generation's log: its last lines, read from
// its last bytes only, since a package manager's output has no bound.
func (e *engine) logTail() []string {
	e.logf.Sync()
	f, err := os.Open(e.logf.Name())
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	from := max(0, fi.Size()-childproc.DefaultTailBytes)
	data, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return nil
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if from > 0 && len(lines) > 1 {
		// The first line read is most likely the end of a longer one.
		lines = lines[1:]
	}
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return lines
}

// undoItem is one inverse to run.
type undoItem struct {
	gen  int
	op   int
	step string
	what string
	inv  *Inverse
	// interrupted: the operation began and has no outcome; a package
	// transaction like that needs its manager's recovery first.
	interrupted bool
}

// undo runs inverses in the order given, journaling each, and stops at the
// first that fails: the ones after it may depend on it. An initramfs
// rebuild is run once, last, after the files it is built from are back;
// a reload's load of the old module and start of its services run right
// after the package transaction before them is undone.
func (e *engine) undo(ctx context.Context, items []undoItem) ([]string, *Failure) {
	var done []string
	recovered := map[string]bool{}
	var rebuild []undoItem
	run := func(it undoItem) (fail *Failure) {
		what := DescribeInverse(it.inv)
		ev := &EventOperation{Index: it.op, Undoes: it.gen, Step: it.step, Kind: string(it.inv.Kind), What: what}
		start := time.Now()
		e.started(ev)
		defer func() {
			if fail != nil {
				e.ended(ev, "failed", start, errors.New(fail.Error))
			} else {
				e.ended(ev, "done", start, nil)
			}
		}()
		if it.interrupted && it.inv.Packages != nil && !recovered[it.inv.Packages.Manager] {
			recovered[it.inv.Packages.Manager] = true
			if err := e.j.append(Record{Event: EventAudit, Generation: it.gen, Op: it.op, Note: recoveryNote(it.inv.Packages.Manager)}); err != nil {
				return &Failure{Step: it.step, What: what, Error: err.Error()}
			}
			if err := e.exec.Recover(ctx, e.ws, it.inv.Packages.Manager); err != nil {
				return &Failure{Step: it.step, What: "recovering " + it.inv.Packages.Manager, Error: err.Error(), LogTail: e.logTail()}
			}
		}
		if err := e.j.append(Record{Event: EventUndo, Generation: it.gen, Op: it.op, Step: it.step, Inverse: it.inv}); err != nil {
			return &Failure{Step: it.step, What: what, Error: err.Error()}
		}
		_, err := safe(func() (*Inverse, error) { return nil, e.exec.Undo(ctx, e.ws, it.inv) })
		e.settle()
		if err != nil {
			e.j.append(Record{Event: EventUndoFailed, Generation: it.gen, Op: it.op, Step: it.step, Error: err.Error()})
			return &Failure{Step: it.step, What: what, Error: err.Error(), LogTail: e.logTail(), Fix: fixOf(err)}
		}
		if err := e.j.append(Record{Event: EventUndone, Generation: it.gen, Op: it.op, Step: it.step}); err != nil {
			return &Failure{Step: it.step, What: what, Error: err.Error()}
		}
		done = append(done, fmt.Sprintf("%s: %s", it.step, what))
		return nil
	}
	// A module reload's inverses that load the old module, and start
	// what held it, wait for the package transaction before them: the
	// old module's files are back only once it is undone.
	var waiting []undoItem
	flush := func() *Failure {
		for _, it := range waiting {
			if f := run(it); f != nil {
				return f
			}
		}
		waiting = nil
		return nil
	}
	for _, it := range items {
		if it.inv.Kernel != nil && it.inv.Kernel.Action == "rebuild_initramfs" {
			rebuild = append(rebuild, it)
			continue
		}
		if it.inv.afterPackages() {
			waiting = append(waiting, it)
			continue
		}
		if f := run(it); f != nil {
			return done, f
		}
		if it.inv.Packages != nil {
			if f := flush(); f != nil {
				return done, f
			}
		}
	}
	if f := flush(); f != nil {
		return done, f
	}
	for i, it := range rebuild {
		if i > 0 {
			// One rebuild serves them all; the others are recorded as
			// undone by it.
			e.j.append(Record{Event: EventUndo, Generation: it.gen, Op: it.op, Step: it.step, Inverse: it.inv})
			e.j.append(Record{Event: EventUndone, Generation: it.gen, Op: it.op, Step: it.step, Note: "served by the rebuild above"})
			continue
		}
		if f := run(it); f != nil {
			return done, f
		}
	}
	var want []Expectation
	for _, it := range items {
		if it.inv.Packages != nil {
			want = append(want, Expectation{Inverse: it.inv.Packages})
		}
	}
	if len(want) > 0 {
		if err := e.exec.Check(ctx, e.ws, want); err != nil {
			e.em.emit(RunEvent{Type: RunRevertCheckFailed, Error: err.Error()})
			e.j.append(Record{Event: EventUndoFailed, Note: "package check: " + err.Error()})
			return done, &Failure{Step: "packages", What: "checking the package database", Error: err.Error(), LogTail: e.logTail()}
		}
	}
	return done, nil
}
