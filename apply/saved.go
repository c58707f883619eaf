package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// SavedFileError is a package file saved for rollback that is missing or
// not the file that was saved, and that its archive or repository could
// not give again. The inverse that needs it is not run: installing it
// would fail part-way or install something else, and every rollback after
// would stop at the same place. It names the file, what is wrong with it
// and how to replace it; a rollback run after that goes on.
type SavedFileError struct {
	Manager       string // "apt" or "dnf"
	Name, Version string
	// File is the saved file's path inside the root, where a good copy
	// goes.
	File string
	// Missing: the file is gone.
	Missing bool
	// Want is the SHA-256 the file must have and WantFrom where it comes
	// from; WantSize is its size when recorded (0: not recorded). Got
	// and GotSize are the file's. Want is "" when nothing records a
	// digest (a generation saved before digests were recorded, with no
	// index listing the version); Damage then says what is wrong.
	Want, WantFrom string
	WantSize       int64
	Got            string
	GotSize        int64
	Damage         string
	// Refetch says why the archive did not give the version again.
	Refetch string
}

func (e *SavedFileError) Error() string {
	var b strings.Builder
	b.WriteString(e.problem())
	fmt.Fprintf(&b, "; it was not fetched again: %s. ", e.Refetch)
	if e.Want != "" {
		fmt.Fprintf(&b, "Put a file with SHA-256 %s at that path (a backup of it or, where it was the archive's file, %s)", e.Want, e.fetchHint())
	} else {
		fmt.Fprintf(&b, "Put a whole package file of %s %s at that path (%s, or a copy from another host)", e.Name, e.Version, e.fetchHint())
	}
	fmt.Fprintf(&b, ", or install %s %s by hand from a copy found elsewhere; then run gpuenv rollback again, which goes on from there", e.Name, e.Version)
	return b.String()
}

// problem says what is wrong with the file.
func (e *SavedFileError) problem() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the package file saved for %s %s, %s, ", e.Name, e.Version, e.File)
	switch {
	case e.Missing:
		b.WriteString("is missing")
	case e.Want != "":
		b.WriteString("is corrupt: ")
		if e.Damage != "" {
			b.WriteString(e.Damage + "; ")
		}
		fmt.Fprintf(&b, "its SHA-256 is %s (%d bytes), %s %s", e.Got, e.GotSize, e.WantFrom, e.Want)
		if e.WantSize > 0 {
			fmt.Fprintf(&b, " (%d bytes)", e.WantSize)
		}
	default:
		fmt.Fprintf(&b, "is corrupt: %s", e.Damage)
	}
	return b.String()
}

// fetchHint says how the archive's file is fetched where an archive
// still has the version.
func (e *SavedFileError) fetchHint() string {
	if e.Manager == "dnf" {
		return fmt.Sprintf("dnf download %s-%s where a repository still has it", e.Name, e.Version)
	}
	return fmt.Sprintf("apt-get download %s=%s where an archive still has it", e.Name, e.Version)
}

// Fix is what a person does next; the command's report shows it in
// place of its usual advice to run rollback again, which alone would fail
// the same way.
func (e *SavedFileError) Fix() string {
	return "replace the saved package file named above, or install that version by hand, then run gpuenv rollback again (until then every rollback stops at this step)"
}

// verdict is what checking a saved package file found.
type verdict struct {
	sum  string // the file's SHA-256 ("" when it cannot be read)
	size int64
	// ok: the file is the one saved (or, where nothing records its
	// digest, whole); note says why it is trusted when no digest was
	// recorded. suspect: it is whole but not the index's file, which a
	// file rebuilt from dpkg's records never is: the archive's copy is
	// preferred when it still has one.
	ok, suspect bool
	note        string
	// bad is the error to give when it cannot be fetched again.
	bad *SavedFileError
}

// judgeSaved checks the file local (p.Saved on this machine) against the
// digest recorded when it was saved, else the index's (indexSHA, "" when
// no index lists the version), else its structure (whole, from
// structure, nil when the manager has no such check).
func judgeSaved(manager string, p PriorPackage, local, indexSHA string, whole func(string) error) verdict {
	e := &SavedFileError{Manager: manager, Name: p.Name, Version: p.Version, File: p.Saved}
	if p.SHA256 != "" && !isSHA256(p.SHA256) {
		// The journal is gpuenv's own, but a damaged or forged one must
		// not be echoed raw, nor stand for a digest.
		e.Damage = fmt.Sprintf("the SHA-256 the journal records for it, %q, is not one", p.SHA256)
		return verdict{bad: e}
	}
	sum, size, err := fileDigest(local)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			e.Missing = true
		} else {
			e.Damage = "it cannot be read: " + err.Error()
		}
		return verdict{bad: e}
	}
	e.Got, e.GotSize = sum, size
	switch {
	case p.SHA256 != "":
		if sum == p.SHA256 && (p.Size == 0 || size == p.Size) {
			return verdict{sum: sum, size: size, ok: true}
		}
		e.Want, e.WantFrom, e.WantSize = p.SHA256, "recorded when it was saved as", p.Size
		return verdict{sum: sum, size: size, bad: e}
	case indexSHA != "" && sum == indexSHA:
		return verdict{sum: sum, size: size, ok: true, note: "the package index's SHA-256"}
	}
	// No digest recorded (saved by an older gpuenv). A file that differs
	// from the index's may be one rebuilt from dpkg's records, which no
	// index has: only its structure can be checked.
	if whole != nil {
		if err := whole(local); err != nil {
			e.Damage = err.Error()
			if indexSHA != "" {
				e.Want, e.WantFrom = indexSHA, "the package index's is"
			}
			return verdict{sum: sum, size: size, bad: e}
		}
	}
	note := "no digest was recorded when it was saved (an older gpuenv); its structure is whole"
	if whole == nil {
		note = "no digest was recorded when it was saved (an older gpuenv); used unchecked"
	}
	return verdict{sum: sum, size: size, ok: true, suspect: indexSHA != "", note: note}
}

// isSHA256 reports whether s is a SHA-256 as gpuenv writes one: 64
// lowercase hex digits.
func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
