package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// cudnnHeaderLibrary judges a cuDNN header against the library programs
// load. NVIDIA's archive install is "copy include/cudnn*.h and
// lib/libcudnn* into the toolkit": a copy of the header without the
// libraries (or over a packaged cuDNN of another release that the loader
// finds first) leaves a header that promises one release and a library
// of another. Builds against the header then fail at run time ("cuDNN
// compiled (7401) and runtime (7102) versions mismatch"), and every
// check of the header's version is misled.
func (d *doctor) cudnnHeaderLibrary() {
	ins := d.obs.CuDNN.Installs
	for _, h := range ins {
		if h.Header == "" || len(h.Libraries) > 0 {
			continue
		}
		hv, err := version.Parse(h.Version)
		if err != nil {
			continue
		}
		tree := treeOfCuDNN(h.Header)
		c := Check{ID: "cudnn.header-library:" + h.Header, Group: GroupCuDNN}
		c.Evidence = []string{fmt.Sprintf("%s: cuDNN %s, and no library of that release beside it", h.Header, h.Version)}
		// The library that wins: the loader's resolution of the header's
		// soname, else the other installs' libraries of that major.
		soname := fmt.Sprintf("libcudnn.so.%d", hv.Major())
		var picked []string
		var pickedVersion string
		for _, r := range d.obs.Loader.Consumers {
			for _, l := range r.Libraries {
				if l.Soname != soname || l.Path == "" || slices.Contains(picked, l.Path) {
					continue
				}
				picked = append(picked, l.Path)
				if pickedVersion == "" {
					pickedVersion = l.Version
				}
				c.Evidence = append(c.Evidence, fmt.Sprintf("the loader resolves %s to %s", soname, libText(l)))
			}
		}
		// Libraries of the header's major first; without any, those of
		// another major (a stale cudnn.h of 5 beside cuDNN 6): a build
		// against the header then fails to link or load.
		var others []facts.CuDNNInstall
		for _, sameMajor := range []bool{true, false} {
			for _, o := range ins {
				if len(o.Libraries) == 0 || o.Version == h.Version {
					continue
				}
				ov, err := version.Parse(o.Version)
				if err != nil || (ov.Major() == hv.Major()) != sameMajor {
					continue
				}
				others = append(others, o)
				c.Evidence = append(c.Evidence, fmt.Sprintf("%s: cuDNN %s", strings.Join(o.Libraries, ", "), o.Version))
				if pickedVersion == "" {
					pickedVersion = o.Version
				}
			}
			if len(others) > 0 || pickedVersion != "" {
				break
			}
		}
		if len(others) == 0 && pickedVersion == "" {
			// A header alone, with no library at all: the cudnn checks
			// and the loader's report a missing library already.
			continue
		}
		if pv := threePartVersion(pickedVersion); pv == h.Version {
			continue
		}
		c.Status = Problem
		c.Summary = fmt.Sprintf("The cuDNN header %s says %s, but the library programs load is cuDNN %s: the header was copied without its libraries, so builds against it fail at run time (\"cuDNN compiled %s and runtime %s versions mismatch\")",
			h.Header, h.Version, orUnknown(pickedVersion), cudnnNumber(h.Version), cudnnNumber(pickedVersion))
		var stale []string
		for _, o := range others {
			stale = append(stale, o.Libraries...)
		}
		text := fmt.Sprintf("Copy the header and the libraries of one cuDNN release together: from the cuDNN %s archive, both include/cudnn*.h into %s/include and lib/libcudnn* (cp -P, which keeps the soname links) into %s, then run ldconfig", h.Version, tree, libDirOf(tree))
		if len(stale) > 0 {
			text += fmt.Sprintf("; or remove the header and use cuDNN %s, whose libraries are %s", others[0].Version, strings.Join(stale, ", "))
		}
		text += ". With gpuenv, a packaged cuDNN brings header and libraries of one release:"
		c.Fix = &Fix{Text: text, Spec: fmt.Sprintf("cudnn {\n  version = \"%s.*\"\n}", hv.Trunc(2)), Commands: []string{"ldconfig"}}
		d.add(c)
	}
}

// treeOfCuDNN is the install tree of a header: the toolkit directory for
// one under /usr/local/cuda*, else /usr.
func treeOfCuDNN(header string) string {
	dir := path.Dir(header)
	if strings.HasPrefix(dir, "/usr/include") {
		return "/usr"
	}
	if i := strings.Index(dir, "/targets/"); i >= 0 {
		return dir[:i]
	}
	return strings.TrimSuffix(dir, "/include")
}

func libDirOf(tree string) string {
	if tree == "/usr" {
		return "/usr/lib/x86_64-linux-gnu"
	}
	return tree + "/lib64"
}

// threePartVersion is "7.1.2" of "7.1.2" or "7.1.2.x".
func threePartVersion(v string) string {
	p := strings.Split(v, ".")
	if len(p) > 3 {
		p = p[:3]
	}
	return strings.Join(p, ".")
}

// cudnnNumber is CUDNN_VERSION as cuDNN 7 and 8 print it: 7.4.1 is 7401
// (major*1000 + minor*100 + patch); cuDNN 9 counts major*10000.
func cudnnNumber(v string) string {
	pv, err := version.Parse(v)
	if err != nil || len(pv.Parts()) < 3 {
		return v
	}
	mul := uint64(1000)
	if pv.Major() >= 9 {
		mul = 10000
	}
	return fmt.Sprint(pv.Major()*mul + pv.Parts()[1]*100 + pv.Parts()[2])
}
