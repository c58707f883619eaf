package loader

import (
	"debug/elf"
	"path"
	"strings"

	"github.com/gpuenv/gpuenv/providers/host"
)

// object is what the loader reads from one ELF file's dynamic section.
type object struct {
	needed  []string
	runpath []string
	rpath   []string
	machine elf.Machine
}

// readObject reads p's DT_NEEDED, DT_RUNPATH and DT_RPATH. It fails for
// a file that is not an ELF object, which is how a fixture's stand-in
// files are told from real ones.
func readObject(h *host.Host, p string) (object, error) {
	f, err := h.Open(p)
	if err != nil {
		return object{}, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return object{}, err
	}
	defer ef.Close()
	var o object
	o.machine = ef.Machine
	if o.needed, err = ef.DynString(elf.DT_NEEDED); err != nil {
		return object{}, err
	}
	run, _ := ef.DynString(elf.DT_RUNPATH)
	rp, _ := ef.DynString(elf.DT_RPATH)
	o.runpath = splitPath(run)
	o.rpath = splitPath(rp)
	return o, nil
}

func splitPath(entries []string) []string {
	var out []string
	for _, e := range entries {
		for _, d := range strings.Split(e, ":") {
			if d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}

// expand replaces the dynamic string tokens ld.so expands in RUNPATH and
// RPATH: $ORIGIN (the object's directory) and $LIB (the ABI's library
// directory name). An entry with a token it cannot expand ($PLATFORM)
// or that stays relative is dropped, as ld.so ignores it for a
// privileged program and gpuenv cannot know the working directory.
func expand(dirs []string, origin, lib string) []string {
	var out []string
	for _, d := range dirs {
		d = strings.NewReplacer("${ORIGIN}", origin, "$ORIGIN", origin, "${LIB}", lib, "$LIB", lib).Replace(d)
		if strings.Contains(d, "$") || !path.IsAbs(d) {
			continue
		}
		out = append(out, path.Clean(d))
	}
	return out
}
