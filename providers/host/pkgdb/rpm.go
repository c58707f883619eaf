package pkgdb

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// RPMQueryFormat makes rpm print one tab-separated line per package:
// name, epoch, version, release, architecture and source package.
// EPOCHNUM is 0 for a package without an epoch (EPOCH would print
// "(none)").
const RPMQueryFormat = `%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\t%{SOURCERPM}\n`

// RPMQuery is the command that lists an RPM-family host's packages, run
// inside the root; ParseRPM reads its output.
func RPMQuery() []string { return []string{"rpm", "-qa", "--qf", RPMQueryFormat} }

// ParseRPM reads the output of RPMQuery. total counts every package
// (imported signing keys, which rpm lists as gpg-pubkey packages, are
// not); pkgs are the packages keep accepts (all of them when keep is
// nil), in rpm's order, each installed and wanted, its Version
// "[epoch:]version-release" with a zero epoch left out. A line that
// cannot be read is a problem ("line N: …") and is skipped.
func ParseRPM(data []byte, keep func(name string) bool) (total int, pkgs []facts.Package, problems []string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 || f[0] == "" || f[2] == "" {
			problems = append(problems, fmt.Sprintf("line %d: unexpected output %q", n, line))
			continue
		}
		if f[0] == "gpg-pubkey" {
			// rpm lists imported signing keys as packages; they are not.
			continue
		}
		total++
		if keep != nil && !keep(f[0]) {
			continue
		}
		version := f[2] + "-" + f[3]
		if f[1] != "0" && f[1] != "(none)" && f[1] != "" {
			version = f[1] + ":" + version
		}
		pkgs = append(pkgs, facts.Package{
			Name:         f[0],
			Version:      version,
			Architecture: f[4],
			Source:       sourceName(f[5], f[2], f[3]),
			State:        facts.StateInstalled,
			Want:         "install",
		})
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	return total, pkgs, problems
}

// sourceName turns "nvidia-driver-550.54.15-1.el9.src.rpm" into
// "nvidia-driver" when the source carries the binary's version, as it
// nearly always does.
func sourceName(srpm, version, release string) string {
	s := strings.TrimSuffix(srpm, ".src.rpm")
	if s == "(none)" {
		return ""
	}
	if t, ok := strings.CutSuffix(s, "-"+version+"-"+release); ok {
		return t
	}
	return s
}

// ParseVersionlock reads the dnf versionlock plugin's list, as the file
// holds it or `dnf versionlock list` prints it: one NEVRA glob a line
// ("nvidia-driver-3:550.54.15-1.el9.*"). Exclusions ("!…", not locks),
// comments and dnf's "Last metadata expiration" line are left out.
func ParseVersionlock(data []byte) []string {
	var locks []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' || strings.HasPrefix(line, "Last metadata") {
			continue
		}
		locks = append(locks, line)
	}
	return locks
}

// ReadVersionlock reads the versionlock list at VersionlockPath. A missing
// file means no locks.
func ReadVersionlock(h *host.Host) ([]string, *facts.Warning) {
	data, err := h.ReadFile(VersionlockPath)
	if err != nil {
		if _, serr := h.Lstat(VersionlockPath); serr != nil {
			return nil, nil
		}
		return nil, &facts.Warning{Path: VersionlockPath, Message: fmt.Sprintf("reading the version locks: %v", err)}
	}
	return ParseVersionlock(data), nil
}

// Locked reports whether a versionlock entry locks the installed package
// p (Version "[epoch:]version-release"): an entry is a glob matched
// against each spelling of the package the plugin accepts: the bare name,
// name.arch, name-version-release, with the architecture, with the epoch
// after the name, or epoch first.
func Locked(entries []string, p facts.Package) bool {
	if len(entries) == 0 {
		return false
	}
	epoch, vr, found := strings.Cut(p.Version, ":")
	if !found {
		epoch, vr = "0", p.Version
	}
	forms := [...]string{
		p.Name,
		p.Name + "." + p.Architecture,
		p.Name + "-" + vr,
		p.Name + "-" + vr + "." + p.Architecture,
		p.Name + "-" + epoch + ":" + vr + "." + p.Architecture,
		epoch + ":" + p.Name + "-" + vr + "." + p.Architecture,
	}
	for _, e := range entries {
		for _, f := range forms {
			if e == f {
				return true
			}
			if ok, _ := path.Match(e, f); ok {
				return true
			}
		}
	}
	return false
}

// LocksName reports whether an entry locks some version of the package
// called name, installed or not: the bare name, or
// "name-epoch:version-release.arch" as `dnf versionlock add` writes it,
// the name being what precedes the last two dashes.
func LocksName(entries []string, name string) bool {
	for _, e := range entries {
		if e == name {
			return true
		}
		i := strings.LastIndexByte(e, '-')
		if i < 0 {
			continue
		}
		if j := strings.LastIndexByte(e[:i], '-'); j > 0 && e[:j] == name {
			return true
		}
	}
	return false
}

// RPMFilesQuery is the command that prints, one path a line, the files
// rpm's database lists for the installed packages named. The database
// itself (SQLite since RHEL 9, Berkeley DB before) has no text form to
// read, so the list comes from rpm, as the package list does.
func RPMFilesQuery(names ...string) []string {
	return append([]string{"rpm", "-ql", "--"}, names...)
}

// ParseRPMFiles reads the output of RPMFilesQuery: the absolute paths,
// without rpm's "(contains no files)" line for a package that has none.
func ParseRPMFiles(data []byte) []string {
	var out []string
	for line := range strings.Lines(string(data)) {
		if p := strings.TrimSpace(line); strings.HasPrefix(p, "/") {
			out = append(out, p)
		}
	}
	return out
}
