package apply

import (
	"bytes"
	"sync"
	"time"
)

// RunEvent is one thing an apply or a rollback did, as it happened. The
// engine says nothing in any other way: its views (the text a person
// reads, the live progress line, `apply --json` and `rollback --json`'s
// JSON Lines) are Hooks that render these events.
type RunEvent struct {
	// Type is one of the Run constants.
	Type      string    `json:"type"`
	Timestamp time.Time `json:"@timestamp"`
	// Generation is the generation being run.
	Generation int `json:"generation,omitempty"`
	// Operation is the operation (or inverse) an event is about.
	Operation *EventOperation `json:"operation,omitempty"`
	// Outcome ends an operation ("done", "failed", "skipped") or a revert
	// ("reverted", "failed").
	Outcome string  `json:"outcome,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	// Error is why an operation failed or was skipped, or what the
	// package check found.
	Error string `json:"error,omitempty"`
	// Line is one line the package managers printed, or a message.
	Line string `json:"line,omitempty"`
	// Count is how many operations a revert sets out to undo, or undid.
	Count int `json:"count,omitempty"`
	// Progress is how far the running operation has got (a progress
	// event), sent at most every progressEvery.
	Progress *Progress `json:"progress,omitempty"`
}

// EventOperation names the operation an event is about.
type EventOperation struct {
	// Index numbers the operation in its generation's plan, from 1, of
	// Total; for an inverse, the operation it undoes in generation
	// Undoes.
	Index  int    `json:"index"`
	Total  int    `json:"total,omitempty"`
	Undoes int    `json:"undoes,omitempty"`
	Step   string `json:"step"`
	// Kind is the operation's kind: "packages", "file", "group",
	// "kernel", "service", "device".
	Kind string `json:"kind"`
	What string `json:"what"`
}

// RunEvent types.
const (
	// RunMessage is what the run says between operations: the
	// generation started, a revert begun, a warning.
	RunMessage = "message"
	// RunNote is what an executor says while an operation runs: a lock
	// waited for, a version pinned, a fallback taken (Workspace.Say).
	RunNote = "note"
	// RunOperationStart: an operation, or an inverse, starts (it is
	// being prepared).
	RunOperationStart = "operation_start"
	// RunOperationRun: an apply's operation is prepared and journaled
	// with its inverse, and now changes the host.
	RunOperationRun = "operation_run"
	// RunOperationEnd: it ended, with an Outcome; a skipped one's Error
	// says why.
	RunOperationEnd = "operation_end"
	// RunOutput is a line the package managers printed (Wants.Output).
	RunOutput = "package_manager_output"
	// RunProgress is how far the running operation has got
	// (Wants.Progress).
	RunProgress = "progress"
	// RunRevertStart and RunRevertEnd bracket an apply's revert after a
	// failure, and a rollback's inverses.
	RunRevertStart = "revert_start"
	RunRevertEnd   = "revert_end"
	// RunRevertCheckFailed: after the inverses ran, the package database is
	// not as it was before the apply (Error says how); RunRevertEnd
	// follows, failed.
	RunRevertCheckFailed = "revert_check_failed"
)

// Hook follows an apply or a rollback: the engine hands it every event as
// it happens, one at a time and in order, from whichever goroutine the
// event arises on. A view is a Hook; the engine has no other output.
type Hook interface {
	// Wants says which of the events that cost something to make the
	// hook takes.
	Wants() Wants
	// Event receives one event. It must not block for long: the run
	// waits for it.
	Event(RunEvent)
}

// Wants are the kinds of events a Hook takes besides the run's steps,
// which every hook gets.
type Wants struct {
	// Output: the package managers' output, line by line.
	Output bool
	// Progress: how far the running operation has got. Following it
	// costs a tracker, a goroutine, per operation.
	Progress bool
}

// silent is the hook of a run nobody follows.
type silent struct{}

func (silent) Wants() Wants   { return Wants{} }
func (silent) Event(RunEvent) {}

// emitter hands a run's events to its hook, stamping each, one at a
// time: they come from the run, the progress tracker and the package
// managers' output.
type emitter struct {
	mu    sync.Mutex
	hook  Hook
	wants Wants
	gen   int
	cur   *EventOperation
	line  []byte
}

func newEmitter(h Hook, gen int) *emitter {
	if h == nil {
		h = silent{}
	}
	return &emitter{hook: h, wants: h.Wants(), gen: gen}
}

func (em *emitter) emit(e RunEvent) {
	em.mu.Lock()
	defer em.mu.Unlock()
	e.Timestamp = time.Now().UTC()
	if e.Generation == 0 {
		e.Generation = em.gen
	}
	em.hook.Event(e)
}

// progress sends how far op has got.
func (em *emitter) progress(op *EventOperation, p Progress) {
	em.emit(RunEvent{Type: RunProgress, Operation: op, Progress: &p})
}

// running marks op as the one whose package manager output follows.
func (em *emitter) running(op *EventOperation) {
	em.flush()
	em.mu.Lock()
	em.cur = op
	em.mu.Unlock()
}

// Write receives the generation log's bytes and emits them line by line,
// tagged with the operation running.
func (em *emitter) Write(p []byte) (int, error) {
	if !em.wants.Output {
		return len(p), nil
	}
	em.mu.Lock()
	em.line = append(em.line, p...)
	var lines []string
	for {
		i := bytes.IndexByte(em.line, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(em.line[:i]))
		em.line = em.line[i+1:]
	}
	op := em.cur
	em.mu.Unlock()
	for _, l := range lines {
		em.emit(RunEvent{Type: RunOutput, Operation: op, Line: l})
	}
	return len(p), nil
}

// flush emits what is left of an unfinished line.
func (em *emitter) flush() {
	if !em.wants.Output {
		return
	}
	em.mu.Lock()
	rest := em.line
	em.line = nil
	op := em.cur
	em.mu.Unlock()
	if len(rest) > 0 {
		em.emit(RunEvent{Type: RunOutput, Operation: op, Line: string(rest)})
	}
}
