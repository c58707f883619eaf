package environment

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// Written returns env as it is once the file at p holds content (or,
// with remove, is gone): the file's assignments are read from content as
// Observe reads them from disk, in the place Observe lists that file. A
// file Observe does not read variables from leaves the variables as they
// are. env is not changed.
func Written(env facts.Environment, p string, content []byte, remove bool) facts.Environment {
	if group, ok := teamGroup(p); ok {
		return writtenTeam(env, p, group, content, remove)
	}
	if path.Dir(p) == LdSoConfDir && strings.HasSuffix(p, ".conf") {
		return writtenLoaderConf(env, p, content, remove)
	}
	rank, ok := variablesRank(p)
	if !ok {
		return env
	}
	var written []facts.Assignment
	if !remove {
		switch {
		case p == EnvironmentPath:
			written, _ = ParseEnvironmentFile(p, content)
		case strings.HasPrefix(p, ProfileDir+"/"):
			written = ParseShell(p, content)
		default:
			written = ParseSystemd(p, content)
		}
	}
	out := env
	out.Variables = spliced(env.Variables, written, p, func(a facts.Assignment) string { return a.File }, func(a facts.Assignment) bool {
		r, _ := variablesRank(a.File)
		return less(rank, r)
	})
	if out.Variables == nil {
		out.Variables = []facts.Assignment{}
	}
	out.Managed = managed(env.Managed, p, !remove && slices.Contains(ManagedFiles, p))
	return out
}

// spliced is list with the entries read from the file p replaced by
// written, placed where Observe reads p: before the first other entry
// that after says Observe reads after it, else at the end. fileOf names
// an entry's file. list is not changed.
func spliced[T any](list, written []T, p string, fileOf func(T) string, after func(T) bool) []T {
	var out []T
	placed := false
	for _, e := range list {
		if fileOf(e) == p {
			continue
		}
		if !placed && after(e) {
			out = append(out, written...)
			placed = true
		}
		out = append(out, e)
	}
	if !placed {
		out = append(out, written...)
	}
	return out
}

// managed is the list of gpuenv's own files on the host once p is
// written (kept: it is one of them) or removed.
func managed(list []string, p string, kept bool) []string {
	out := slices.DeleteFunc(slices.Clone(list), func(m string) bool { return m == p })
	if kept {
		out = append(out, p)
	}
	return out
}

// rank orders the files Observe reads variables from as it reads them:
// /etc/environment, the profile scripts by name, system.conf, then the
// drop-ins by name.
type rank struct {
	group int
	name  string
}

func less(a, b rank) bool {
	if a.group != b.group {
		return a.group < b.group
	}
	return a.name < b.name
}

func variablesRank(p string) (rank, bool) {
	switch {
	case p == EnvironmentPath:
		return rank{group: 0}, true
	case path.Dir(p) == ProfileDir && strings.HasSuffix(p, ".sh"):
		return rank{group: 1, name: path.Base(p)}, true
	case p == SystemConf:
		return rank{group: 2}, true
	case strings.HasSuffix(p, ".conf") && slices.Contains(systemdDropIns, path.Dir(p)):
		return rank{group: 3, name: path.Base(p)}, true
	}
	return rank{}, false
}

// writtenTeam is env once the team file p of group holds content (or is
// gone): its assignments take the place of the file's, in the name order
// Observe reads the team files in.
func writtenTeam(env facts.Environment, p, group string, content []byte, remove bool) facts.Environment {
	var written []facts.Assignment
	if !remove {
		written, _ = ParseTeamFile(p, group, content)
	}
	out := env
	out.Teams = spliced(env.Teams, written, p, func(a facts.Assignment) string { return a.File }, func(a facts.Assignment) bool { return p < a.File })
	out.Managed = managed(env.Managed, p, !remove)
	return out
}

// Reads reports whether Observe reads the file at p: a file whose
// change can change what the environment holds (variables, teams, the
// loader's paths), and with it what programs load.
func Reads(p string) bool {
	if _, ok := teamGroup(p); ok {
		return true
	}
	if _, ok := variablesRank(p); ok {
		return true
	}
	return p == LdSoConf || path.Dir(p) == LdSoConfDir && strings.HasSuffix(p, ".conf")
}

// writtenLoaderConf is env once the loader's configuration file p of
// /etc/ld.so.conf.d holds content (or is gone): its directories take the
// place of the file's, in the name order ldconfig's include reads that
// directory in. A file that includes others is not one gpuenv or a
// package writes there, and its includes are not followed.
func writtenLoaderConf(env facts.Environment, p string, content []byte, remove bool) facts.Environment {
	var written []facts.LoaderPath
	if !remove {
		for _, line := range lines(content) {
			for _, d := range loaderDirs(line) {
				written = append(written, facts.LoaderPath{Dir: d, File: p})
			}
		}
	}
	// The directory's files come where /etc/ld.so.conf includes them:
	// before the first of another file that follows one of them.
	seen := false
	out := env
	out.LoaderPaths = spliced(env.LoaderPaths, written, p, func(lp facts.LoaderPath) string { return lp.File }, func(lp facts.LoaderPath) bool {
		inDir := path.Dir(lp.File) == LdSoConfDir
		after := inDir && p < lp.File || seen && !inDir
		seen = seen || inDir
		return after
	})
	if out.LoaderPaths == nil {
		out.LoaderPaths = []facts.LoaderPath{}
	}
	out.Managed = managed(env.Managed, p, !remove && slices.Contains(ManagedFiles, p))
	return out
}
