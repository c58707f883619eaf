package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// runView shows an apply or a rollback: what it is about to do, the
// engine's events as they come (the view is the engine's hook, and the
// engine has no other output), and how it ended. One is chosen from the
// flags when the command starts (newRunView), so that apply and rollback
// never ask which format they write. The methods that end the command
// return its error, which carries the exit status.
type runView interface {
	apply.Hook
	// Diagnostics shows the spec's and the planner's diagnostics, or why
	// a saved plan is refused; files are the spec's sources, nil when
	// none were read.
	Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics)
	// Replanned says that the saved plan file was planned again, from the
	// spec and flags it keeps, to the very same plan.
	Replanned(saved string)
	// Plan shows the plan apply is about to carry out.
	Plan(p *plan.Plan) error
	// RollbackPlan shows what rollback is about to undo.
	RollbackPlan(p *apply.RollbackPlan)
	// Cancelled ends a run the person at the terminal declined.
	Cancelled() error
	// Result ends a run the engine carried out, or found nothing to do
	// for (generation 0). fromSpec: an apply's plan came with its spec,
	// so the host was observed again after it.
	Result(res *apply.Result, fromSpec bool) error
	// Attention ends a run whose journal could not be written part-way
	// (err): the host may be half-changed, and only rollback knows how
	// far.
	Attention(res *apply.Result, err error) error
	// Failed ends a command that err refused, or stopped before the
	// engine had a result.
	Failed(err error) error
	// Forward shows the recorded plan of generation to, which rollback
	// --to applies again (rolling forward).
	Forward(to int, p *plan.Plan) error
	// Forwarded ends a roll forward the engine carried out.
	Forwarded(to int, res *apply.Result) error
}

// newRunView returns the view the flags ask for, of a run of kind.
func newRunView(g *globalOptions, kind apply.Kind) runView {
	if g.JSON {
		return &runJSON{kind: kind, st: newEventStream(g.Stdout)}
	}
	v := &runHuman{
		kind: kind, out: g.Stdout, errw: g.Stderr, color: g.Color(),
		diagnostics: g.diagnosticWriter, stillRunning: defaultStillRunning,
	}
	if g.Live() {
		v.live = newLiveLine(g.Stdout, func() int { return terminalWidth(g.Stdout) })
	}
	return v
}

// attentionFix is what to do after a journal that could not be written
// part-way, for each kind of run.
var attentionFix = map[apply.Kind]string{
	apply.KindApply:    "The host needs attention: run gpuenv rollback.",
	apply.KindRollback: "The host needs attention: free space in the state directory, then run gpuenv rollback again.",
}

// defaultStillRunning is how often the text says that an operation is
// still running, where no live line shows its progress: a person
// watching a package manager download a driver for minutes sees it is
// still at work.
const defaultStillRunning = 30 * time.Second

// runHuman is the text a person reads: the plan or what will be undone,
// a line per operation ("[2/5] step: what … done (1.2s)"), what the run
// says between operations, and how it ended. On a terminal the live line
// draws the running operation's progress under its line; elsewhere a
// long operation says every stillRunning that it is still running.
type runHuman struct {
	kind        apply.Kind
	forward     bool // rollback --to rolls forward: an apply's plan again
	out, errw   io.Writer
	color       bool
	diagnostics func(files map[string]*hcl.File) hcl.DiagnosticWriter
	// live draws progress on a terminal; nil elsewhere.
	live         *liveLine
	stillRunning time.Duration

	// w is where the events' text goes, shared with the ticker.
	once sync.Once
	w    io.Writer
	// started is when the operation being shown started, ran whether
	// it got past its preparation; stopTicker stops its "still running"
	// lines.
	started    time.Time
	ran        bool
	stopTicker func()
}

var _ runView = (*runHuman)(nil)

// Wants: the text shows no package manager output, and progress only on
// a live line.
func (v *runHuman) Wants() apply.Wants { return apply.Wants{Progress: v.live != nil} }

// text is where the events' text goes: through the live line on a
// terminal, which erases its drawing first, and one write at a time, as
// the ticker writes too.
func (v *runHuman) text() io.Writer {
	v.once.Do(func() {
		var w io.Writer = v.out
		if v.live != nil {
			w = v.live
		}
		v.w = &syncWriter{w: w}
	})
	return v.w
}

func (v *runHuman) Event(e apply.RunEvent) {
	w := v.text()
	switch e.Type {
	case apply.RunMessage:
		fmt.Fprintf(w, "%s\n", e.Line)
	case apply.RunNote:
		// Inside the operation's line, which goes on after it.
		fmt.Fprintf(w, "\n      %s\n", e.Line)
	case apply.RunOperationStart:
		v.started, v.ran = time.Now(), false
		op := e.Operation
		if op.Undoes != 0 {
			fmt.Fprintf(w, "  undo %d.%d %s: %s …", op.Undoes, op.Index, op.Step, op.What)
		} else {
			fmt.Fprintf(w, "[%d/%d] %s: %s …", op.Index, op.Total, op.Step, op.What)
		}
	case apply.RunOperationRun:
		v.ran = true
		if v.live == nil {
			v.stopTicker = v.ticker(w, v.started)
		}
	case apply.RunOperationEnd:
		v.stopStillRunning()
		switch {
		case e.Operation.Undoes != 0:
			fmt.Fprintf(w, " %s\n", e.Outcome)
		case e.Outcome == "skipped":
			fmt.Fprintf(w, " skipped\n      %s\n", e.Error)
		case e.Outcome == "failed" && v.ran:
			fmt.Fprintf(w, " failed after %s\n", elapsed(v.started))
		case e.Outcome == "failed":
			fmt.Fprintf(w, " failed\n")
		default:
			fmt.Fprintf(w, " %s (%s)\n", e.Outcome, elapsed(v.started))
		}
	case apply.RunRevertCheckFailed:
		fmt.Fprintf(w, "  the package database is not as it was: %s\n", e.Error)
	case apply.RunProgress:
		if v.live != nil {
			v.live.progress(e)
		}
	}
}

// stopStillRunning stops the "still running" lines of the operation
// shown: at its end, or at the end of a run that stopped inside it (its
// journal could not be written).
func (v *runHuman) stopStillRunning() {
	if v.stopTicker != nil {
		v.stopTicker()
		v.stopTicker = nil
	}
}

// ticker says every stillRunning, until stopped, how long the operation
// started at start has been running.
func (v *runHuman) ticker(w io.Writer, start time.Time) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(v.stillRunning)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "\n      … still running (%s)", elapsed(start))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func elapsed(start time.Time) string {
	d := time.Since(start)
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// syncWriter serialises the writes of the events and the ticker.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (v *runHuman) Diagnostics(files map[string]*hcl.File, diags hcl.Diagnostics) {
	v.diagnostics(files).WriteDiagnostics(diags)
}

func (v *runHuman) Replanned(saved string) {
	fmt.Fprintf(v.out, "Planned again from the spec saved in %s on this host: the same plan.\n\n", saved)
}

func (v *runHuman) Plan(p *plan.Plan) error {
	return (&humanPlan{w: v.out, color: v.color}).render(p)
}

func (v *runHuman) RollbackPlan(p *apply.RollbackPlan) {
	w := v.out
	switch {
	case p.Continues != 0:
		fmt.Fprintf(w, "Finishing rollback generation %d, which did not finish.\n", p.Continues)
	case p.Finishing:
		fmt.Fprintf(w, "Generation %d did not finish; rollback finishes reverting it.\n", p.Generations[0])
	}
	fmt.Fprintf(w, "Rollback will undo generation %s, running %d inverses:\n", joinInts(p.Generations), len(p.Undo))
	for _, u := range p.Undo {
		fmt.Fprintf(w, "  %s\n", u)
	}
}

func (v *runHuman) Cancelled() error {
	what := titleKind[v.kind]
	if v.forward {
		what = "Roll forward"
	}
	fmt.Fprintf(v.errw, "%s cancelled: nothing was changed.\n", what)
	return &exitCodeError{code: exitError}
}

func (v *runHuman) Forward(to int, p *plan.Plan) error {
	v.forward = true
	fmt.Fprintf(v.out, "%s\n\n", forwardLine(to))
	return v.Plan(p)
}

func (v *runHuman) Forwarded(to int, res *apply.Result) error {
	v.stopStillRunning()
	w := v.out
	switch {
	case res.Generation != 0 && res.Status == apply.StatusApplied:
		fmt.Fprintf(w, "\nRolled forward to generation %d: %d operations done, %d skipped (generation %d).\n", to, len(res.Done), len(res.Skipped), res.Generation)
		if res.NeedsReboot {
			fmt.Fprintln(w, "A reboot is needed for the changes to take effect.")
		}
		fmt.Fprintf(w, "Log: %s\n", res.LogPath)
	case res.Generation != 0:
		reportApply(w, res, false)
	}
	if code := res.ExitCode(); code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// forwardLine says what a roll forward does.
func forwardLine(to int) string {
	return fmt.Sprintf("Rolling forward to generation %d: its plan, applied again; the host is as it was planned from.", to)
}

// titleKind is a kind of run at the start of a sentence.
var titleKind = map[apply.Kind]string{apply.KindApply: "Apply", apply.KindRollback: "Rollback"}

func (v *runHuman) Result(res *apply.Result, fromSpec bool) error {
	v.stopStillRunning()
	if v.kind == apply.KindRollback {
		reportRollback(v.out, res)
	} else {
		reportApply(v.out, res, fromSpec)
	}
	if code := res.ExitCode(); code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

func (v *runHuman) Attention(_ *apply.Result, err error) error {
	v.stopStillRunning()
	fmt.Fprintf(v.errw, "Error: %v\n%s\n", err, attentionFix[v.kind])
	return &exitCodeError{code: exitAttention}
}

// Failed returns err, which the command prints on stderr.
func (v *runHuman) Failed(err error) error {
	v.stopStillRunning()
	return err
}

// reportApply says how an apply ended.
func reportApply(w io.Writer, res *apply.Result, fromSpec bool) {
	if res.Generation == 0 {
		fmt.Fprintln(w, "No changes. The host already matches the spec.")
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

// reportRollback says how a rollback ended.
func reportRollback(w io.Writer, res *apply.Result) {
	if res.Generation == 0 {
		fmt.Fprintln(w, "Nothing to roll back.")
		return
	}
	fmt.Fprintln(w)
	if res.Status == apply.StatusDone {
		fmt.Fprintf(w, "Rollback complete: %d inverses run (generation %d).\n", len(res.Reverted), res.Generation)
		if res.NeedsReboot {
			fmt.Fprintln(w, "A reboot is needed for the restored driver or kernel configuration to take effect.")
		}
	} else {
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

func joinInts(ids []int) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(id)
	}
	return s
}

// runJSON is the event stream (stream.go): the engine's events as JSON
// Lines, between the plan and the summary, in the stream's format 1.1.
type runJSON struct {
	kind    apply.Kind
	st      *eventStream
	forward bool // rollback --to rolls forward: an apply's plan again
}

var _ runView = (*runJSON)(nil)

// Wants: the stream carries every line the package managers print and
// their progress.
func (v *runJSON) Wants() apply.Wants { return apply.Wants{Output: true, Progress: true} }

// Event prints the events of the stream's format: an executor's note is
// a message there, as the text between operations is; that an
// operation's command now runs, and the package check after a revert
// (its revert_end says it failed, and why), are the text's alone.
func (v *runJSON) Event(e apply.RunEvent) {
	switch e.Type {
	case apply.RunNote:
		e.Type = apply.RunMessage
	case apply.RunMessage, apply.RunOperationStart, apply.RunOperationEnd, apply.RunOutput,
		apply.RunProgress, apply.RunRevertStart, apply.RunRevertEnd:
	default:
		return
	}
	v.st.run(e)
}

func (v *runJSON) Diagnostics(_ map[string]*hcl.File, diags hcl.Diagnostics) {
	v.st.diagnostics(diags)
}

func (v *runJSON) Replanned(saved string) {
	v.st.write(map[string]any{"type": "message", "line": "Planned again from the spec saved in " + saved + " on this host: the same plan."})
}

func (v *runJSON) Plan(p *plan.Plan) error {
	v.st.plan(p)
	return nil
}

func (v *runJSON) RollbackPlan(p *apply.RollbackPlan) {
	v.st.write(map[string]any{"type": "rollback_plan", "rollback": p})
}

// Cancelled is an error that Failed makes a diagnostic of.
func (v *runJSON) Cancelled() error {
	if v.forward {
		return errors.New("roll forward cancelled: nothing was changed")
	}
	return fmt.Errorf("%s cancelled: nothing was changed", v.kind)
}

func (v *runJSON) Forward(to int, p *plan.Plan) error {
	v.forward = true
	v.st.write(map[string]any{"type": "message", "line": forwardLine(to)})
	v.st.plan(p)
	return nil
}

func (v *runJSON) Forwarded(_ int, res *apply.Result) error {
	return v.st.end(res, res.ExitCode())
}

func (v *runJSON) Result(res *apply.Result, _ bool) error {
	return v.st.end(res, res.ExitCode())
}

func (v *runJSON) Attention(res *apply.Result, err error) error {
	v.st.diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error(), Detail: attentionFix[v.kind]}})
	return v.st.end(res, exitAttention)
}

func (v *runJSON) Failed(err error) error {
	return v.st.fail(v.kind, err)
}
