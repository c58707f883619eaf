package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/gpuenv/gpuenv/providers/host"
)

// checkPrograms refuses a path given to flag (--python, --program) that
// names no program inside h's root: observed, it would only be missing
// from the report, and a check that found nothing would pass.
func checkPrograms(h *host.Host, flag string, paths []string) error {
	for _, p := range paths {
		if !path.IsAbs(p) {
			return fmt.Errorf("%s %s: give the absolute path inside --root (such as /opt/venv/bin/python)", flag, esc(p))
		}
		fi, err := h.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s %s: no such file%s", flag, esc(p), insideRoot(h))
		case err != nil:
			return fmt.Errorf("%s %s: cannot be read%s: %s", flag, esc(p), insideRoot(h), plainError(err))
		case fi.IsDir():
			return fmt.Errorf("%s %s: is a directory, not a program%s", flag, esc(p), insideRoot(h))
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s %s: is not a regular file%s", flag, esc(p), insideRoot(h))
		case fi.Mode().Perm()&0o111 == 0:
			return fmt.Errorf("%s %s: is not executable%s", flag, esc(p), insideRoot(h))
		}
	}
	return nil
}

// missingPrograms is checkPrograms for a command that can use a path not
// there yet: it returns those paths, and refuses the rest as
// checkPrograms does.
func missingPrograms(h *host.Host, flag string, paths []string) ([]string, error) {
	var missing, present []string
	for _, p := range paths {
		if _, err := h.Stat(p); path.IsAbs(p) && errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
			continue
		}
		present = append(present, p)
	}
	return missing, checkPrograms(h, flag, present)
}

// checkRoot refuses a --root that is no root file system, before
// anything is observed there: every fact would be missing, and the
// diagnosis would be of a host with nothing on it. A root file system
// says which system it is in os-release(5), which every distribution
// gpuenv knows ships.
func checkRoot(h *host.Host) error {
	if h.Live() {
		return nil
	}
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		if _, err := h.Stat(p); err == nil {
			return nil
		}
	}
	return fmt.Errorf("--root %s is not a root file system: it has neither /etc/os-release nor /usr/lib/os-release, which every system gpuenv manages has. Give the directory that holds the system's /etc and /usr", esc(h.Root()))
}

// insideRoot says where a path was looked for, when the root is not "/".
func insideRoot(h *host.Host) string {
	if h.Live() {
		return ""
	}
	return " inside the root " + esc(h.Root())
}
