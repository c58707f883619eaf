// Package cudnn observes cuDNN installs: the version header
// (cudnn_version.h, or cudnn.h before cuDNN 8), the libcudnn*.so.X.Y.Z
// library files, and the package that put them there. A header and
// libraries of the same version under the same tree (/usr, or one
// /usr/local/cuda-X.Y toolkit into which a tarball was copied) are one
// install.
package cudnn

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// triplets are the Debian multiarch directories cuDNN's packages use.
// They are named rather than globbed: listing /usr/lib or /usr/include
// on a real system reads hundreds of entries to find these few.
var triplets = []string{"x86_64-linux-gnu", "aarch64-linux-gnu", "powerpc64le-linux-gnu"}

// headerGlobs are where cuDNN's version header is looked for, in order: a
// link (Debian alternatives' /usr/include/cudnn_version.h) and the file it
// leads to count once.
var headerGlobs = func() []string {
	var g []string
	for _, t := range triplets {
		for _, m := range majors {
			g = append(g, "/usr/include/"+t+"/cudnn_version_v"+m+".h")
		}
		g = append(g, "/usr/include/"+t+"/cudnn_version.h")
	}
	g = append(g,
		"/usr/include/cudnn_version.h",
		"/usr/local/cuda*/include/cudnn_version.h",
		"/usr/local/cuda*/targets/*/include/cudnn_version.h",
	)
	// Before cuDNN 8 the version was in cudnn.h itself; from 8 on cudnn.h
	// includes cudnn_version.h and defines no version.
	for _, t := range triplets {
		for _, m := range majors {
			g = append(g, "/usr/include/"+t+"/cudnn_v"+m+".h")
		}
	}
	return append(g, "/usr/include/cudnn.h", "/usr/local/cuda*/include/cudnn.h")
}()

// libraryDirs are the directories searched for libcudnn*.so.X.Y.Z.
// They are probed by name rather than listed: /usr/lib/x86_64-linux-gnu
// holds thousands of files on a real system, and reading it whole would
// cost more than the rest of cuDNN's observation.
var libraryDirs = func() []string {
	var d []string
	for _, t := range triplets {
		d = append(d, "/usr/lib/"+t)
	}
	return append(d, "/usr/lib64", "/usr/lib", "/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/*/lib")
}()

// Observe finds cuDNN installs in h. pkgs is the package database as
// packages.Observe read it: it names the package of an install under /usr
// and the CUDA major it was built for, and a cuDNN package whose files are
// missing is reported as an install without header or libraries (plus a
// warning). Installs are sorted by tree and version.
func Observe(h *host.Host, pkgs facts.Packages) (facts.CuDNN, []facts.Warning) {
	var warns []facts.Warning
	installs := make(map[string]*facts.CuDNNInstall)
	get := func(tree, version string) *facts.CuDNNInstall {
		k := tree + "\x00" + version
		in := installs[k]
		if in == nil {
			in = &facts.CuDNNInstall{Version: version, CUDAMajor: cudaMajorOfTree(tree)}
			installs[k] = in
		}
		return in
	}

	seen := make(map[string]bool)
	versionDirs := make(map[string]bool) // directories with a cudnn_version*.h
	toolkits := toolkitDirs(h)
	for _, g := range headerGlobs {
		matches := glob(h, g, toolkits)
		for _, m := range matches {
			real, err := h.EvalSymlinks(m)
			if err != nil || seen[real] {
				continue
			}
			seen[real] = true
			old := oldHeader.MatchString(path.Base(real))
			if old && versionDirs[path.Dir(real)] {
				continue
			}
			data, err := h.ReadFile(real)
			if err != nil {
				warns = append(warns, facts.Warning{Path: real, Message: err.Error()})
				continue
			}
			v, err := ParseHeader(data)
			if err != nil {
				if old && errors.Is(err, errNoDefines) {
					// cuDNN 8's own cudnn.h, whose version header lies
					// elsewhere.
					continue
				}
				warns = append(warns, facts.Warning{Path: real, Message: err.Error()})
				continue
			}
			if !old {
				versionDirs[path.Dir(real)] = true
			}
			in := get(treeOf(real), v)
			if in.Header == "" {
				in.Header = real
			}
		}
	}

	for _, g := range libraryDirs {
		dirs := glob(h, g, toolkits)
		for _, d := range dirs {
			real, err := h.EvalSymlinks(d)
			if err != nil || seen[real] {
				continue
			}
			seen[real] = true
			for _, l := range probeLibraries(h, real) {
				_, v, _ := strings.Cut(path.Base(l), ".so.")
				in := get(treeOf(real), v)
				in.Libraries = append(in.Libraries, l)
			}
		}
	}

	// Tie installs under /usr to the runtime package of the same version.
	var runtimePkgs []facts.Package
	for _, p := range pkgs.Packages {
		if isRuntimePackage(p.Name) && p.State != facts.StateConfigFiles && p.State != facts.StateNotInstalled {
			runtimePkgs = append(runtimePkgs, p)
		}
	}
	for _, p := range runtimePkgs {
		v := threeParts(pkgdb.Upstream(p.Version))
		in := installs["/usr\x00"+v]
		if in == nil {
			warns = append(warns, facts.Warning{Message: fmt.Sprintf("package %s %s is installed but neither its header nor its libraries were found", p.Name, p.Version)})
			in = get("/usr", v)
		}
		if in.Package != "" {
			continue
		}
		in.Package, in.PackageVersion = p.Name, p.Version
		if m := cudaMajorOfPackage(p); m != "" {
			in.CUDAMajor = m
		}
	}

	keys := make([]string, 0, len(installs))
	for k := range installs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := facts.CuDNN{Installs: []facts.CuDNNInstall{}}
	for _, k := range keys {
		in := installs[k]
		sort.Strings(in.Libraries)
		out.Installs = append(out.Installs, *in)
	}
	return out, warns
}

// toolkitPrefix begins the patterns that look inside CUDA toolkits.
const toolkitPrefix = "/usr/local/cuda*/"

// toolkitDirs returns the directories /usr/local/cuda* lead to, each
// once. NVIDIA's packages make /usr/local/cuda and /usr/local/cuda-12
// links to /usr/local/cuda-12.4: looking through every name would look
// at the same files three times, and only the paths they lead to are
// reported.
func toolkitDirs(h *host.Host) []string {
	var dirs []string
	seen := make(map[string]bool)
	matches, _ := h.Glob(strings.TrimSuffix(toolkitPrefix, "/"))
	for _, m := range matches {
		if real, err := h.EvalSymlinks(m); err == nil && !seen[real] {
			seen[real] = true
			dirs = append(dirs, real)
		}
	}
	return dirs
}

// glob is h.Glob, but a pattern under toolkitPrefix is matched in each of
// toolkits instead.
func glob(h *host.Host, pattern string, toolkits []string) []string {
	rest, ok := strings.CutPrefix(pattern, toolkitPrefix)
	if !ok {
		matches, _ := h.Glob(pattern)
		return matches
	}
	var matches []string
	for _, dir := range toolkits {
		m, _ := h.Glob(escapeMeta(dir) + "/" + rest)
		matches = append(matches, m...)
	}
	return matches
}

// escapeMeta quotes what path.Match would read as a pattern in s.
func escapeMeta(s string) string {
	if !strings.ContainsAny(s, `*?[\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// majors are the cuDNN major versions probed for; a release's libraries
// carry its major in the soname (libcudnn.so.9).
var majors = []string{"6", "7", "8", "9", "10", "11", "12"}

// components are the libraries a release splits into besides libcudnn
// itself (cuDNN 8's *_infer/*_train, cuDNN 9's sub-libraries).
var components = []string{
	"libcudnn_adv", "libcudnn_cnn", "libcudnn_engines_precompiled", "libcudnn_engines_runtime_compiled",
	"libcudnn_graph", "libcudnn_heuristic", "libcudnn_ops",
	"libcudnn_adv_infer", "libcudnn_adv_train", "libcudnn_cnn_infer", "libcudnn_cnn_train",
	"libcudnn_ops_infer", "libcudnn_ops_train",
}

// probeLibraries finds cuDNN's versioned library files in dir through the
// soname links ldconfig and the packages make (libcudnn.so.9 ->
// libcudnn.so.9.1.0): a handful of lstat calls instead of a directory
// listing. A release whose soname link is missing is not found here; its
// header and package still are.
func probeLibraries(h *host.Host, dir string) []string {
	var out []string
	for _, m := range majors {
		soname := path.Join(dir, "libcudnn.so."+m)
		fi, err := h.Lstat(soname)
		if err != nil {
			continue
		}
		file := soname
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := h.Readlink(soname)
			if err != nil {
				continue
			}
			file = path.Join(dir, path.Base(target))
		}
		_, v, _ := strings.Cut(path.Base(file), ".so.")
		if strings.Count(v, ".") < 2 || !strings.HasPrefix(v, m+".") {
			continue
		}
		for _, name := range append([]string{"libcudnn"}, components...) {
			p := path.Join(dir, name+".so."+v)
			if fi, err := h.Lstat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, p)
			}
		}
	}
	return out
}

var cudaTree = lazyregexp.New(`^/usr/local/cuda(-\d+(\.\d+)*)?(/|$)`)

// treeOf is the install tree a header or library directory belongs to.
func treeOf(p string) string {
	if m := cudaTree.FindString(p); m != "" {
		return strings.TrimSuffix(m, "/")
	}
	return "/usr"
}

// cudaMajorOfTree reads the CUDA major of a toolkit directory's name.
func cudaMajorOfTree(tree string) string {
	rel, ok := strings.CutPrefix(tree, "/usr/local/cuda-")
	if !ok {
		return ""
	}
	major, _, _ := strings.Cut(rel, ".")
	return major
}

// oldHeader matches cudnn.h and Debian's cudnn_v8.h, as opposed to the
// version headers (cudnn_version.h, cudnn_version_v9.h).
var oldHeader = lazyregexp.New(`^cudnn(_v\d+)?\.h$`)

var runtimePackage = lazyregexp.New(`^libcudnn\d+(-cuda-\d+)?$`)

// isRuntimePackage matches the library packages (libcudnn8,
// libcudnn9-cuda-12), not -dev, -headers, -static or -samples.
func isRuntimePackage(name string) bool { return runtimePackage.MatchString(name) }

var (
	cudaInName    = lazyregexp.New(`-cuda-(\d+)$`)
	cudaInVersion = lazyregexp.New(`\+cuda(\d+)(\.\d+)?`)
)

// cudaMajorOfPackage reads the CUDA major from libcudnn9-cuda-12 or from
// a version such as 8.9.7.29-1+cuda12.2.
func cudaMajorOfPackage(p facts.Package) string {
	if m := cudaInName.FindStringSubmatch(p.Name); m != nil {
		return m[1]
	}
	if m := cudaInVersion.FindStringSubmatch(p.Version); m != nil {
		return m[1]
	}
	return ""
}

func threeParts(v string) string {
	v, _, _ = strings.Cut(v, "+")
	parts := strings.SplitN(v, ".", 4)
	if len(parts) > 3 {
		parts = parts[:3]
	}
	return strings.Join(parts, ".")
}

var errNoDefines = errors.New("no CUDNN_MAJOR define")

var define = lazyregexp.New(`(?m)^[ \t]*#[ \t]*define[ \t]+CUDNN_(MAJOR|MINOR|PATCHLEVEL)[ \t]+(\d+)`)

// ParseHeader reads CUDNN_MAJOR, CUDNN_MINOR and CUDNN_PATCHLEVEL from
// cudnn_version.h (or an old cudnn.h) and returns "9.1.0". CUDNN_VERSION
// is not decoded: its formula changed between cuDNN 8 and 9.
func ParseHeader(data []byte) (string, error) {
	got := make(map[string]string, 3)
	for _, m := range define.FindAllSubmatch(data, -1) {
		k := string(m[1])
		if _, dup := got[k]; !dup {
			got[k] = string(m[2])
		}
	}
	switch {
	case got["MAJOR"] == "":
		return "", errNoDefines
	case got["MINOR"] == "" || got["PATCHLEVEL"] == "":
		return "", fmt.Errorf("CUDNN_MAJOR is defined but CUDNN_MINOR or CUDNN_PATCHLEVEL is not: truncated header?")
	}
	return got["MAJOR"] + "." + got["MINOR"] + "." + got["PATCHLEVEL"], nil
}
