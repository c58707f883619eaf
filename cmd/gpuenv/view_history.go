package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuenv/gpuenv/apply"
)

// historyView shows the generations gpuenv history reads. One is chosen
// from the flags when the command starts (newHistoryView). Every method
// returns the first write error.
type historyView interface {
	// Pruned says what --keep removed.
	Pruned(pr *apply.Pruned) error
	// Untrusted warns, on stderr in either format, that the state
	// directory is one others could have written: each of errs says why,
	// and when listed is true a last line says that the history listed
	// after it is not to be trusted.
	Untrusted(errs []error, listed bool) error
	// Generations lists gens, oldest first.
	Generations(gens []apply.Meta) error
}

// newHistoryView returns the view the flags ask for.
func newHistoryView(g *globalOptions) historyView {
	if g.JSON {
		return &historyJSON{historyWarnings: historyWarnings{g.Stderr}, g: g}
	}
	return &historyHuman{historyWarnings: historyWarnings{g.Stderr}, w: g.Stdout}
}

// historyWarnings writes the warnings both formats write the same way, on
// stderr.
type historyWarnings struct {
	stderr io.Writer
}

func (v historyWarnings) Untrusted(errs []error, listed bool) error {
	sw := &stickyWriter{w: v.stderr}
	for _, err := range errs {
		fmt.Fprintf(sw, "Warning: %v\n", err)
	}
	if listed && len(errs) > 0 {
		fmt.Fprintln(sw, "Warning: the history below comes from a state directory that others could have written; do not trust it, and fix the state directory before gpuenv rollback (which refuses it until then).")
	}
	return sw.err
}

// historyHuman writes the generations as a table on w.
type historyHuman struct {
	historyWarnings
	w io.Writer
}

var _ historyView = (*historyHuman)(nil)

func (v *historyHuman) Pruned(pr *apply.Pruned) error {
	_, err := fmt.Fprintf(v.w, "Removed the saved package files of %d generations (%d bytes).\n\n", len(pr.Generations), pr.Bytes)
	return err
}

func (v *historyHuman) Generations(gens []apply.Meta) error {
	if len(gens) == 0 {
		_, err := fmt.Fprintln(v.w, "No generations: nothing was applied on this root.")
		return err
	}
	sw := &stickyWriter{w: v.w}
	tw := tabwriter.NewWriter(sw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTARTED\tKIND\tSTATUS\tSPEC\tSUMMARY")
	for _, m := range gens {
		if m.Status == apply.StatusDamaged {
			// Nothing in it can be read but its number.
			fmt.Fprintf(tw, "%d\t-\t?\t%s\t-\t%s; gpuenv rollback stops here\n", m.ID, m.Status, m.Damaged)
			continue
		}
		status := string(m.Status)
		if m.UndoneBy != 0 {
			status += fmt.Sprintf(", undone by %d", m.UndoneBy)
		}
		if m.Pruned {
			status += ", pruned"
		}
		digest := m.SpecDigest
		if len(digest) > 19 {
			digest = digest[:19]
		}
		if digest == "" {
			digest = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Started.Local().Format("2006-01-02 15:04:05"), m.Kind, status, digest, m.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if id := currentGeneration(gens); id != 0 {
		fmt.Fprintf(sw, "\nThe host is as generation %d left it.\n", id)
	}
	return sw.err
}

// currentGeneration is the generation the host is at, as NixOS marks its
// current one: the newest that finished what it set out to do (an apply
// applied, a rollback done). A failed or unfinished one after it left
// the host where it was, or needs rollback, which history says by its
// status. 0 when none finished.
func currentGeneration(gens []apply.Meta) int {
	for i := len(gens) - 1; i >= 0; i-- {
		switch gens[i].Status {
		case apply.StatusApplied, apply.StatusDone:
			return gens[i].ID
		case apply.StatusRunning, apply.StatusFailed, apply.StatusDamaged:
			// Unfinished or damaged: the host is between states.
			return 0
		}
	}
	return 0
}

// historyJSON writes the generations as one JSON document on stdout.
type historyJSON struct {
	historyWarnings
	g *globalOptions
}

var _ historyView = (*historyJSON)(nil)

// Pruned writes nothing: the generations listed say which are pruned.
func (v *historyJSON) Pruned(*apply.Pruned) error { return nil }

func (v *historyJSON) Generations(gens []apply.Meta) error {
	if gens == nil {
		gens = []apply.Meta{}
	}
	return writeJSON(v.g, struct {
		FormatVersion string       `json:"format_version"`
		Generations   []apply.Meta `json:"generations"`
		// Current is the generation the host is at (0: none, or the
		// host between two).
		Current int `json:"current"`
	}{historyFormatVersion, gens, currentGeneration(gens)})
}
