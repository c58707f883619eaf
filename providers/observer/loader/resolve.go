package loader

import (
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/ldcache"
)

// The steps of ld.so's search, as ResolvedLibrary.Via names them.
const (
	ViaRPath       = "RPATH"
	ViaLibraryPath = "LD_LIBRARY_PATH"
	ViaRunPath     = "RUNPATH"
	ViaCache       = "ld.so.cache"
	ViaDefault     = "default"
	// ViaUncached marks a file in an ld.so.conf directory that the cache
	// does not list: ld.so never finds it there until ldconfig runs.
	ViaUncached = "ld.so.conf, not in ld.so.cache"
)

// step is one step of the search order with its directories.
type step struct {
	via  string
	dirs []facts.SearchDir
}

// resolver finds sonames as ld.so would on one root.
type resolver struct {
	h   *host.Host
	obs *facts.Observation
	// arch is the root's ABI flag in the cache, osArch its name.
	arch   uint32
	osArch string
	// cache is the parsed /etc/ld.so.cache; nil when the root has none
	// (then confDirs stand in for it) or it could not be read.
	cache     *ldcache.Cache
	cacheDirs map[string]bool
	confDirs  []facts.SearchDir
	libPath   []facts.SearchDir
	defaults  []string
	exists    map[string]bool
	dirs      map[string][2]bool
	// objects remember ELF reads by real path: the CUDA libraries of one
	// environment are read once for every consumer that loads them.
	objects   map[string]objectRead
	reals     map[string]string
	wheels    map[string][2]string
	uncached  []facts.SearchDir
	elsewhere map[string][]string
	extraDirs []string
	// listings hold the names in small directories read whole: a
	// framework's wheel directories hold a file or two each, and one
	// listing answers every soname asked of them.
	listings map[string]map[string]bool
	// done remembers resolutions by soname and search order: the driver's
	// libcuda.so.1 is asked for by every consumer.
	done map[string]facts.ResolvedLibrary
}

// objectRead is one ELF read's outcome.
type objectRead struct {
	o   object
	err error
}

// object reads p's dynamic section, once per file p leads to.
func (r *resolver) object(p string) (object, error) {
	real := r.realPath(p)
	if got, ok := r.objects[real]; ok {
		return got.o, got.err
	}
	o, err := readObject(r.h, real)
	r.objects[real] = objectRead{o, err}
	return o, err
}

// inListedDir reports whether dir, read whole once, holds name.
func (r *resolver) inListedDir(dir, name string) bool {
	set, ok := r.listings[dir]
	if !ok {
		set = map[string]bool{}
		entries, _ := r.h.ReadDir(dir)
		for _, e := range entries {
			set[e.Name()] = true
		}
		r.listings[dir] = set
	}
	return set[name]
}

func (r *resolver) present(p string) bool {
	if ok, seen := r.exists[p]; seen {
		return ok
	}
	_, err := r.h.Stat(p)
	r.exists[p] = err == nil
	return err == nil
}

func (r *resolver) realPath(p string) string {
	if rp, ok := r.reals[p]; ok {
		return rp
	}
	rp, err := r.h.EvalSymlinks(p)
	if err != nil {
		rp = p
	}
	r.reals[p] = rp
	return rp
}

// resolve runs the search order for soname and returns the file that
// wins and those it shadows.
func (r *resolver) resolve(soname string, steps []step) facts.ResolvedLibrary {
	// The key is built in one buffer of the right size: every consumer
	// asks for a dozen sonames, each with the same long search order.
	n := len(soname)
	for _, s := range steps {
		n += 1 + len(s.via)
		for _, d := range s.dirs {
			n += 2 + len(d.Dir) + len(d.From)
		}
	}
	var key strings.Builder
	key.Grow(n)
	key.WriteString(soname)
	for _, s := range steps {
		key.WriteByte(0)
		key.WriteString(s.via)
		for _, d := range s.dirs {
			key.WriteByte(0)
			key.WriteString(d.Dir)
			key.WriteByte(1)
			key.WriteString(d.From)
		}
	}
	if res, ok := r.done[key.String()]; ok {
		res.Shadows = slices.Clone(res.Shadows)
		return res
	}
	res := r.search(soname, steps)
	r.done[key.String()] = res
	return res
}

// smallDir is the size, in bytes of directory data, up to which a
// directory is read whole rather than asked for each name: one listing
// of a toolkit's or a wheel's library directory answers every soname,
// while /usr/lib/<triplet> on a real system holds thousands of files that
// a few lookups cost less than.
const smallDir = 8192

// dirState says whether dir exists and is small, asked once per
// directory: a search order names directories a root may lack (a default
// directory, a configured toolkit that was removed), and every soname
// would otherwise be looked up in each of them.
func (r *resolver) dirState(dir string) (present, small bool) {
	if st, seen := r.dirs[dir]; seen {
		return st[0], st[1]
	}
	fi, err := r.h.Stat(dir)
	present = err == nil && fi.IsDir()
	small = present && fi.Size() <= smallDir
	r.dirs[dir] = [2]bool{present, small}
	return present, small
}

// holds reports whether dir holds name, by the cheaper of a listing and a
// lookup, and returns the joined path.
func (r *resolver) holds(dir, name string) (string, bool) {
	present, small := r.dirState(dir)
	if !present || small && !r.inListedDir(dir, name) {
		return "", false
	}
	p := path.Join(dir, name)
	return p, r.present(p)
}

func (r *resolver) search(soname string, steps []step) facts.ResolvedLibrary {
	out := facts.ResolvedLibrary{Soname: soname}
	seen := map[string]bool{}
	add := func(p, via, from string) {
		real := r.realPath(p)
		if seen[real] {
			return
		}
		seen[real] = true
		c := facts.LibraryCandidate{Path: p, Via: via, From: from}
		if real != p {
			c.Real = real
		}
		c.Version, c.VersionFrom = r.version(p, real, soname)
		if out.Path == "" && via != ViaUncached {
			out.Path, out.Real, out.Version, out.VersionFrom, out.Via, out.From = c.Path, c.Real, c.Version, c.VersionFrom, via, from
			return
		}
		out.Shadows = append(out.Shadows, c)
	}
	for _, s := range steps {
		// The object's own directories are small, and asked for every
		// soname; the others may be the system's largest.
		whole := s.via == ViaRPath || s.via == ViaRunPath
		for _, d := range s.dirs {
			if whole && !r.inListedDir(d.Dir, soname) {
				continue
			}
			if p, ok := r.holds(d.Dir, soname); ok {
				add(p, s.via, d.From)
			}
		}
	}
	r.fromCache(soname, add)
	for _, d := range r.defaults {
		if p, ok := r.holds(d, soname); ok {
			add(p, ViaDefault, "")
		}
	}
	return out
}

// fromCache adds the cache's file for soname; without a cache file, the
// ld.so.conf directories stand in for it, as ldconfig would have filled
// it. Files in configured directories that a present cache lacks are
// added as uncached.
func (r *resolver) fromCache(soname string, add func(p, via, from string)) {
	if r.cache == nil {
		for _, d := range r.confDirs {
			if p, ok := r.holds(d.Dir, soname); ok {
				add(p, ViaCache, d.From)
			}
		}
		return
	}
	if p, ok := r.cache.Lookup(soname, r.arch); ok || r.arch == ldcache.ArchNone && r.lookupAny(soname, &p) {
		add(p, ViaCache, "/etc/ld.so.cache")
		// What the cache finds, ld.so takes; copies in directories
		// ldconfig has not read since matter only when it finds none.
		return
	}
	for _, d := range r.confDirs {
		if r.cacheDirs[d.Dir] {
			continue
		}
		p, ok := r.holds(d.Dir, soname)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(r.uncached, func(u facts.SearchDir) bool { return u.Dir == d.Dir }) {
			r.uncached = append(r.uncached, d)
		}
		add(p, ViaUncached, d.From)
	}
}

// version reads a library's version: from the file name its soname link
// leads to ("libcudart.so.12.4.127"), else from the NVIDIA wheel that
// installed its directory, else from the toolkit it belongs to.
func (r *resolver) version(p, real, soname string) (string, string) {
	base := path.Base(real)
	if v, ok := strings.CutPrefix(base, soname+"."); ok && v != "" {
		return strings.TrimPrefix(soname[strings.Index(soname, ".so")+3:]+"."+v, "."), "file name " + base
	}
	if i := strings.Index(base, ".so."); i > 0 && base != soname && strings.HasPrefix(soname, base[:i+3]) {
		return base[i+4:], "file name " + base
	}
	dir := path.Dir(p)
	if w, ok := r.wheel(dir); ok {
		return w[1], "wheel " + w[0]
	}
	if w, ok := r.cu13Wheel(dir, soname); ok {
		return w[1], "wheel " + w[0]
	}
	for _, tk := range r.obs.CUDA.Toolkits {
		if tk.Layout == "distro" || !strings.HasPrefix(r.realPath(dir)+"/", r.realPath(tk.Path)+"/") {
			continue
		}
		if tk.Runtime != "" {
			return tk.Runtime, "toolkit " + tk.Path
		}
		return tk.Version, "toolkit " + tk.Path
	}
	return "", ""
}

// wheel finds the NVIDIA wheel whose library directory dir is
// (site-packages/nvidia/<lib>/lib): its dist-info name and version.
func (r *resolver) wheel(dir string) ([2]string, bool) {
	if w, ok := r.wheels[dir]; ok {
		return w, w[0] != ""
	}
	var w [2]string
	if path.Base(dir) == "lib" && path.Base(path.Dir(path.Dir(dir))) == "nvidia" {
		lib := path.Base(path.Dir(dir))
		site := path.Dir(path.Dir(path.Dir(dir)))
		matches, _ := r.h.Glob(path.Join(site, "nvidia_"+lib+"_cu*-*.dist-info"))
		if len(matches) > 0 {
			stem := strings.TrimSuffix(path.Base(matches[len(matches)-1]), ".dist-info")
			name, v, _ := strings.Cut(stem, "-")
			w = [2]string{strings.ReplaceAll(name, "_", "-"), v}
		}
	}
	r.wheels[dir] = w
	return w, w[0] != ""
}

// cu13Wheels name the CUDA 13 wheel of each library: from CUDA 13 the
// wheels drop the -cuNN suffix (nvidia-cuda-runtime 13.0.96) and share one
// directory, site-packages/nvidia/cu13/lib, so the soname tells which
// wheel a file came from.
var cu13Wheels = []struct{ prefix, dist string }{
	{"libcudart.so", "nvidia_cuda_runtime"},
	{"libcublasLt.so", "nvidia_cublas"},
	{"libcublas.so", "nvidia_cublas"},
	{"libnvrtc.so", "nvidia_cuda_nvrtc"},
	{"libnvJitLink.so", "nvidia_nvjitlink"},
	{"libcusparse.so", "nvidia_cusparse"},
	{"libcusolver.so", "nvidia_cusolver"},
	{"libcufft.so", "nvidia_cufft"},
	{"libcurand.so", "nvidia_curand"},
	{"libcupti.so", "nvidia_cuda_cupti"},
}

// cu13Wheel finds the wheel of soname in a CUDA 13 wheel directory.
func (r *resolver) cu13Wheel(dir, soname string) ([2]string, bool) {
	if !strings.HasSuffix(dir, "/nvidia/cu13/lib") {
		return [2]string{}, false
	}
	site := path.Dir(path.Dir(path.Dir(dir)))
	for _, w := range cu13Wheels {
		if !strings.HasPrefix(soname, w.prefix) {
			continue
		}
		matches, _ := r.h.Glob(path.Join(site, w.dist+"-13*.dist-info"))
		if len(matches) == 0 {
			return [2]string{}, false
		}
		stem := strings.TrimSuffix(path.Base(matches[len(matches)-1]), ".dist-info")
		name, v, _ := strings.Cut(stem, "-")
		return [2]string{strings.ReplaceAll(name, "_", "-"), v}, true
	}
	return [2]string{}, false
}

// findElsewhere lists files named soname in the directories outside the
// search order where GPU libraries are installed.
func (r *resolver) findElsewhere(soname string, res facts.ResolvedLibrary) []string {
	if r.elsewhere == nil {
		r.elsewhere = map[string][]string{}
		r.extraDirs = extraDirs(r.h, r.obs)
		for _, d := range r.extraDirs {
			entries, err := r.h.ReadDir(d)
			if err != nil {
				continue
			}
			for _, e := range entries {
				if strings.Contains(e.Name(), ".so") {
					r.elsewhere[e.Name()] = append(r.elsewhere[e.Name()], path.Join(d, e.Name()))
				}
			}
		}
	}
	var out []string
	for _, p := range r.elsewhere[soname] {
		real := r.realPath(p)
		if real == r.realPath(res.Path) || slices.ContainsFunc(res.Shadows, func(c facts.LibraryCandidate) bool { return r.realPath(c.Path) == real }) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// lookupAny finds soname for any ABI, when the root's is unknown.
func (r *resolver) lookupAny(soname string, p *string) bool {
	for _, e := range r.cache.Entries {
		if e.Soname == soname {
			*p = e.Path
			return true
		}
	}
	return false
}
