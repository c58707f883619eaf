package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/spec"
)

// factsView shows plan --facts: the spec's diagnostics, each host as it
// is planned, and the summary. Every method returns the first write error.
type factsView interface {
	// Start shows the spec's diagnostics before any host; specPath is the
	// spec as named, s nil when it did not load.
	Start(specPath string, files map[string]*hcl.File, s *spec.Spec, diags hcl.Diagnostics) error
	// Host shows one host's row, in input order.
	Host(h *fleet.Host) error
	// Summary shows what the rows come to, after the last.
	Summary(sum *fleet.Summary) error
}

func newFactsView(g *globalOptions) factsView {
	if g.JSON {
		return &factsJSON{w: g.Stdout}
	}
	return &factsHuman{w: g.Stdout, diagnostics: g.diagnosticWriter}
}

// factsJSON streams one JSON document: its head, then each host's row on
// a line of its own as the row is ready, then the summary. A fleet's rows
// are never held in memory to be written at once.
type factsJSON struct {
	w     io.Writer
	hosts int
}

var _ factsView = (*factsJSON)(nil)

func (v *factsJSON) Start(_ string, _ map[string]*hcl.File, s *spec.Spec, diags hcl.Diagnostics) error {
	head := struct {
		FormatVersion string                `json:"format_version"`
		Errored       bool                  `json:"errored"`
		SpecDigest    string                `json:"spec_digest,omitempty"`
		Diagnostics   []spec.JSONDiagnostic `json:"diagnostics"`
	}{fleet.FormatVersion, diags.HasErrors(), planner.SpecDigest(s), spec.DiagnosticsJSON(diags)}
	data, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// The head is an object left open for the rows and the summary.
	if _, err := fmt.Fprintf(v.w, "%s,\n\"hosts\": [", data[:len(data)-1]); err != nil {
		return err
	}
	if diags.HasErrors() {
		_, err = io.WriteString(v.w, "],\n\"summary\": null}\n")
	}
	return err
}

func (v *factsJSON) Host(h *fleet.Host) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sep := ",\n"
	if v.hosts == 0 {
		sep = "\n"
	}
	v.hosts++
	_, err = fmt.Fprintf(v.w, "%s%s", sep, data)
	return err
}

func (v *factsJSON) Summary(sum *fleet.Summary) error {
	data, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(v.w, "\n],\n\"summary\": %s}\n", data)
	return err
}

// factsHuman writes the summary for a person: a table of outcomes, then
// the groups that explain them, each naming its first hosts. The rows of
// --json name every host.
type factsHuman struct {
	w           io.Writer
	diagnostics func(files map[string]*hcl.File) hcl.DiagnosticWriter
	spec        string
}

var _ factsView = (*factsHuman)(nil)

func (v *factsHuman) Start(specPath string, files map[string]*hcl.File, _ *spec.Spec, diags hcl.Diagnostics) error {
	v.spec = specPath
	if len(diags) == 0 {
		return nil
	}
	return v.diagnostics(files).WriteDiagnostics(diags)
}

// Host shows nothing: a fleet's hosts are too many to list for a person.
func (v *factsHuman) Host(*fleet.Host) error { return nil }

func (v *factsHuman) Summary(sum *fleet.Summary) error {
	sw := &stickyWriter{w: v.w}
	fmt.Fprintf(sw, "Planned %s against %s:\n\n", esc(v.spec), countOf(sum.Hosts, "saved observation", "saved observations"))
	for _, row := range []struct {
		what string
		n    int
	}{
		{"unchanged", sum.Unchanged},
		{"to change, no reboot", sum.Change},
		{"to change, needing a reboot", sum.Reboot},
		{"refused", sum.Refused},
	} {
		fmt.Fprintf(sw, "  %-28s %6d\n", row.what, row.n)
	}
	v.groups(sw, "Changes, by step", sum.Changes)
	v.groups(sw, "Reboots, by the step that needs one", sum.Reboots)
	v.groups(sw, "Refused, by reason", sum.Refusals)
	v.groups(sw, "Warnings of the plans", sum.Warnings)
	v.groups(sw, "Observations older than this gpuenv, by the fact they lack", sum.Lacking)
	if sum.Refused > 0 {
		fmt.Fprintln(sw, "\nA refused host gets no plan: the rollout would fail there. --json gives each host's reason.")
	}
	return sw.err
}

// groups prints one list of groups with its title, nothing when empty.
func (v *factsHuman) groups(w io.Writer, title string, gs []fleet.Group) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	// Keys and names are the documents' (hostnames, warnings), escaped
	// before they are measured.
	width := 0
	for _, g := range gs {
		width = max(width, len(esc(g.Key)))
	}
	for _, g := range gs {
		first := make([]string, len(g.First))
		for i, n := range g.First {
			first[i] = esc(n)
		}
		names := strings.Join(first, ", ")
		if more := g.Hosts - len(g.First); more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		fmt.Fprintf(w, "  %-*s %6d  %s\n", width, esc(g.Key), g.Hosts, names)
		if g.Error != "" {
			wrap(w, "      ", g.Error)
		}
	}
}

// countOf writes n with the noun that agrees with it.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
