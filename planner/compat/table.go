package compat

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/spec/version"
)

//go:embed data/*.tsv
var dataFS embed.FS

// ErrUnknown is wrapped by lookups whose subject has no row in the tables.
var ErrUnknown = errors.New("not in the compatibility tables")

// Ref is one citation a row rests on.
type Ref struct {
	ID       string // short id, as the data files name it
	Citation string // where the fact was read
}

// Source tells where a row's facts come from, so that an inference can be
// reported as "from <table> row <key> (<refs>)".
type Source struct {
	Table string // data file name without ".tsv", e.g. "cuda_releases"
	Key   string // the row's key in that table, e.g. "12.4.1"
	Line  int    // line in the data file, for maintainers
	Refs  []Ref
	// Unverified names the fields of the row that were written from memory
	// and not confirmed in a source; empty when the whole row is sourced.
	Unverified string
}

// Verified reports whether every field of the row is backed by a source.
func (s Source) Verified() bool { return s.Unverified == "" }

// String returns "<table> row <key> (<ref ids>)", with the unverified
// fields named when there are any.
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(s.Table)
	b.WriteString(" row ")
	b.WriteString(s.Key)
	b.WriteString(" (")
	for i, r := range s.Refs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.ID)
	}
	if s.Unverified != "" {
		b.WriteString("; unverified: ")
		b.WriteString(s.Unverified)
	}
	b.WriteString(")")
	return b.String()
}

// Cited is String without the marks of unverified fields:
// "<table> row <key> (<ref ids>)". A plan cites rows this way on each
// line and lists the unverified ones once (UnverifiedText).
func (s Source) Cited() string {
	var ids []string
	for _, r := range s.Refs {
		if r.ID != idUnverified {
			ids = append(ids, r.ID)
		}
	}
	out := s.Table + " row " + s.Key
	if len(ids) > 0 {
		out += " (" + strings.Join(ids, ", ") + ")"
	}
	return out
}

// UnverifiedText names the row and its unverified fields,
// "torch_releases row 2.1: default_variant"; "" when the row is verified.
func (s Source) UnverifiedText() string {
	if s.Unverified == "" {
		return ""
	}
	return s.Table + " row " + s.Key + ": " + s.Unverified
}

// Citations returns the full citations, one per reference.
func (s Source) Citations() []string {
	out := make([]string, len(s.Refs))
	for i, r := range s.Refs {
		out[i] = r.ID + ": " + r.Citation
	}
	return out
}

// idUnverified is the source id that marks facts written from memory.
const idUnverified = "unverified"

// record is one data row: its cells by column, and where it was read.
type record struct {
	file  string
	line  int
	cols  map[string]int
	cells []string
}

func (r record) get(col string) string {
	i, ok := r.cols[col]
	if !ok {
		// Column names are fixed by the loaders and checked against the
		// header before any row is read, so this is a loader bug.
		panic(fmt.Sprintf("compat: %s has no column %q", r.file, col))
	}
	if i >= len(r.cells) {
		return ""
	}
	return r.cells[i]
}

// decoder reads typed cells out of records and keeps the first error, with
// its file, line and column, so loaders read rows without checking each
// cell.
type decoder struct {
	err error
	// refs caches resolved source lists: most rows of a table cite the
	// same few, and sharing the slices keeps loading cheap.
	refs map[string][]Ref
	// lists caches parsed version lists by cell text for the same reason:
	// PyTorch's capability lists repeat from row to row.
	lists map[string][]version.Version
	// single caches parsed single versions by cell text.
	single map[string]version.Version
}

func (d *decoder) fail(r record, col, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%s:%d: column %s: %s", r.file, r.line, col, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) str(r record, col string) string { return r.get(col) }

func (d *decoder) required(r record, col string) string {
	s := r.get(col)
	if s == "" {
		d.fail(r, col, "is empty")
	}
	return s
}

// version reads an optional version: an empty cell gives the zero Version.
// Parsed versions are kept by text: the GPU table repeats a handful of
// compute capabilities over hundreds of rows.
func (d *decoder) version(r record, col string) version.Version {
	s := r.get(col)
	if v, ok := d.single[s]; ok {
		return v
	}
	v := optional(d, r, col, version.Parse)
	if d.single == nil {
		d.single = map[string]version.Version{}
	}
	d.single[s] = v
	return v
}

func (d *decoder) requiredVersion(r record, col string) version.Version {
	if r.get(col) == "" {
		d.fail(r, col, "is empty")
		return version.Version{}
	}
	return d.version(r, col)
}

// versions reads a comma-separated list of versions.
func (d *decoder) versions(r record, col string) []version.Version {
	s := r.get(col)
	if s == "" {
		return nil
	}
	if out, ok := d.lists[s]; ok {
		return out
	}
	out := make([]version.Version, 0, strings.Count(s, ",")+1)
	for f := range strings.SplitSeq(s, ",") {
		v, err := version.Parse(strings.TrimSpace(f))
		if err != nil {
			d.fail(r, col, "%v", err)
			return nil
		}
		out = append(out, v)
	}
	if d.lists == nil {
		d.lists = map[string][]version.Version{}
	}
	d.lists[s] = out
	return out
}

func (d *decoder) uint(r record, col string) uint64 {
	s := r.get(col)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		d.fail(r, col, "%q is not a whole number", s)
	}
	return n
}

// yesNo reads "yes" or "no"; an empty cell is no.
func (d *decoder) yesNo(r record, col string) bool {
	switch s := r.get(col); s {
	case "yes":
		return true
	case "no", "":
		return false
	default:
		d.fail(r, col, "%q is neither yes nor no", s)
		return false
	}
}

func (d *decoder) oneOf(r record, col string, allowed ...string) string {
	s := r.get(col)
	if !slices.Contains(allowed, s) {
		d.fail(r, col, "%q is not one of %q", s, allowed)
	}
	return s
}

// constraint reads an optional constraint: an empty cell gives the zero
// Constraint, which admits every version.
func (d *decoder) constraint(r record, col string) version.Constraint {
	return optional(d, r, col, version.ParseConstraint)
}

// optional reads a cell with parse; an empty cell gives T's zero value.
func optional[T any](d *decoder, r record, col string, parse func(string) (T, error)) T {
	var v T
	s := r.get(col)
	if s == "" {
		return v
	}
	v, err := parse(s)
	if err != nil {
		d.fail(r, col, "%v", err)
	}
	return v
}

// source reads the row's source and unverified columns and resolves the
// source ids against sources.tsv. The two columns must agree: a row that
// names unverified fields cites the id "unverified", and only such a row
// does.
func (d *decoder) source(r record, table, key string, refs map[string]Ref) Source {
	s := Source{Table: table, Key: key, Line: r.line, Unverified: r.get("unverified")}
	ids := r.get("source")
	if ids == "" {
		d.fail(r, "source", "is empty: every row names its source")
		return s
	}
	if cached, ok := d.refs[ids]; ok {
		s.Refs = cached
		d.checkMarked(r, s)
		return s
	}
	for id := range strings.SplitSeq(ids, ",") {
		id = strings.TrimSpace(id)
		ref, ok := refs[id]
		if !ok {
			d.fail(r, "source", "unknown source id %q (see sources.tsv)", id)
			continue
		}
		s.Refs = append(s.Refs, ref)
	}
	if d.refs == nil {
		d.refs = map[string][]Ref{}
	}
	d.refs[ids] = s.Refs
	d.checkMarked(r, s)
	return s
}

// checkMarked enforces that the unverified column and the "unverified"
// source id go together.
func (d *decoder) checkMarked(r record, s Source) {
	marked := slices.ContainsFunc(s.Refs, func(ref Ref) bool { return ref.ID == idUnverified })
	switch {
	case marked && s.Unverified == "":
		d.fail(r, "unverified", "is empty although the source cites %q; name the unverified fields", idUnverified)
	case !marked && s.Unverified != "":
		d.fail(r, "source", "does not cite %q although the unverified column is set", idUnverified)
	}
}

// readTable parses one tab-separated data file. Lines starting with "#"
// and blank lines are skipped; the first other line is the header, which
// must name exactly the columns given. Cells are trimmed of spaces, so
// columns may be padded; a row may leave out trailing empty cells but may
// not have more cells than the header.
func readTable(file string, columns ...string) ([]record, error) {
	data, err := dataFS.ReadFile("data/" + file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return parseTable(file, data, columns...)
}

// parseTable is readTable on data already read.
func parseTable(file string, data []byte, columns ...string) ([]record, error) {
	var (
		cols    map[string]int
		records []record
		ncols   int
	)
	lines := strings.Split(string(data), "\n")
	records = make([]record, 0, len(lines))
	for lineNo, line := range lines {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cells := strings.Split(line, "\t")
		for i, c := range cells {
			cells[i] = strings.TrimSpace(c)
		}
		if cols == nil {
			if err := checkHeader(file, lineNo+1, cells, columns); err != nil {
				return nil, err
			}
			cols = make(map[string]int, len(cells))
			for i, c := range cells {
				cols[c] = i
			}
			ncols = len(cells)
			continue
		}
		if len(cells) > ncols {
			return nil, fmt.Errorf("%s:%d: %d cells, but the header has %d columns", file, lineNo+1, len(cells), ncols)
		}
		records = append(records, record{file: file, line: lineNo + 1, cols: cols, cells: cells})
	}
	if cols == nil {
		return nil, fmt.Errorf("%s: no header line", file)
	}
	return records, nil
}

func checkHeader(file string, line int, got, want []string) error {
	seen := make(map[string]bool, len(got))
	for _, c := range got {
		if seen[c] {
			return fmt.Errorf("%s:%d: column %q appears twice", file, line, c)
		}
		seen[c] = true
		if !slices.Contains(want, c) {
			return fmt.Errorf("%s:%d: unknown column %q (want %s)", file, line, c, strings.Join(want, ", "))
		}
	}
	for _, c := range want {
		if !seen[c] {
			return fmt.Errorf("%s:%d: missing column %q", file, line, c)
		}
	}
	return nil
}

// loaded wraps a table loader so it runs once, on first use: the planner
// pays only for the tables a plan touches.
func loaded[T any](load func() (T, error)) func() (T, error) {
	return sync.OnceValues(load)
}

// must returns a loaded table. The data files are embedded and every row
// is checked by the package's tests (and by Check), so a failure here is a
// broken build, reported like regexp.MustCompile does.
func must[T any](t T, err error) T {
	if err != nil {
		panic("compat: " + err.Error())
	}
	return t
}

var sourcesTable = loaded(loadSources)

func loadSources() (map[string]Ref, error) {
	recs, err := readTable("sources.tsv", "id", "citation")
	if err != nil {
		return nil, err
	}
	var d decoder
	refs := make(map[string]Ref, len(recs))
	for _, r := range recs {
		id := d.required(r, "id")
		if _, dup := refs[id]; dup {
			d.fail(r, "id", "duplicate id %q", id)
		}
		refs[id] = Ref{ID: id, Citation: d.required(r, "citation")}
	}
	if _, ok := refs[idUnverified]; !ok {
		d.fail(record{file: "sources.tsv"}, "id", "the id %q is missing", idUnverified)
	}
	return refs, d.err
}

// Sources returns every citation the tables use, by id.
func Sources() map[string]Ref {
	refs := must(sourcesTable())
	out := make(map[string]Ref, len(refs))
	for k, v := range refs {
		out[k] = v
	}
	return out
}

// Check loads every table and returns every error found. The package's
// tests call it; a program may call it to fail early rather than on the
// first query.
func Check() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	_, err := sourcesTable()
	add(err)
	_, err = cudaFamiliesTable()
	add(err)
	_, err = cudaReleasesTable()
	add(err)
	_, err = branchesTable()
	add(err)
	_, err = toolkitTable()
	add(err)
	_, err = archTable()
	add(err)
	_, err = chipTable()
	add(err)
	_, err = cudaArchTable()
	add(err)
	_, err = gpuTable()
	add(err)
	_, err = torchTable()
	add(err)
	_, err = tensorflowTable()
	add(err)
	_, err = jaxTable()
	add(err)
	_, err = cudnnTable()
	add(err)
	_, err = packagesTable()
	add(err)
	_, err = distroTable()
	add(err)
	_, err = frameworkLibrariesTable()
	add(err)
	return errors.Join(errs...)
}

// nparts counts v's release parts without copying them.
func nparts(v version.Version) int {
	if v.IsZero() {
		return 0
	}
	return strings.Count(v.Trunc(math.MaxInt).String(), ".") + 1
}

// mm returns v's major.minor for comparisons that ignore later parts.
func mm(v version.Version) version.Version { return v.Trunc(2) }
