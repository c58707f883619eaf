package apply

import (
	"bytes"
	"sync"
	"time"
)

// RunEvent is one thing an apply or a rollback did, as it happened, for a
// program following the run (`apply --json` and `rollback --json` print
// them as JSON Lines). The human view says the same things as text.
type RunEvent struct {
	// Type is "operation_start", "operation_end", "package_manager_output",
	// "progress", "revert_start", "revert_end" or "message".
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
	Error   string  `json:"error,omitempty"`
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
	RunOperationStart = "operation_start"
	RunOperationEnd   = "operation_end"
	RunOutput         = "package_manager_output"
	RunProgress       = "progress"
	RunRevertStart    = "revert_start"
	RunRevertEnd      = "revert_end"
	RunMessage        = "message"
)

// emitter sends a run's events to its listener, stamping each, and its
// progress events also to the view that draws them (live).
type emitter struct {
	mu   sync.Mutex
	fn   func(RunEvent)
	live func(RunEvent)
	gen  int
	cur  *EventOperation
	line []byte
}

func (em *emitter) emit(e RunEvent) {
	if em == nil || em.fn == nil {
		return
	}
	em.send(e, em.fn)
}

func (em *emitter) send(e RunEvent, to ...func(RunEvent)) {
	em.mu.Lock()
	defer em.mu.Unlock()
	e.Timestamp = time.Now().UTC()
	if e.Generation == 0 {
		e.Generation = em.gen
	}
	for _, fn := range to {
		if fn != nil {
			fn(e)
		}
	}
}

// progress sends how far op has got.
func (em *emitter) progress(op *EventOperation, p Progress) {
	if em == nil {
		return
	}
	em.send(RunEvent{Type: RunProgress, Operation: op, Progress: &p}, em.fn, em.live)
}

// listened reports whether anyone follows progress.
func (em *emitter) listened() bool { return em != nil && (em.fn != nil || em.live != nil) }

// running marks op as the one whose package manager output follows.
func (em *emitter) running(op *EventOperation) {
	if em == nil {
		return
	}
	em.flush()
	em.mu.Lock()
	em.cur = op
	em.mu.Unlock()
}

// Write receives the generation log's bytes and emits them line by line,
// tagged with the operation running.
func (em *emitter) Write(p []byte) (int, error) {
	if em == nil || em.fn == nil {
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
	if em == nil || em.fn == nil {
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
