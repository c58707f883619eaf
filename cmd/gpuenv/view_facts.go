package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
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
	// Close lets go of what the view held for the run.
	Close() error
}

func newFactsView(g *globalOptions, hosts bool) (factsView, error) {
	if g.JSON {
		v := &factsJSON{w: g.Stdout}
		if hosts {
			// The rows come after the groups, which are known only when
			// the last host is planned: they wait in a file, never in
			// memory, however many hosts there are.
			f, err := os.CreateTemp("", "gpuenv-facts-rows-*.json")
			if err != nil {
				return nil, fmt.Errorf("--hosts: a file to hold the rows until the groups are written: %w", err)
			}
			// Unlinked at once: nothing is left behind however the run
			// ends.
			os.Remove(f.Name())
			v.rows, v.buf = f, bufio.NewWriterSize(f, 1<<20)
		}
		return v, nil
	}
	return &factsHuman{w: g.Stdout, diagnostics: g.diagnosticWriter}, nil
}

// factsJSON writes one JSON document: its head, the groups, with --hosts
// each host's row on a line of its own, then the summary.
type factsJSON struct {
	w     io.Writer
	hosts int
	// rows holds the rows of --hosts until the groups are written.
	rows *os.File
	buf  *bufio.Writer
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
	// The head is an object left open for the groups, rows and summary.
	if _, err := fmt.Fprintf(v.w, "%s,\n\"groups\": [", data[:len(data)-1]); err != nil {
		return err
	}
	if diags.HasErrors() {
		_, err = io.WriteString(v.w, "],\n\"summary\": null}\n")
	}
	return err
}

func (v *factsJSON) Host(h *fleet.Host) error {
	if v.rows == nil {
		return nil
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sep := ",\n"
	if v.hosts == 0 {
		sep = "\n"
	}
	v.hosts++
	if _, err := v.buf.WriteString(sep); err != nil {
		return fmt.Errorf("--hosts: %w", err)
	}
	if _, err := v.buf.Write(data); err != nil {
		return fmt.Errorf("--hosts: %w", err)
	}
	return nil
}

func (v *factsJSON) Summary(sum *fleet.Summary) error {
	bw := bufio.NewWriter(v.w)
	for i, g := range sum.Plans {
		data, err := json.Marshal(g)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == 0 {
			sep = "\n"
		}
		bw.WriteString(sep)
		bw.Write(data)
	}
	bw.WriteString("\n]")
	if v.rows != nil {
		if err := v.buf.Flush(); err != nil {
			return fmt.Errorf("--hosts: %w", err)
		}
		if _, err := v.rows.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("--hosts: %w", err)
		}
		bw.WriteString(",\n\"hosts\": [")
		if _, err := io.Copy(bw, v.rows); err != nil {
			return err
		}
		bw.WriteString("\n]")
	}
	data, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(bw, ",\n\"summary\": %s}\n", data)
	return bw.Flush()
}

func (v *factsJSON) Close() error {
	if v.rows == nil {
		return nil
	}
	return v.rows.Close()
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

func (v *factsHuman) Close() error { return nil }

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
	v.plans(sw, sum.Plans)
	v.groups(sw, "Changes, by step", sum.Changes)
	v.groups(sw, "Reboots, by the step that needs one", sum.Reboots)
	v.groups(sw, "Refused, by reason", sum.Refusals)
	v.groups(sw, "Warnings of the plans", sum.Warnings)
	v.groups(sw, "Observations older than this gpuenv, by the fact they lack", sum.Lacking)
	if sum.Refused > 0 {
		fmt.Fprintln(sw, "\nA refused host gets no plan: the rollout would fail there. --json --hosts gives each host's reason.")
	}
	return sw.err
}

// plans prints the groups of hosts that plan alike: what each would do,
// once, and which hosts to try it on first.
func (v *factsHuman) plans(w io.Writer, gs []*fleet.PlanGroup) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nHosts that plan alike, in %s:\n", countOf(len(gs), "group", "groups"))
	canaries := 0
	for _, g := range gs {
		what := map[fleet.Outcome]string{fleet.Unchanged: "unchanged", fleet.Change: "to change, no reboot",
			fleet.Reboot: "to change, needing a reboot", fleet.Refused: "refused"}[g.Outcome]
		fmt.Fprintf(w, "\n  #%d  %s, %s\n", g.ID, countOf(g.Hosts, "host", "hosts"), what)
		for _, st := range g.Steps {
			reboot := ""
			if st.NeedsReboot {
				reboot = " (needs a reboot)"
			}
			fmt.Fprintf(w, "      %s %s%s\n", st.Action.Symbol(), esc(st.Address), reboot)
		}
		if g.Reason != "" {
			fmt.Fprintf(w, "      %s\n", esc(g.Reason))
			if g.Error != "" {
				wrap(w, "        ", g.Error)
			}
		}
		// A rule that warns twice in one plan (two groups naming one
		// unknown user) is said once here; --json keeps each.
		for i, warn := range g.Warnings {
			if !slices.Contains(g.Warnings[:i], warn) {
				fmt.Fprintf(w, "      warning: %s\n", esc(warn))
			}
		}
		if len(g.Lacks) > 0 {
			fmt.Fprintf(w, "      lacks: %s\n", esc(strings.Join(g.Lacks, ", ")))
		}
		fmt.Fprintf(w, "      hosts: %s\n", v.names(g.First, g.Hosts))
		if len(g.Canaries) > 0 {
			canaries += len(g.Canaries)
			fmt.Fprintf(w, "      try first: %s\n", v.names(g.Canaries, len(g.Canaries)))
		}
	}
	if canaries > 0 {
		fmt.Fprintf(w, "\n%s to try first cover every group above.\n", countOf(canaries, "host", "hosts"))
	}
}

// names lists some of n hosts' names, escaped.
func (v *factsHuman) names(some []string, n int) string {
	out := make([]string, len(some))
	for i, name := range some {
		out[i] = esc(name)
	}
	s := strings.Join(out, ", ")
	if more := n - len(some); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
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
		// A refusal's error is shown with its group of hosts above.
		fmt.Fprintf(w, "  %-*s %6d  %s\n", width, esc(g.Key), g.Hosts, names)
	}
}

// countOf writes n with the noun that agrees with it.
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
