package compat

import (
	"slices"

	"github.com/gpuenv/gpuenv/spec/version"
)

// ToolkitFact is one row of container_toolkit.tsv: a CDI hook, a CDI spec
// variable or mount, or a driver branch, with the oldest container toolkit
// that has, writes or supports it.
type ToolkitFact struct {
	// Kind is "hook", "env", "mount" or "driver".
	Kind string
	// Key is the hook's name, the variable's name, the mount's container
	// path, or the driver branch.
	Key        string
	ToolkitMin version.Version
	Notes      string
	Source     Source
}

var toolkitTable = loaded(loadToolkit)

func loadToolkit() ([]ToolkitFact, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("container_toolkit.tsv", "kind", "key", "toolkit_min", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]ToolkitFact, 0, len(recs))
	for _, r := range recs {
		f := ToolkitFact{
			Kind:       d.oneOf(r, "kind", "hook", "env", "mount", "driver"),
			Key:        d.required(r, "key"),
			ToolkitMin: d.requiredVersion(r, "toolkit_min"),
			Notes:      d.str(r, "notes"),
		}
		if f.Kind == "driver" {
			d.uint(r, "key")
		}
		f.Source = d.source(r, "container_toolkit", f.Kind+" "+f.Key, refs)
		if n := len(rows); n > 0 && (rows[n-1].Kind > f.Kind || rows[n-1].Kind == f.Kind && rows[n-1].Key >= f.Key) {
			d.fail(r, "key", "rows must be sorted by kind, then key, without duplicates")
		}
		rows = append(rows, f)
	}
	return rows, d.err
}

// ToolkitFacts returns every row of the container toolkit table.
func ToolkitFacts() []ToolkitFact {
	return slices.Clone(must(toolkitTable()))
}

// ToolkitHooks lists the CDI hooks toolkit release v has, by name.
func ToolkitHooks(v version.Version) []string {
	var out []string
	for _, f := range must(toolkitTable()) {
		if f.Kind == "hook" && v.Compare(f.ToolkitMin) >= 0 {
			out = append(out, f.Key)
		}
	}
	return out
}

// ToolkitWrites reports whether the CDI specs of toolkit release v have
// the item key of kind "env" (a variable's name) or "mount" (a container
// path): whether a spec for that toolkit should have it too.
func ToolkitWrites(kind, key string, v version.Version) bool {
	for _, f := range must(toolkitTable()) {
		if f.Kind == kind && f.Key == key {
			return v.Compare(f.ToolkitMin) >= 0
		}
	}
	return false
}

// ToolkitForDriver is the oldest toolkit that supports driver branch
// branch, and the row that says so; ok is false when no row constrains
// the branch.
func ToolkitForDriver(branch uint64) (ToolkitFact, bool) {
	var best ToolkitFact
	found := false
	for _, f := range must(toolkitTable()) {
		if f.Kind != "driver" {
			continue
		}
		b, err := version.Parse(f.Key)
		if err != nil || b.Major() > branch {
			continue
		}
		if !found || f.ToolkitMin.Compare(best.ToolkitMin) > 0 {
			best, found = f, true
		}
	}
	return best, found
}
