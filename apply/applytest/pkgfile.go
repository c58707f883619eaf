package applytest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/txtar"
)

// What the fake .deb and .rpm files have in common: the files they
// install, as a txtar archive, and the directories they are kept in.

// filesTxtar is a txtar archive of files (contents by absolute path) in
// the order of their paths, as fake package files carry them.
func filesTxtar(comment string, files map[string]string) []byte {
	ar := &txtar.Archive{Comment: []byte(comment)}
	for _, n := range slices.Sorted(maps.Keys(files)) {
		ar.Files = append(ar.Files, txtar.File{Name: strings.TrimPrefix(n, "/"), Data: []byte(files[n])})
	}
	return txtar.Format(ar)
}

// writePackages puts fake package files into dir, each by the name its
// package manager gives it.
func writePackages[P interface {
	FileName() string
	Bytes() []byte
}](dir string, pkgs []P) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, p := range pkgs {
		if err := os.WriteFile(filepath.Join(dir, p.FileName()), p.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readPackages parses the fake package files of dir that match pattern,
// by package name, oldest version first.
func readPackages[P any](dir, pattern string, parse func([]byte) (P, error), name, version func(P) string) (map[string][]P, error) {
	out := map[string][]P{}
	if dir == "" {
		return out, nil
	}
	m, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, f := range m {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		p, err := parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[name(p)] = append(out[name(p)], p)
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return compareVersions(version(list[i]), version(list[j])) < 0 })
	}
	return out, nil
}
