package compat

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// FrameworkLibraries are the shared libraries one framework build loads
// (framework_libraries.tsv).
type FrameworkLibraries struct {
	Framework string
	// First and Last bound the releases (major.minor) the row covers;
	// Last is zero while current.
	First, Last version.Version
	// CUDA is the CUDA the build targets, as a major or major.minor.
	CUDA version.Version
	// Needs are the sonames the build loads itself.
	Needs []string
	// Chained are libraries those load in turn, searched with the
	// needer's own RUNPATH.
	Chained []ChainedLibrary
	// OwnDirs is how the build reaches its wheel directories: "rpath",
	// "runpath" or "none".
	OwnDirs string
	// Load is how a missing library shows: "import" or "dlopen".
	Load   string
	Notes  string
	Source Source
}

// ChainedLibrary is a library loaded by another one.
type ChainedLibrary struct{ Needer, Needed string }

var frameworkLibrariesTable = loaded(loadFrameworkLibraries)

func loadFrameworkLibraries() ([]FrameworkLibraries, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("framework_libraries.tsv", "framework", "first", "last", "cuda", "needs", "chained", "own_dirs", "load", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]FrameworkLibraries, 0, len(recs))
	for _, r := range recs {
		row := FrameworkLibraries{
			Framework: d.oneOf(r, "framework", "pytorch", "tensorflow", "jax"),
			First:     d.requiredVersion(r, "first"),
			Last:      d.version(r, "last"),
			CUDA:      d.requiredVersion(r, "cuda"),
			Needs:     strings.Split(d.required(r, "needs"), ","),
			OwnDirs:   d.oneOf(r, "own_dirs", "rpath", "runpath", "none"),
			Load:      d.oneOf(r, "load", "import", "dlopen"),
			Notes:     d.str(r, "notes"),
		}
		if c := r.get("chained"); c != "" {
			for pair := range strings.SplitSeq(c, ",") {
				a, b, ok := strings.Cut(pair, ">")
				if !ok {
					d.fail(r, "chained", "%q is not needer>needed", pair)
					continue
				}
				row.Chained = append(row.Chained, ChainedLibrary{Needer: a, Needed: b})
			}
		}
		key := fmt.Sprintf("%s %s-%s cuda %s", row.Framework, row.First, row.Last, row.CUDA)
		row.Source = d.source(r, "framework_libraries", key, refs)
		rows = append(rows, row)
	}
	return rows, d.err
}

// FrameworkLibrariesRows returns every row, in file order.
func FrameworkLibrariesRows() []FrameworkLibraries {
	return slices.Clone(must(frameworkLibrariesTable()))
}

// FrameworkLibrariesFor returns the libraries of framework release rel
// built for CUDA cuda (as the framework reports it: "12.4", "11.8",
// "10.1"): the row whose release range holds rel and whose CUDA is a
// prefix of cuda.
func FrameworkLibrariesFor(framework string, rel, cuda version.Version) (FrameworkLibraries, error) {
	mmRel := mm(rel)
	for _, r := range must(frameworkLibrariesTable()) {
		if r.Framework != framework || mmRel.Compare(r.First) < 0 || !r.Last.IsZero() && mmRel.Compare(r.Last) > 0 {
			continue
		}
		if !versionPrefix(r.CUDA, cuda) {
			continue
		}
		return r, nil
	}
	return FrameworkLibraries{}, fmt.Errorf("%s %s for CUDA %s: %w", framework, rel, cuda, ErrUnknown)
}

// versionPrefix reports whether p's parts begin v's.
func versionPrefix(p, v version.Version) bool {
	pp, vp := p.Parts(), v.Parts()
	if len(pp) > len(vp) {
		return false
	}
	for i := range pp {
		if pp[i] != vp[i] {
			return false
		}
	}
	return true
}
