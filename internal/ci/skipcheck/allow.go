package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// allowList is the tests that may skip in CI, each with why.
type allowList struct {
	path    string
	entries map[[2]string]bool // import path, test name
}

// readAllowList reads lines "IMPORTPATH TestName  # why". An entry
// without its reason is an error: the list stays short only if each
// entry has to be argued for.
func readAllowList(r io.Reader, path string) (*allowList, error) {
	a := &allowList{path: path, entries: map[[2]string]bool{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entry, why, ok := strings.Cut(line, "#")
		fields := strings.Fields(entry)
		switch {
		case len(fields) != 2:
			return nil, fmt.Errorf("%s:%d: want \"IMPORTPATH TestName  # why\", got %q", path, n, line)
		case !ok || strings.TrimSpace(why) == "":
			return nil, fmt.Errorf("%s:%d: %s %s has no reason: say after a # why it may skip in CI", path, n, fields[0], fields[1])
		}
		a.entries[[2]string{fields[0], fields[1]}] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

func (a *allowList) allows(s skip) bool { return a.entries[[2]string{s.pkg, s.test}] }
