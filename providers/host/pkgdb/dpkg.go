package pkgdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

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
	states = map[facts.PackageState]bool{
		facts.StateNotInstalled: true, facts.StateConfigFiles: true, facts.StateHalfInstalled: true, facts.StateUnpacked: true,
		facts.StateHalfConfigured: true, facts.StateTriggersAwaited: true, facts.StateTriggersPending: true, facts.StateInstalled: true,
	}
)

// Dpkg is dpkg's database as dpkg itself sees it when it next runs: the
// status file with dpkg's journal folded in.
type Dpkg struct {
	// Packages are the packages read; which ones, and in what order, is
	// for ReadDpkg and ReadDpkgAll to say.
	Packages []facts.Package
	// Total counts every package the database holds that is not
	// "not-installed".
	Total int
	// Interrupted is set when the journal holds entries: dpkg was stopped
	// before it folded them into the status file.
	Interrupted bool
	// Warnings name the file of each problem: a file that could not be
	// read, a paragraph that could not be parsed.
	Warnings []facts.Warning
	// Err is set when a file could not be read at all (ReadDpkgAll: a
	// missing status file is an empty database, not an error).
	Err error
}

// ReadDpkg reads the GPU-relevant part of dpkg's database (see Relevant),
// for observation: it lists the relevant packages that are not
// "not-installed", sorted by name and architecture, and counts the rest
// without parsing them. The status file missing or unreadable is a
// warning and leaves Packages empty.
func ReadDpkg(h *host.Host) Dpkg {
	var db Dpkg
	// dpkg applies its journal over the status file when it next runs, so
	// an entry there replaces the status file's paragraph for the same
	// package. The directory is empty except after an interrupted run.
	updates, updated := readJournal(h, &db)

	var replaced map[string]bool
	if len(updates) > 0 {
		replaced = make(map[string]bool, len(updates))
		for k := range updates {
			replaced[k] = true
		}
	}
	st, err := parseStatusFile(h, StatusPath, replaced, false)
	if err != nil {
		db.Warnings = append(db.Warnings, facts.Warning{Path: StatusPath, Message: fmt.Sprintf("reading the dpkg database: %v", err)})
		db.Err = fmt.Errorf("reading %s: %w", StatusPath, err)
		return db
	}
	db.Warnings = append(db.Warnings, st.warnings(StatusPath)...)
	db.Total = st.total
	db.Packages = st.packages
	for _, k := range updated {
		pkg := updates[k]
		if pkg.State == facts.StateNotInstalled {
			continue
		}
		db.Total++
		if Relevant(pkg.Name) {
			db.Packages = append(db.Packages, pkg)
		}
	}
	SortPackages(db.Packages)
	return db
}

// ReadDpkgAll reads every package of dpkg's database, "not-installed"
// ones included (they may still be held), for apply, which checks the
// whole package set: in the status file's order, each journal entry in
// the place of the paragraph it replaces and the journal's new packages
// after them, in journal order. A missing status file is an empty
// database.
func ReadDpkgAll(h *host.Host) Dpkg {
	var db Dpkg
	updates, updated := readJournal(h, &db)
	st, err := parseStatusFile(h, StatusPath, nil, true)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		db.Warnings = append(db.Warnings, facts.Warning{Path: StatusPath, Message: fmt.Sprintf("reading the dpkg database: %v", err)})
		db.Err = errors.Join(db.Err, fmt.Errorf("reading %s: %w", StatusPath, err))
	}
	db.Warnings = append(db.Warnings, st.warnings(StatusPath)...)
	db.Packages = make([]facts.Package, 0, len(st.packages)+len(updated))
	done := make(map[string]bool, len(updates))
	for _, p := range st.packages {
		k := key(p.Name, p.Architecture)
		if u, ok := updates[k]; ok {
			if done[k] {
				continue // a paragraph repeated in the status file
			}
			p, done[k] = u, true
		}
		db.Packages = append(db.Packages, p)
	}
	for _, k := range updated {
		if !done[k] {
			db.Packages = append(db.Packages, updates[k])
		}
	}
	for _, p := range db.Packages {
		if p.State != facts.StateNotInstalled {
			db.Total++
		}
	}
	return db
}

// readJournal reads dpkg's journal into db's Interrupted, Warnings and
// Err, and returns each package's newest entry, keyed "name:arch", with
// the keys in journal order. Entries are applied in the order of their
// numbers, as dpkg does.
func readJournal(h *host.Host, db *Dpkg) (map[string]facts.Package, []string) {
	entries, err := h.ReadDir(UpdatesDir)
	if err != nil {
		return nil, nil
	}
	var names []string
	for _, e := range entries {
		if isJournalName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	// dpkg numbers them 0000, 0001, …; ordered by number, a longer name
	// does not sort before a shorter one.
	slices.SortStableFunc(names, func(a, b string) int {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	updates := make(map[string]facts.Package)
	var updated []string // keys in journal order, for a stable result
	for _, name := range names {
		p := path.Join(UpdatesDir, name)
		data, err := h.ReadFile(p)
		if err != nil {
			db.Warnings = append(db.Warnings, facts.Warning{Path: p, Message: fmt.Sprintf("reading dpkg's journal: %v", err)})
			db.Err = errors.Join(db.Err, fmt.Errorf("reading %s: %w", p, err))
			continue
		}
		db.Interrupted = true
		jdb := parseStatus(data, nil, true)
		db.Warnings = append(db.Warnings, jdb.warnings(p)...)
		for _, pkg := range jdb.packages {
			k := key(pkg.Name, pkg.Architecture)
			if _, seen := updates[k]; !seen {
				updated = append(updated, k)
			}
			updates[k] = pkg
		}
	}
	return updates, updated
}

// parseStatusFile parses the status database at p. It is read through a
// buffer kept from one observation to the next rather than whole: the
// database is close to a megabyte, and reading it whole means touching
// as much fresh memory, and mapping it as many pages to map, fault in
// and unmap, either of which costs more than parsing it.
func parseStatusFile(h *host.Host, p string, replaced map[string]bool, every bool) (statusDB, error) {
	f, err := h.Open(p)
	if err != nil {
		return statusDB{}, err
	}
	defer f.Close()
	buf := statusBufs.Get().(*[]byte)
	defer statusBufs.Put(buf)
	return readStatus(f, buf, replaced, every)
}

var statusBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// readStatus parses a status-format file from r through the buffer *buf,
// which it grows when one paragraph does not fit in it.
func readStatus(r io.Reader, buf *[]byte, replaced map[string]bool, every bool) (statusDB, error) {
	p := statusParser{db: statusDB{every: every}, replaced: replaced}
	b := *buf
	n := 0     // bytes at the start of b not parsed yet
	last := -1 // the file's last byte, once there is one
	for {
		if n == len(b) {
			grown := make([]byte, 2*len(b))
			copy(grown, b)
			b, *buf = grown, grown
		}
		m, err := r.Read(b[n:])
		if m > 0 {
			n += m
			last = int(b[n-1])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return statusDB{}, err
		}
		parsed := p.parse(b[:n], false)
		n = copy(b, b[parsed:n])
	}
	p.finish(b[:n], last)
	return p.db, nil
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

// parseStatus reads a file in dpkg's status format; see statusParser.
func parseStatus(data []byte, replaced map[string]bool, every bool) statusDB {
	p := statusParser{db: statusDB{every: every}, replaced: replaced}
	last := -1
	if len(data) > 0 {
		last = int(data[len(data)-1])
	}
	p.finish(data, last)
	return p.db
}

// statusParser reads a file in dpkg's status format, in as many pieces as
// it comes in. Paragraphs for packages that are not relevant are only
// counted: their name and status are found with two byte searches and
// nothing is allocated for them. Relevant paragraphs (all of them when
// db.every is set, as for the journal, whose entries may concern any
// package) are parsed fully with the control-file parser: one by one when
// malformed, so that its error names the paragraph, and the well-formed
// ones, which real ones are, together when the file ends (flush).
// replaced names packages ("name:arch") whose paragraph is superseded and
// must be neither counted nor reported. Nothing the parser keeps points
// into the data it is given.
type statusParser struct {
	db       statusDB
	replaced map[string]bool
	n        int // paragraphs so far, for problems to name
	// batch holds copies of the well-formed relevant paragraphs, each
	// ended by a blank line, for flush.
	batch   []byte
	batched int
}

// parse parses the paragraphs at the start of data and returns how many
// bytes they took. Unless final, a paragraph that may go on past the end
// of data is left for a call with more.
func (p *statusParser) parse(data []byte, final bool) int {
	off := 0
	for {
		// Blank lines between paragraphs, any number of them.
		for off < len(data) && (data[off] == '\n' || data[off] == '\r') {
			off++
		}
		if off == len(data) {
			return off
		}
		end := nextParagraph(data[off:])
		if end == len(data)-off && !final {
			return off
		}
		p.paragraph(data[off : off+end])
		off += end
	}
}

// finish parses rest, the end of the file, and the paragraphs kept for
// the control-file parser; last is the file's last byte, -1 when it is
// empty.
func (p *statusParser) finish(rest []byte, last int) {
	p.parse(rest, true)
	p.flush()
	if last >= 0 && last != '\n' {
		p.db.problems = append([]string{"the file does not end with a newline: it was truncated, or is being written"}, p.db.problems...)
	}
}

func (p *statusParser) paragraph(para []byte) {
	db := &p.db
	p.n++
	name := field(para, "Package")
	if len(name) == 0 {
		db.problems = append(db.problems, fmt.Sprintf("paragraph %d has no Package field", p.n))
		return
	}
	status := field(para, "Status")
	if p.replaced != nil && p.replaced[key(string(name), string(field(para, "Architecture")))] {
		return
	}
	if !db.every && !relevantBytes(name) {
		switch {
		case len(status) == 0:
			db.problems = append(db.problems, fmt.Sprintf("package %s has no Status field", name))
			db.total++
		case !bytes.HasSuffix(status, []byte(" not-installed")):
			db.total++
		}
		return
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
		return
	}
	p.batch = appendKept(p.batch, para)
	p.batch = append(p.batch, '\n')
	p.batched++
}

// kept are the fields toPackage reads.
var kept = map[string]bool{"Package": true, "Architecture": true, "Version": true, "Config-Version": true, "Source": true, "Status": true}

// appendKept appends to dst the lines of the well-formed paragraph para
// that make up the fields toPackage reads, continuation lines included.
// The rest (a long Description, Conffiles, dependencies) would cost the
// control-file parser a string per line for nothing. A paragraph that
// repeats a field, or has too many to check, goes in whole, so that the
// parser refuses it as dpkg does.
func appendKept(dst, para []byte) []byte {
	var seen [48][]byte
	keys := seen[:0]
	start := len(dst)
	keep := false
	for rest := para; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i+1], rest[i+1:]
		} else {
			line, rest = append(rest[:len(rest):len(rest)], '\n'), nil
		}
		if line[0] != ' ' && line[0] != '\t' {
			k, _, _ := bytes.Cut(line, []byte(":"))
			k = bytes.TrimSpace(k)
			if len(keys) == cap(keys) || slices.ContainsFunc(keys, func(s []byte) bool { return bytes.Equal(s, k) }) {
				dst = append(dst[:start], para...)
				return append(dst, '\n')
			}
			keys = append(keys, k)
			keep = kept[string(k)]
		}
		if keep {
			dst = append(dst, line...)
		}
	}
	return dst
}

// flush parses the well-formed relevant paragraphs kept so far with the
// control-file parser, through one reader: a reader per paragraph would
// allocate its buffer fifty times over.
func (p *statusParser) flush() {
	if p.batched == 0 {
		return
	}
	db := &p.db
	r, err := control.NewParagraphReader(bytes.NewReader(p.batch), nil)
	if err != nil {
		db.problems = append(db.problems, err.Error())
		return
	}
	for range p.batched {
		cp, err := r.Next()
		if err != nil {
			db.problems = append(db.problems, err.Error())
			break
		}
		db.add(toPackage(cp))
	}
	p.batch, p.batched = p.batch[:0], 0
}

// add records one parsed paragraph.
func (db *statusDB) add(pkg facts.Package, ok bool, problem string) {
	if problem != "" {
		db.problems = append(db.problems, problem)
	}
	if !ok {
		return
	}
	if pkg.State != facts.StateNotInstalled {
		db.total++
	}
	if pkg.State != facts.StateNotInstalled || db.every {
		if db.packages == nil && !db.every {
			// A real database has a few dozen relevant packages: one
			// allocation rather than seven.
			db.packages = make([]facts.Package, 0, 64)
		}
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

// parseParagraph turns one status paragraph into a Package with the
// control-file parser. ok is false when the paragraph cannot stand for a
// package at all; problem, when not empty, says what is wrong with it
// either way.
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
	if len(words) != 3 || !wants[words[0]] || !eflags[words[1]] || !states[facts.PackageState(words[2])] {
		return pkg, false, fmt.Sprintf("package %s: unrecognised Status %q", pkg.Name, v["Status"])
	}
	pkg.Want, pkg.State = words[0], facts.PackageState(words[2])
	pkg.Hold = words[0] == "hold"
	pkg.ReinstallRequired = words[1] == "reinstreq"
	if pkg.Version == "" && pkg.State != facts.StateNotInstalled {
		return pkg, true, fmt.Sprintf("package %s (%s) has no Version field", pkg.Name, pkg.State)
	}
	return pkg, true, ""
}

// StatusText is the Status field a package's paragraph has:
// "install ok installed", "hold reinstreq half-installed".
func StatusText(p facts.Package) string {
	flag := "ok"
	if p.ReinstallRequired {
		flag = "reinstreq"
	}
	return p.Want + " " + flag + " " + string(p.State)
}

// JournalPending reports whether dpkg's journal holds entries it has not
// folded into the status file yet: dpkg was interrupted, and apt refuses
// to run until `dpkg --configure -a` has finished its work.
func JournalPending(h *host.Host) bool {
	entries, err := h.ReadDir(UpdatesDir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return isJournalName(e.Name()) })
}

// ControlParagraph returns the status file's paragraph for the package
// name at version as dpkg wrote it, less the fields that describe its
// installation rather than the package (Status, Config-Version,
// Conffiles), and the package's architecture: the control file of the
// installed package, from which its package file can be built again.
func ControlParagraph(h *host.Host, name, version string) ([]byte, string, error) {
	data, err := h.ReadFile(StatusPath)
	if err != nil {
		return nil, "", err
	}
	for off := 0; off < len(data); {
		if data[off] == '\n' || data[off] == '\r' {
			off++
			continue
		}
		end := nextParagraph(data[off:])
		para := bytes.TrimRight(data[off:off+end], "\n")
		off += end
		if i := bytes.Index(para, []byte("\n\n")); i >= 0 {
			para = para[:i]
		}
		if string(field(para, "Package")) != name || string(field(para, "Version")) != version {
			continue
		}
		var out bytes.Buffer
		skip := false
		for _, line := range bytes.Split(para, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if line[0] != ' ' && line[0] != '\t' {
				k, _, _ := bytes.Cut(line, []byte(":"))
				switch string(k) {
				case "Status", "Config-Version", "Conffiles":
					skip = true
				default:
					skip = false
				}
			}
			if !skip {
				out.Write(line)
				out.WriteByte('\n')
			}
		}
		return out.Bytes(), string(field(para, "Architecture")), nil
	}
	return nil, "", fmt.Errorf("dpkg's database has no record of %s %s", name, version)
}

// InfoDir is where dpkg keeps each installed package's file list and
// maintainer scripts.
const InfoDir = "/var/lib/dpkg/info"

// InfoPrefix is the path, without its extension, of a package's files in
// InfoDir: NAME, or NAME:ARCH where dpkg qualified the name (a package
// installed for more than one architecture), told by which file list
// exists.
func InfoPrefix(h *host.Host, name, arch string) string {
	p := path.Join(InfoDir, name)
	if arch != "" {
		if _, err := h.Stat(p + ".list"); err != nil {
			return p + ":" + arch
		}
	}
	return p
}

// FileList is dpkg's list of the files a package installed, one path a
// line as dpkg wrote it.
func FileList(h *host.Host, name, arch string) ([]byte, error) {
	list, err := h.ReadFile(path.Join(InfoDir, name+".list"))
	if err != nil && arch != "" {
		list, err = h.ReadFile(path.Join(InfoDir, name+":"+arch+".list"))
	}
	return list, err
}
