package packages

import (
	"bytes"
	"fmt"
	"path"
	"runtime/debug"
	"strings"
	"unsafe"

	"pault.ag/go/debian/control"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// maxProblems bounds the warnings one database file yields: a file that is
// garbage throughout says so in a few lines, not in thousands.
const maxProblems = 10

// dpkg's vocabulary for the three words of a Status field (dpkg-query(1)).
var (
	wants  = map[string]bool{"unknown": true, "install": true, "hold": true, "deinstall": true, "purge": true}
	eflags = map[string]bool{"ok": true, "reinstreq": true}
	states = map[string]bool{
		"not-installed": true, "config-files": true, "half-installed": true, "unpacked": true,
		"half-configured": true, "triggers-awaited": true, "triggers-pending": true, "installed": true,
	}
)

func observeDpkg(h *host.Host) (facts.Packages, []facts.Warning) {
	out := facts.Packages{Manager: ManagerDpkg, Packages: []facts.Package{}}
	var warns []facts.Warning

	// dpkg applies its journal over the status file when it next runs, so
	// an entry there replaces the status file's paragraph for the same
	// package. The directory is empty except after an interrupted run.
	updates := make(map[string]facts.Package)
	var updated []string // keys in journal order, for a stable result
	updatesTotal := 0
	if entries, err := h.ReadDir(UpdatesDir); err == nil {
		for _, e := range entries {
			if !isJournalName(e.Name()) {
				continue
			}
			p := path.Join(UpdatesDir, e.Name())
			data, err := h.ReadFile(p)
			if err != nil {
				warns = append(warns, facts.Warning{Path: p, Message: fmt.Sprintf("reading dpkg's journal: %v", err)})
				continue
			}
			out.Interrupted = true
			db := parseStatus(data, nil, true)
			warns = append(warns, db.warnings(p)...)
			for _, pkg := range db.packages {
				k := key(pkg.Name, pkg.Architecture)
				if _, seen := updates[k]; !seen {
					updated = append(updated, k)
				}
				updates[k] = pkg
			}
		}
	}

	var replaced map[string]bool
	if len(updates) > 0 {
		replaced = make(map[string]bool, len(updates))
		for k := range updates {
			replaced[k] = true
		}
	}
	db, err := parseStatusFile(h, StatusPath, replaced)
	if err != nil {
		warns = append(warns, facts.Warning{Path: StatusPath, Message: fmt.Sprintf("reading the dpkg database: %v", err)})
		return out, warns
	}
	warns = append(warns, db.warnings(StatusPath)...)
	out.Total = db.total
	out.Packages = append(out.Packages, db.packages...)
	for _, k := range updated {
		pkg := updates[k]
		if pkg.State == "not-installed" {
			continue
		}
		updatesTotal++
		if Relevant(pkg.Name) {
			out.Packages = append(out.Packages, pkg)
		}
	}
	out.Total += updatesTotal
	sortPackages(out.Packages)
	return out, warns
}

// parseStatusFile parses the status database at p. The file is mapped
// rather than read (host.MapFile says why); nothing parseStatus returns
// points into it. Should the file shrink while it is mapped, reading the
// lost pages faults: that is caught, and the file read instead.
func parseStatusFile(h *host.Host, p string, replaced map[string]bool) (db statusDB, err error) {
	data, release, err := h.MapFile(p)
	if err != nil {
		return statusDB{}, err
	}
	faulted := func() (faulted bool) {
		defer release()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if r := recover(); r != nil {
				if !faultIn(r, data) {
					panic(r)
				}
				faulted = true
			}
		}()
		db = parseStatus(data, replaced, false)
		return false
	}()
	if !faulted {
		return db, nil
	}
	data, err = h.ReadFile(p)
	if err != nil {
		return statusDB{}, err
	}
	return parseStatus(data, replaced, false), nil
}

// faultIn reports whether r, a recovered panic, is a memory fault inside
// data.
func faultIn(r any, data []byte) bool {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok || len(data) == 0 {
		return false
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	return f.Addr() >= start && f.Addr() < start+uintptr(len(data))
}

// isJournalName reports whether name is one of dpkg's journal entries,
// which are all digits; dpkg writes "tmp.i" first and renames it, and
// ignores anything else.
func isJournalName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return false
		}
	}
	return true
}

func key(name, arch string) string { return name + ":" + arch }

// statusDB is what one status-format file holds.
type statusDB struct {
	// total counts the paragraphs for packages that are not
	// "not-installed".
	total    int
	packages []facts.Package
	problems []string
	// every keeps "not-installed" packages, for dpkg's journal.
	every bool
}

func (db statusDB) warnings(file string) []facts.Warning {
	var ws []facts.Warning
	for i, p := range db.problems {
		if i == maxProblems {
			ws = append(ws, facts.Warning{Path: file, Message: fmt.Sprintf("and %d more problems", len(db.problems)-maxProblems)})
			break
		}
		ws = append(ws, facts.Warning{Path: file, Message: p})
	}
	return ws
}

// parseStatus reads a file in dpkg's status format. Paragraphs for
// packages that are not relevant are only counted: their name and status
// are found with two byte searches and nothing is allocated for them.
// Relevant paragraphs (all of them when every is set, as for the journal,
// whose entries may concern any package) are parsed fully with the
// control-file parser. replaced names packages ("name:arch") whose
// paragraph is superseded and must be neither counted nor reported.
func parseStatus(data []byte, replaced map[string]bool, every bool) statusDB {
	db := statusDB{every: every}
	var batch []byte
	batched := 0
	if len(data) > 0 && data[len(data)-1] != '\n' {
		db.problems = append(db.problems, "the file does not end with a newline: it was truncated, or is being written")
	}
	n := 0
	for len(data) > 0 {
		// Blank lines between paragraphs, any number of them.
		for len(data) > 0 && (data[0] == '\n' || data[0] == '\r') {
			data = data[1:]
		}
		if len(data) == 0 {
			break
		}
		end := nextParagraph(data)
		para := data[:end]
		data = data[end:]
		n++
		name := field(para, "Package")
		if len(name) == 0 {
			db.problems = append(db.problems, fmt.Sprintf("paragraph %d has no Package field", n))
			continue
		}
		status := field(para, "Status")
		if replaced != nil && replaced[key(string(name), string(field(para, "Architecture")))] {
			continue
		}
		if !every && !relevantBytes(name) {
			switch {
			case len(status) == 0:
				db.problems = append(db.problems, fmt.Sprintf("package %s has no Status field", name))
				db.total++
			case !bytes.HasSuffix(status, []byte(" not-installed")):
				db.total++
			}
			continue
		}
		// The chunk runs to the next package's paragraph; a blank line
		// inside it (a corrupt file) ends this paragraph there, and what
		// follows has no Package field.
		para = bytes.TrimRight(para, "\n")
		if i := bytes.Index(para, []byte("\n\n")); i >= 0 {
			db.problems = append(db.problems, fmt.Sprintf("package %s: a blank line inside its paragraph leaves lines without a Package field", name))
			para = para[:i]
		}
		if !wellFormed(para) {
			// The parser's own error names what is wrong.
			db.add(parseParagraph(para))
			continue
		}
		batch = append(batch, para...)
		batch = append(batch, "\n\n"...)
		batched++
	}
	if batched == 0 {
		return db
	}
	// The relevant paragraphs go through one reader: a reader per
	// paragraph would allocate its buffer fifty times over.
	r, err := control.NewParagraphReader(bytes.NewReader(batch), nil)
	if err != nil {
		db.problems = append(db.problems, err.Error())
		return db
	}
	for range batched {
		p, err := r.Next()
		if err != nil {
			db.problems = append(db.problems, err.Error())
			break
		}
		db.add(toPackage(p))
	}
	return db
}

// add records one parsed paragraph.
func (db *statusDB) add(pkg facts.Package, ok bool, problem string) {
	if problem != "" {
		db.problems = append(db.problems, problem)
	}
	if !ok {
		return
	}
	if pkg.State != "not-installed" {
		db.total++
	}
	if pkg.State != "not-installed" || db.every {
		db.packages = append(db.packages, pkg)
	}
}

// wellFormed reports whether every line of para is a field or a
// continuation, so that the control-file parser reads it as exactly one
// paragraph and cannot fail on it.
func wellFormed(para []byte) bool {
	for len(para) > 0 {
		line := para
		if i := bytes.IndexByte(para, '\n'); i >= 0 {
			line, para = para[:i], para[i+1:]
		} else {
			para = nil
		}
		switch {
		case len(line) == 0, line[0] == '\r', line[0] == '#', line[0] == '-':
			return false
		case line[0] == ' ' || line[0] == '\t':
		case bytes.IndexByte(line, ':') < 0:
			return false
		}
	}
	return true
}

// nextParagraph returns where the paragraph at the start of data ends: at
// the start of the next paragraph that has a Package field at the start of
// a line, or at the end of data. dpkg writes Package first, so the search
// is for that field name: a few candidates a paragraph, where searching
// for the blank line itself stops at every line's end and costs several
// times more over a whole database. A Package field further down its
// paragraph is still found, by looking back for the blank line before it;
// only lines with no Package field at all join the paragraph before them,
// which parseStatus notices for the packages it reports.
func nextParagraph(data []byte) int {
	off := 1
	for off < len(data) {
		i := bytes.Index(data[off:], []byte("Package:"))
		if i < 0 {
			break
		}
		i += off
		off = i + 1
		if data[i-1] != '\n' {
			continue // inside a line
		}
		if i >= 2 && data[i-2] == '\n' {
			return i
		}
		// A Package line inside a paragraph: a paragraph that does not
		// begin with it, or a repeated field.
		if j := bytes.LastIndex(data[:i], []byte("\n\n")); j >= 0 {
			return j + 2
		}
	}
	return len(data)
}

// field returns the value of a single-line field of a paragraph, or nil.
func field(para []byte, name string) []byte {
	var start int
	switch {
	case len(para) > len(name) && string(para[:len(name)]) == name && para[len(name)] == ':':
		start = len(name) + 1
	default:
		i := indexField(para, name)
		if i < 0 {
			return nil
		}
		start = i + 1 + len(name) + 1
	}
	v := para[start:]
	if j := bytes.IndexByte(v, '\n'); j >= 0 {
		v = v[:j]
	}
	return bytes.TrimSpace(v)
}

// indexField finds "\n<name>:" in para without building the needle.
func indexField(para []byte, name string) int {
	off := 0
	for {
		i := bytes.Index(para[off:], []byte(name))
		if i < 0 {
			return -1
		}
		i += off
		if i > 0 && para[i-1] == '\n' && i+len(name) < len(para) && para[i+len(name)] == ':' {
			return i - 1
		}
		off = i + 1
	}
}

// parseParagraph turns one status paragraph into a Package. ok is false
// when the paragraph cannot stand for a package at all; problem, when not
// empty, says what is wrong with it either way.
func parseParagraph(para []byte) (pkg facts.Package, ok bool, problem string) {
	r, err := control.NewParagraphReader(bytes.NewReader(para), nil)
	if err != nil {
		return pkg, false, fmt.Sprintf("package %s: %v", field(para, "Package"), err)
	}
	p, err := r.Next()
	if err != nil {
		return pkg, false, fmt.Sprintf("package %s: %v", field(para, "Package"), err)
	}
	return toPackage(p)
}

// toPackage reads a parsed status paragraph.
func toPackage(p *control.Paragraph) (pkg facts.Package, ok bool, problem string) {
	// dpkg refuses a paragraph that repeats a field; the cheap scan and
	// the parser would also disagree on which value counts.
	seen := make(map[string]bool, len(p.Order))
	for _, k := range p.Order {
		if seen[k] {
			return pkg, false, fmt.Sprintf("package %s: duplicate %s field", p.Values["Package"], k)
		}
		seen[k] = true
	}
	v := p.Values
	pkg.Name = v["Package"]
	if pkg.Name == "" {
		return pkg, false, "a paragraph has an empty Package field"
	}
	pkg.Architecture = v["Architecture"]
	pkg.Version = v["Version"]
	if pkg.Version == "" {
		// Removed packages whose configuration files remain keep only the
		// version those files came from.
		pkg.Version = v["Config-Version"]
	}
	if src, _, _ := strings.Cut(v["Source"], " "); src != "" {
		// "Source: nvidia-graphics-drivers (535.261.03-1)" names the
		// source's version only when it differs from the binary's.
		pkg.Source = src
	}
	words := strings.Fields(v["Status"])
	if len(words) != 3 || !wants[words[0]] || !eflags[words[1]] || !states[words[2]] {
		return pkg, false, fmt.Sprintf("package %s: unrecognised Status %q", pkg.Name, v["Status"])
	}
	pkg.Want, pkg.State = words[0], words[2]
	pkg.Hold = words[0] == "hold"
	pkg.ReinstallRequired = words[1] == "reinstreq"
	if pkg.Version == "" && pkg.State != "not-installed" {
		return pkg, true, fmt.Sprintf("package %s (%s) has no Version field", pkg.Name, pkg.State)
	}
	return pkg, true, ""
}
