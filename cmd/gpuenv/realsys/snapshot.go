//go:build realsystem

package realsys

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Snapshot is what "the host is as it was" means in the fault matrix
// (design "Testing tiers", 5): every package dpkg knows with its version,
// selection, status, error flag and conffile checksums; dpkg's own records
// of each package (maintainer scripts, conffile and trigger lists, file
// lists and checksums); every file under /etc and /usr/local with its
// bytes, mode, owner and symlink target; and what `dpkg --audit` says.
type Snapshot struct {
	Packages map[string]PackageState
	Records  map[string]string // /var/lib/dpkg/info and triggers files → content (lists sorted)
	Files    map[string]FileState
	Audit    string
}

// PackageState is one package as dpkg-query reports it. A package dpkg
// knows only as "not-installed" is left out, as if absent.
type PackageState struct {
	Version   string
	Want      string // install, hold, deinstall, purge
	Status    string // installed, config-files, half-installed, …
	Eflag     string // ok, reinstreq
	Conffiles string
}

func (p PackageState) String() string {
	s := fmt.Sprintf("%s %s/%s", p.Version, p.Want, p.Status)
	if p.Status == "config-files" || p.Status == "not-installed" {
		s = fmt.Sprintf("%s/%s (version %s)", p.Want, p.Status, p.Version)
	}
	if p.Eflag != "ok" {
		s += " (" + p.Eflag + ")"
	}
	return s
}

// FileState is one file: its type and permission bits, owner, and its
// content (regular files) or target (symlinks).
type FileState struct {
	Mode     fs.FileMode
	UID, GID uint32
	Size     int64
	Sum      string // sha256 of a regular file
	Text     string // a small text file's content, to show how it changed
	Target   string // a symlink's target
}

func (f FileState) String() string {
	s := fmt.Sprintf("%v %d:%d", f.Mode, f.UID, f.GID)
	switch {
	case f.Mode&fs.ModeSymlink != 0:
		s += " → " + f.Target
	case f.Mode.IsRegular():
		s += fmt.Sprintf(" %d bytes sha256:%.12s", f.Size, f.Sum)
	}
	return s
}

// snapshotTrees are the trees whose files are compared.
var snapshotTrees = []string{"/etc", "/usr/local"}

// snapshotSkip are files whose change says nothing about gpuenv: the shadow
// tools' backups of /etc/group and friends, which gpasswd and groupadd
// rewrite with the previous contents at every change (so that undoing a
// change can never give back the backup from before it).
var snapshotSkip = map[string]bool{
	"/etc/group-": true, "/etc/gshadow-": true, "/etc/passwd-": true, "/etc/shadow-": true,
}

// Snapshot records the root's state. It runs dpkg-query and dpkg --audit
// inside the root; nothing else is started.
func (r *Root) Snapshot() *Snapshot {
	r.t.Helper()
	s := &Snapshot{Packages: map[string]PackageState{}, Records: map[string]string{}, Files: map[string]FileState{}}
	// Conffiles lines begin with a space; every other line is a package.
	res := r.Sh(`dpkg-query -W -f='${Package}\t${Version}\t${db:Status-Want}\t${db:Status-Status}\t${db:Status-Eflag}\n${Conffiles}\n'`)
	if res.Code != 0 {
		r.t.Fatalf("snapshot: %s", res)
	}
	var name string
	var pkg PackageState
	flush := func() {
		if name != "" && pkg.Status != "not-installed" {
			pkg.Conffiles = strings.TrimSpace(pkg.Conffiles)
			s.Packages[name] = pkg
		}
		name = ""
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, " ") {
			pkg.Conffiles += strings.TrimSpace(line) + "\n"
			continue
		}
		flush()
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			r.t.Fatalf("snapshot: dpkg-query printed %q", line)
		}
		name = f[0]
		pkg = PackageState{Version: f[1], Want: f[2], Status: f[3], Eflag: f[4]}
	}
	flush()
	audit := r.Sh("dpkg --audit")
	s.Audit = strings.TrimSpace(audit.Stdout + audit.Stderr)
	if audit.Code != 0 && s.Audit == "" {
		s.Audit = fmt.Sprintf("dpkg --audit exited %d", audit.Code)
	}
	for _, dir := range []string{"/var/lib/dpkg/info", "/var/lib/dpkg/triggers"} {
		ents, err := os.ReadDir(r.Path(dir))
		if err != nil {
			r.t.Fatalf("snapshot: %v", err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || e.Name() == "Lock" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(r.Path(dir), e.Name()))
			if err != nil {
				r.t.Fatalf("snapshot: %v", err)
			}
			text := string(data)
			if ext := filepath.Ext(e.Name()); ext == ".list" || ext == ".md5sums" || dir == "/var/lib/dpkg/triggers" {
				// Order is how the package file happened to list
				// them; the set is what counts.
				lines := strings.Split(strings.TrimSpace(text), "\n")
				slices.Sort(lines)
				text = strings.Join(lines, "\n")
			}
			s.Records[dir+"/"+e.Name()] = text
		}
	}
	r.snapshotFiles(snapshotTrees, s.Files)
	return s
}

// snapshotFiles records every file under trees (paths inside the root)
// into files, by path inside the root.
func (r *Root) snapshotFiles(trees []string, files map[string]FileState) {
	r.t.Helper()
	for _, tree := range trees {
		err := filepath.WalkDir(r.Path(tree), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, r.Dir), "/")
			if snapshotSkip[rel] {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			fs := FileState{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid}
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				fs.Target, err = os.Readlink(p)
			case fi.Mode().IsRegular():
				var data []byte
				data, err = os.ReadFile(p)
				fs.Size = int64(len(data))
				sum := sha256.Sum256(data)
				fs.Sum = hex.EncodeToString(sum[:])
				if len(data) <= 8192 && !bytes.ContainsRune(data, 0) {
					fs.Text = string(data)
				}
			}
			if err != nil {
				return err
			}
			files[rel] = fs
			return nil
		})
		if err != nil {
			r.t.Fatalf("snapshot of %s: %v", tree, err)
		}
	}
}

// Diff says how after differs from s, one line (or a few, for a changed
// text file) per difference, sorted; nothing when they are the same.
func (s *Snapshot) Diff(after *Snapshot) []string {
	out := differences(s.Packages, after.Packages,
		func(name string, b PackageState) string {
			return fmt.Sprintf("package %s: was %s, now absent", name, b)
		},
		func(name string, a PackageState) string {
			return fmt.Sprintf("package %s: was absent, now %s", name, a)
		},
		func(name string, b, a PackageState) string {
			line := fmt.Sprintf("package %s: was %s, now %s", name, b, a)
			if a.Conffiles != b.Conffiles {
				line += "; its conffiles:\n" + indent(lineDiff(b.Conffiles, a.Conffiles))
			}
			return line
		})
	out = append(out, differences(s.Records, after.Records,
		func(p, _ string) string { return "dpkg record " + p + ": removed" },
		func(p, _ string) string { return "dpkg record " + p + ": added" },
		func(p, b, a string) string { return "dpkg record " + p + ": changed\n" + indent(lineDiff(b, a)) })...)
	out = append(out, differences(s.Files, after.Files,
		func(p string, b FileState) string { return fmt.Sprintf("file %s: was %s, now absent", p, b) },
		func(p string, a FileState) string {
			line := fmt.Sprintf("file %s: was absent, now %s", p, a)
			if a.Text != "" {
				line += "\n" + indent(lineDiff("", a.Text))
			}
			return line
		},
		func(p string, b, a FileState) string {
			line := fmt.Sprintf("file %s: was %s, now %s", p, b, a)
			if a.Sum != b.Sum && (a.Text != "" || b.Text != "") {
				line += "\n" + indent(lineDiff(b.Text, a.Text))
			}
			return line
		})...)
	if after.Audit != "" {
		out = append(out, "dpkg --audit:\n"+indent(after.Audit))
	}
	return out
}

// differences says, in key order, what became of each key of before or
// after whose value differs: gone from after, added in it, or changed.
func differences[V comparable](before, after map[string]V, gone func(k string, b V) string, added func(k string, a V) string, changed func(k string, b, a V) string) []string {
	keys := slices.Collect(maps.Keys(before))
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		b, inB := before[k]
		a, inA := after[k]
		switch {
		case !inA:
			out = append(out, gone(k, b))
		case !inB:
			out = append(out, added(k, a))
		case a != b:
			out = append(out, changed(k, b, a))
		}
	}
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// lineDiff shows the lines only in before ("-") and only in after ("+"),
// in order, from a longest common subsequence; files here are small.
func lineDiff(before, after string) string {
	a := strings.Split(strings.TrimRight(before, "\n"), "\n")
	b := strings.Split(strings.TrimRight(after, "\n"), "\n")
	if before == "" {
		a = nil
	}
	if after == "" {
		b = nil
	}
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "+ %s\n", b[j])
			j++
		default:
			fmt.Fprintf(&out, "- %s\n", a[i])
			i++
		}
	}
	if out.Len() == 0 {
		return "(same lines; whitespace at the end differs)"
	}
	return out.String()
}
