package apply_test

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/apply"
)

// eventLog is an apply.Hook that keeps a run's events, for a test to
// look at, and to show as a transcript when it fails.
type eventLog struct {
	// want is which of the costly events it takes.
	want apply.Wants
	mu   sync.Mutex
	all  []apply.RunEvent
}

var _ apply.Hook = (*eventLog)(nil)

func (r *eventLog) Wants() apply.Wants { return r.want }

func (r *eventLog) Event(e apply.RunEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
}

// Events are the events recorded so far.
func (r *eventLog) Events() []apply.RunEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]apply.RunEvent(nil), r.all...)
}

// String is the recorded run as lines: each message and note, each
// operation's start and end with its outcome and error; the package
// managers' output and the progress left out.
func (r *eventLog) String() string {
	var b strings.Builder
	for _, e := range r.Events() {
		switch e.Type {
		case apply.RunMessage:
			b.WriteString(e.Line + "\n")
		case apply.RunNote, apply.RunRevertCheckFailed:
			fmt.Fprintf(&b, "  %s%s\n", e.Line, e.Error)
		case apply.RunOperationStart:
			b.WriteString(operationLabel(e.Operation) + " …\n")
		case apply.RunOperationEnd:
			fmt.Fprintf(&b, "%s %s", operationLabel(e.Operation), e.Outcome)
			if e.Error != "" {
				b.WriteString(": " + e.Error)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// operationLabel names an operation as the text view does: "[2/5] step:
// what" in an apply, "undo 3.2 step: what" for an inverse.
func operationLabel(op *apply.EventOperation) string {
	if op == nil {
		return "?"
	}
	if op.Undoes != 0 {
		return fmt.Sprintf("undo %d.%d %s: %s", op.Undoes, op.Index, op.Step, op.What)
	}
	return fmt.Sprintf("[%d/%d] %s: %s", op.Index, op.Total, op.Step, op.What)
}
