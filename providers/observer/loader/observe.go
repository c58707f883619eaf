// Package loader models the dynamic loader on a root from its files: for
// each framework in each Python environment, for the CUDA toolkit and
// for native programs named to it, the sonames each needs (from their
// ELF dynamic sections when the files are real objects, from the
// framework's known build otherwise) and the file ld.so takes for each, in
// ld.so's own order: DT_RPATH (when the object has no DT_RUNPATH),
// LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache, the default
// directories. What each file shadows is kept, so that doctor can tell an
// old CUDA library on LD_LIBRARY_PATH from the one a wheel brings.
package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/ldcache"
	"github.com/gpuenv/gpuenv/providers/observer/system"
	"github.com/gpuenv/gpuenv/spec/version"
)

// CachePath is the loader's cache.
const CachePath = "/etc/ld.so.cache"

// Options are what the model needs besides the observation.
type Options struct {
	// Programs are native programs, as paths inside the root, whose
	// libraries are resolved too.
	Programs []string
	// Session holds the variables of the environment gpuenv was started
	// from; only its LD_LIBRARY_PATH is used. Leave it empty when the
	// root is not this machine's.
	Session []facts.Assignment
}

// maxObjects bounds how many ELF objects one consumer's closure reads.
const maxObjects = 64

// Observe models the loader for obs's Python environments, toolkit and
// opts.Programs. obs must hold the environment, toolkits, Python
// environments and OS already.
func Observe(h *host.Host, obs *facts.Observation, opts Options) (facts.Loader, []facts.Warning) {
	r := &resolver{h: h, obs: obs, exists: map[string]bool{}, dirs: map[string][2]bool{}, objects: map[string]objectRead{}, reals: map[string]string{}, wheels: map[string][2]string{},
		listings: map[string]map[string]bool{}, done: map[string]facts.ResolvedLibrary{}}
	r.osArch = rootArch(h, obs)
	r.arch = ldcache.ArchFlag(r.osArch)
	var warns []facts.Warning
	out := facts.Loader{Cache: facts.LoaderCache{Path: CachePath}, Consumers: []facts.LoaderResolution{}}
	switch data, err := h.ReadFile(CachePath); {
	case err == nil:
		out.Cache.Present = true
		c, perr := ldcache.Parse(data)
		if perr != nil {
			out.Cache.Error = perr.Error()
			warns = append(warns, facts.Warning{Path: CachePath, Message: perr.Error()})
			break
		}
		r.cache = c
		out.Cache.Entries = len(c.Entries)
		r.cacheDirs = map[string]bool{}
		for _, d := range c.Dirs() {
			r.cacheDirs[d] = true
		}
	case errors.Is(err, fs.ErrNotExist):
		out.Cache.Simulated = true
	default:
		warns = append(warns, facts.Warning{Path: CachePath, Message: err.Error()})
	}
	for _, lp := range obs.Environment.LoaderPaths {
		r.confDirs = append(r.confDirs, facts.SearchDir{Dir: path.Clean(lp.Dir), From: lp.File})
	}
	r.defaults = defaultDirs(obs.OS.Family, r.osArch)
	r.libPath = LibraryPath(obs.Environment.Variables, opts.Session)
	out.LibraryPath = r.libPath
	if out.LibraryPath == nil {
		out.LibraryPath = []facts.SearchDir{}
	}

	for _, env := range obs.Python {
		for _, fw := range env.Frameworks {
			if fw.CPUOnly || fw.CUDA == "" {
				continue
			}
			if c, ok := r.framework(env, fw); ok {
				out.Consumers = append(out.Consumers, c)
			}
		}
	}
	if c, ok := r.toolkit(); ok {
		out.Consumers = append(out.Consumers, c)
	}
	// Every CUDA program loads the driver's libcuda.so.1 by name, with no
	// RUNPATH of its own: which file that is matters whatever the
	// framework.
	drv := facts.LoaderResolution{Kind: "driver", Subject: "libcuda.so.1", NeededFrom: "every CUDA program (the runtime dlopens it)"}
	r.driver(&drv)
	out.Consumers = append(out.Consumers, drv)
	for _, p := range opts.Programs {
		c, err := r.program(p)
		if err != nil {
			warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
			continue
		}
		out.Consumers = append(out.Consumers, c)
	}
	out.Cache.Uncached = r.uncached
	return out, warns
}

// triplets are Debian's multiarch directory names.
var triplets = map[string]string{"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu", "ppc64le": "powerpc64le-linux-gnu"}

// rootArch is the root's architecture as uname -m names it: the kernel's
// (system.Observe), else dpkg's native architecture, else the machine of
// the root's shell, else the one multiarch library directory it has. It
// is the root's, not gpuenv's: an aarch64 image inspected from an x86_64
// machine has aarch64 libraries.
func rootArch(h *host.Host, obs *facts.Observation) string {
	if obs.OS.Arch != "" {
		return obs.OS.Arch
	}
	switch obs.PackageIndexes.Architecture {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "ppc64el":
		return "ppc64le"
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		if o, err := readObject(h, p); err == nil {
			if a := system.MachineArch(o.machine); a != "" {
				return a
			}
		}
	}
	found := ""
	for a, t := range triplets {
		if fi, err := h.Stat("/usr/lib/" + t); err == nil && fi.IsDir() {
			if found != "" {
				return ""
			}
			found = a
		}
	}
	return found
}

// defaultDirs are ld.so's built-in directories: the multiarch ones on
// Debian's glibc, lib64 on RPM systems, then /lib and /usr/lib.
func defaultDirs(family, arch string) []string {
	triplet := triplets[arch]
	if family == "rpm" {
		return []string{"/lib64", "/usr/lib64"}
	}
	var out []string
	if triplet != "" {
		out = append(out, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(out, "/lib", "/usr/lib")
}

// libDir is what $LIB expands to.
func libDir(family, arch string) string {
	if family == "rpm" {
		return "lib64"
	}
	if t := triplets[arch]; t != "" {
		return "lib/" + t
	}
	return "lib"
}

// LibraryPath is LD_LIBRARY_PATH as a program gets it: the session's
// directories first (on "/", the shell gpuenv runs in), then those the
// login configuration sets, in the order a login shell applies
// /etc/environment and /etc/profile.d. The session comes first but does
// not replace the files: under sudo, which drops LD_LIBRARY_PATH, the
// user's own login still gets them. Systemd's DefaultEnvironment= is for
// services and is left out.
func LibraryPath(files, session []facts.Assignment) []facts.SearchDir {
	var out []facts.SearchDir
	seen := map[string]bool{}
	add := func(v, from string) {
		for _, d := range strings.Split(v, ":") {
			d = strings.TrimSpace(d)
			if d == "" || !path.IsAbs(d) {
				continue
			}
			d = path.Clean(d)
			if !seen[d] {
				seen[d] = true
				out = append(out, facts.SearchDir{Dir: d, From: from})
			}
		}
	}
	for _, a := range session {
		if a.Name == "LD_LIBRARY_PATH" {
			add(a.Value, "this session's environment")
		}
	}
	// Each assignment is applied in turn: a reference to the variable
	// stands for its value so far.
	type part struct{ dir, from string }
	var cur []part
	for _, a := range files {
		if a.Name != "LD_LIBRARY_PATH" || strings.HasPrefix(a.File, "/etc/systemd/") {
			continue
		}
		from := a.File
		if a.Line > 0 {
			from = fmt.Sprintf("%s:%d", a.File, a.Line)
		}
		var next []part
		for _, piece := range splitExpanding(a.Value) {
			if piece == "$LD_LIBRARY_PATH" {
				next = append(next, cur...)
				continue
			}
			next = append(next, part{piece, from})
		}
		cur = next
	}
	for _, p := range cur {
		add(p.dir, p.from)
	}
	return out
}

// splitExpanding splits a shell value on colons, turning every expansion
// of LD_LIBRARY_PATH ($LD_LIBRARY_PATH, ${LD_LIBRARY_PATH},
// ${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}) into the token
// "$LD_LIBRARY_PATH" and dropping other expansions, whose values gpuenv
// does not know.
func splitExpanding(v string) []string {
	var out []string
	var b strings.Builder
	// unknown is set inside an entry that began with another variable:
	// the rest of it ("$CUDA_HOME/lib") is relative to a value gpuenv
	// does not know.
	unknown := false
	flush := func() {
		if b.Len() > 0 && !unknown {
			out = append(out, b.String())
		}
		b.Reset()
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ':':
			flush()
			unknown = false
		case c == '$':
			flush()
			j, name := i+1, ""
			if j < len(v) && v[j] == '{' {
				depth := 0
				k := j
				for ; k < len(v); k++ {
					if v[k] == '{' {
						depth++
					} else if v[k] == '}' {
						if depth--; depth == 0 {
							break
						}
					}
				}
				inner := v[j+1 : min(k, len(v))]
				name = inner
				if n := strings.IndexAny(inner, ":-+=?"); n >= 0 {
					name = inner[:n]
				}
				i = k
			} else {
				k := j
				for k < len(v) && (v[k] == '_' || v[k] >= 'A' && v[k] <= 'Z' || v[k] >= 'a' && v[k] <= 'z' || v[k] >= '0' && v[k] <= '9') {
					k++
				}
				name = v[j:k]
				i = k - 1
			}
			if name == "LD_LIBRARY_PATH" {
				out = append(out, "$LD_LIBRARY_PATH")
			} else {
				unknown = true
			}
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return out
}

// extraDirs are where GPU libraries sit outside any search order: every
// Python environment's NVIDIA wheels and framework library directories
// (those observed, and virtual environments under /opt and /usr/local
// that nobody named), and the toolkits' library directories.
func extraDirs(h *host.Host, obs *facts.Observation) []string {
	var out []string
	for _, g := range []string{"/opt/*/lib/python3*/site-packages/nvidia/*/lib", "/usr/local/lib/python3*/dist-packages/nvidia/*/lib"} {
		m, _ := h.Glob(g)
		out = append(out, m...)
	}
	for _, env := range obs.Python {
		for _, site := range env.SitePackages {
			m, _ := h.Glob(path.Join(site, "nvidia", "*", "lib"))
			out = append(out, m...)
		}
		for _, fw := range env.Frameworks {
			out = append(out, path.Join(fw.Location, "lib"))
		}
	}
	for _, tk := range obs.CUDA.Toolkits {
		if tk.Layout == "distro" {
			continue
		}
		out = append(out, path.Join(tk.Path, "lib64"), path.Join(tk.Path, "compat"))
		m, _ := h.Glob(path.Join(tk.Path, "targets", "*", "lib"))
		out = append(out, m...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ownDirs are a framework's own library directories: the NVIDIA wheels
// beside it and its lib directory.
func (r *resolver) ownDirs(fw facts.Framework) []facts.SearchDir {
	site := path.Dir(fw.Location)
	var out []facts.SearchDir
	m, _ := r.h.Glob(path.Join(site, "nvidia", "*", "lib"))
	for _, d := range m {
		out = append(out, facts.SearchDir{Dir: d, From: fw.Location})
	}
	if fi, err := r.h.Stat(path.Join(fw.Location, "lib")); err == nil && fi.IsDir() {
		out = append(out, facts.SearchDir{Dir: path.Join(fw.Location, "lib"), From: fw.Location})
	}
	return out
}

// frameworkObject is the ELF file whose needs are a framework's.
func frameworkObject(fw facts.Framework) string {
	switch fw.Name {
	case "pytorch":
		return path.Join(fw.Location, "lib", "libtorch_cuda.so")
	case "tensorflow":
		return path.Join(fw.Location, "libtensorflow_framework.so.2")
	}
	return ""
}

func (r *resolver) framework(env facts.PythonEnv, fw facts.Framework) (facts.LoaderResolution, bool) {
	c := facts.LoaderResolution{Kind: "framework", Python: env.Interpreter, Framework: fw.Name, Subject: fw.Location}
	rel, err1 := version.Parse(fw.Version)
	cuda, err2 := version.Parse(fw.CUDA)
	var row compat.FrameworkLibraries
	haveRow := false
	if err1 == nil && err2 == nil {
		if rw, err := compat.FrameworkLibrariesFor(fw.Name, rel, cuda); err == nil {
			row, haveRow = rw, true
		}
	}
	own := r.ownDirs(fw)
	if obj := frameworkObject(fw); obj != "" {
		if o, err := r.object(obj); err == nil {
			c.Object, c.NeededFrom = obj, "elf"
			var dl []string
			if haveRow && row.Load == "dlopen" {
				// What the build dlopens its ELF does not name.
				dl = row.Needs
				c.NeededFrom = "elf, and " + row.Source.String() + " for what it dlopens"
			}
			r.closure(&c, obj, o, append(dl, "libcuda.so.1"))
			return c, true
		}
	}
	if !haveRow {
		return c, false
	}
	c.NeededFrom = row.Source.String()
	var steps []step
	switch row.OwnDirs {
	case "rpath":
		c.RPath = dirs(own)
		steps = []step{{ViaRPath, own}, {ViaLibraryPath, r.libPath}}
	case "runpath":
		c.RunPath = dirs(own)
		steps = []step{{ViaLibraryPath, r.libPath}, {ViaRunPath, own}}
	default:
		steps = []step{{ViaLibraryPath, r.libPath}}
	}
	loaded := map[string]facts.ResolvedLibrary{}
	for _, n := range row.Needs {
		res := r.resolve(n, steps)
		r.note(&res)
		loaded[n] = res
		c.Needed = append(c.Needed, n)
		c.Libraries = append(c.Libraries, res)
	}
	for _, ch := range row.Chained {
		if _, done := loaded[ch.Needed]; done {
			continue
		}
		needer, ok := loaded[ch.Needer]
		if !ok || needer.Path == "" {
			continue
		}
		// The needer's RUNPATH is its own directory and, in NVIDIA's
		// wheels, the sibling wheels' ($ORIGIN/../../nvjitlink/lib): the
		// framework's directories, searched after LD_LIBRARY_PATH.
		run := append([]facts.SearchDir{{Dir: path.Dir(needer.Path), From: needer.Path}}, own...)
		res := r.resolve(ch.Needed, []step{{ViaLibraryPath, r.libPath}, {ViaRunPath, run}})
		res.Needer = ch.Needer
		r.note(&res)
		loaded[ch.Needed] = res
		c.Needed = append(c.Needed, ch.Needed)
		c.Libraries = append(c.Libraries, res)
	}
	r.driver(&c)
	return c, true
}

// driver resolves libcuda.so.1, which the CUDA runtime dlopens by name
// (its own RUNPATH holds no driver directory).
func (r *resolver) driver(c *facts.LoaderResolution) {
	if slices.Contains(c.Needed, "libcuda.so.1") {
		return
	}
	res := r.resolve("libcuda.so.1", []step{{ViaLibraryPath, r.libPath}})
	res.Needer = "the CUDA runtime (dlopen)"
	r.note(&res)
	c.Needed = append(c.Needed, "libcuda.so.1")
	c.Libraries = append(c.Libraries, res)
}

// note adds where an unfound library is on the root after all.
func (r *resolver) note(res *facts.ResolvedLibrary) {
	if res.Path == "" {
		res.Elsewhere = r.findElsewhere(res.Soname, *res)
	}
}

func dirs(sd []facts.SearchDir) []string {
	out := make([]string, len(sd))
	for i, d := range sd {
		out[i] = d.Dir
	}
	return out
}

// toolkit resolves the CUDA runtime of the toolkit programs build with
// (/usr/local/cuda's, else the newest), as a program nvcc links finds it:
// without RUNPATH.
func (r *resolver) toolkit() (facts.LoaderResolution, bool) {
	var tk *facts.Toolkit
	for i, t := range r.obs.CUDA.Toolkits {
		if t.Layout == "distro" {
			continue
		}
		if t.Path == r.obs.CUDA.Default {
			tk = &r.obs.CUDA.Toolkits[i]
			break
		}
		if tk == nil || newer(t.Version, tk.Version) {
			tk = &r.obs.CUDA.Toolkits[i]
		}
	}
	if tk == nil {
		return facts.LoaderResolution{}, false
	}
	soname := CUDARuntimeSoname(tk.Version)
	if soname == "" {
		return facts.LoaderResolution{}, false
	}
	c := facts.LoaderResolution{Kind: "toolkit", Subject: tk.Path, NeededFrom: "the toolkit's version " + tk.Version, Needed: []string{soname}}
	res := r.resolve(soname, []step{{ViaLibraryPath, r.libPath}})
	r.note(&res)
	c.Libraries = append(c.Libraries, res)
	r.driver(&c)
	return c, true
}

func newer(a, b string) bool {
	va, err1 := version.Parse(a)
	vb, err2 := version.Parse(b)
	return err1 == nil && (err2 != nil || va.Compare(vb) > 0)
}

// CUDARuntimeSoname is the soname of the CUDA runtime of toolkit release
// v: libcudart.so.<major> from CUDA 12, libcudart.so.11.0 for every CUDA
// 11, libcudart.so.<major>.<minor> before.
func CUDARuntimeSoname(v string) string {
	pv, err := version.Parse(v)
	if err != nil || len(pv.Parts()) < 2 {
		return ""
	}
	switch m := pv.Major(); {
	case m >= 12:
		return fmt.Sprintf("libcudart.so.%d", m)
	case m == 11:
		return "libcudart.so.11.0"
	default:
		return fmt.Sprintf("libcudart.so.%d.%d", m, pv.Minor())
	}
}

// program resolves a native program's libraries from its ELF file.
func (r *resolver) program(p string) (facts.LoaderResolution, error) {
	o, err := r.object(p)
	if err != nil {
		return facts.LoaderResolution{}, fmt.Errorf("not a readable ELF program: %w", err)
	}
	c := facts.LoaderResolution{Kind: "program", Subject: p, Object: p, NeededFrom: "elf"}
	r.closure(&c, p, o, nil)
	return c, nil
}

// closure resolves obj's DT_NEEDED and, for each library found that is an
// ELF object, its own, as ld.so loads them breadth first; extra are
// sonames the object dlopens. A soname is loaded once: the first
// resolution serves every later need.
func (r *resolver) closure(c *facts.LoaderResolution, objPath string, o object, extra []string) {
	type pending struct {
		soname, needer string
		steps          []step
	}
	lib := libDir(r.obs.OS.Family, r.osArch)
	stepsFor := func(p string, o object, inherited []facts.SearchDir) ([]step, []facts.SearchDir) {
		origin := path.Dir(p)
		run := asDirs(expand(o.runpath, origin, lib), p)
		if len(run) > 0 {
			return []step{{ViaLibraryPath, r.libPath}, {ViaRunPath, run}}, nil
		}
		// Without RUNPATH, the object's RPATH and those of the objects
		// that loaded it come first.
		rp := append(asDirs(expand(o.rpath, origin, lib), p), inherited...)
		return []step{{ViaRPath, rp}, {ViaLibraryPath, r.libPath}}, rp
	}
	rootSteps, rootRPath := stepsFor(objPath, o, nil)
	if p := expand(o.runpath, path.Dir(objPath), lib); len(p) > 0 {
		c.RunPath = p
	}
	if p := expand(o.rpath, path.Dir(objPath), lib); len(p) > 0 {
		c.RPath = p
	}
	queue := make([]pending, 0, len(o.needed)+len(extra))
	for _, n := range o.needed {
		queue = append(queue, pending{n, "", rootSteps})
	}
	for _, n := range extra {
		queue = append(queue, pending{n, "", rootSteps})
	}
	seen := map[string]bool{}
	read := 0
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		if seen[q.soname] {
			continue
		}
		seen[q.soname] = true
		res := r.resolve(q.soname, q.steps)
		res.Needer = q.needer
		r.note(&res)
		c.Needed = append(c.Needed, q.soname)
		c.Libraries = append(c.Libraries, res)
		if res.Path == "" || read >= maxObjects {
			continue
		}
		dep, err := r.object(res.Path)
		read++
		if err != nil {
			continue
		}
		steps, _ := stepsFor(res.Path, dep, rootRPath)
		for _, n := range dep.needed {
			if !seen[n] {
				queue = append(queue, pending{n, q.soname, steps})
			}
		}
	}
}

func asDirs(ds []string, from string) []facts.SearchDir {
	out := make([]facts.SearchDir, len(ds))
	for i, d := range ds {
		out[i] = facts.SearchDir{Dir: d, From: from}
	}
	return out
}
