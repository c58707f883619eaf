// Package framework observes Python environments and the machine-learning
// frameworks installed in them — PyTorch, TensorFlow and JAX — from their
// installed files alone: no interpreter is started and nothing is
// imported, which would take seconds, need a working CUDA stack, and could
// fail for the very reasons gpuenv is asked to find.
//
// An environment is either an interpreter named by the user or the spec
// (a venv such as /opt/venv/bin/python, or any prefix's bin/python), or
// the system Python, whose site directories are found from the file
// layout (/usr/lib/python3/dist-packages on Debian, /usr/local/lib/
// python3.X/dist-packages for pip there, /usr/lib*/python3.X/site-packages
// on RPM systems).
package framework

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

// Framework names as reported.
const (
	PyTorch    = "pytorch"
	TensorFlow = "tensorflow"
	JAX        = "jax"
)

// systemSiteGlobs are the system Python's site directories, in the order
// Python searches them on Debian and on RPM systems.
var systemSiteGlobs = []string{
	"/usr/local/lib/python3.*/dist-packages",
	"/usr/lib/python3/dist-packages",
	"/usr/local/lib64/python3.*/site-packages",
	"/usr/local/lib/python3.*/site-packages",
	"/usr/lib64/python3.*/site-packages",
	"/usr/lib/python3.*/site-packages",
}

// systemPython is the distribution's interpreter.
const systemPython = "/usr/bin/python3"

// Observe returns one PythonEnv per interpreter in interpreters (paths
// inside the root, in the order given, duplicates once) and, last, the
// system Python when the root has one. An interpreter under /usr is the
// system Python itself and is reported as that one environment. A named
// interpreter that does not exist is a warning and no environment.
//
// pkgs is the package database as packages.Observe read it: a framework in
// the distribution's own site directory is tied to the package that
// installed it (Debian's python3-torch has no pip metadata to say so).
func Observe(h *host.Host, pkgs facts.Packages, interpreters []string) ([]facts.PythonEnv, []facts.Warning) {
	o := &observer{h: h, pkgs: pkgs}
	out := []facts.PythonEnv{}
	seen := make(map[string]bool)
	systemInterp := ""
	for _, in := range interpreters {
		in = path.Clean(in)
		if seen[in] {
			continue
		}
		seen[in] = true
		if !path.IsAbs(in) {
			o.warn(in, "the interpreter's path is not absolute")
			continue
		}
		if _, err := h.Lstat(in); err != nil {
			o.warn(in, fmt.Sprintf("interpreter not found: %v", err))
			continue
		}
		prefix := path.Dir(path.Dir(in))
		if prefix == "/usr" || prefix == "/usr/local" {
			if systemInterp == "" {
				systemInterp = in
			}
			continue
		}
		out = append(out, o.env(in, prefix))
	}
	if env, ok := o.system(systemInterp); ok {
		out = append(out, env)
	}
	return out, o.warns
}

type observer struct {
	h     *host.Host
	pkgs  facts.Packages
	warns []facts.Warning
}

func (o *observer) warn(p, msg string) {
	o.warns = append(o.warns, facts.Warning{Path: p, Message: msg})
}

// env observes the environment of an interpreter outside /usr.
func (o *observer) env(interp, prefix string) facts.PythonEnv {
	env := facts.PythonEnv{Interpreter: interp, Prefix: prefix, SitePackages: []string{}, Frameworks: []facts.Framework{}}
	cfgPath := path.Join(prefix, "pyvenv.cfg")
	if data, err := o.h.ReadFile(cfgPath); err == nil {
		env.Virtual = true
		if v := pyvenvVersion(data); v != "" {
			env.Version = v
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		o.warn(cfgPath, err.Error())
	}
	// The interpreter's own name says which lib/python3.X is its own when
	// a prefix holds several.
	want := ""
	if base := path.Base(interp); strings.HasPrefix(base, "python3.") {
		want = strings.TrimPrefix(base, "python")
	} else if env.Version != "" {
		want = env.Version
	}
	var dirs []string
	for _, lib := range []string{"lib", "lib64"} {
		matches, _ := o.h.Glob(path.Join(prefix, lib, "python3.*", "site-packages"))
		dirs = append(dirs, matches...)
	}
	seen := make(map[string]bool)
	for _, d := range dirs {
		real, err := o.h.EvalSymlinks(d)
		if err != nil || seen[real] {
			continue
		}
		v := strings.TrimPrefix(path.Base(path.Dir(d)), "python")
		if want != "" && v != want {
			continue
		}
		seen[real] = true
		if env.Version == "" {
			env.Version = v
		}
		env.SitePackages = append(env.SitePackages, d)
	}
	if len(env.SitePackages) == 0 {
		o.warn(prefix, "no lib/python3.X/site-packages directory under the interpreter's prefix")
	}
	for _, d := range env.SitePackages {
		env.Frameworks = append(env.Frameworks, o.site(d, false)...)
	}
	return env
}

// pyvenvVersion reads "version = 3.10.12" (venv) or "version_info =
// 3.10.12.final.0" (virtualenv) from pyvenv.cfg, as major.minor.
func pyvenvVersion(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "version", "version_info":
			parts := strings.SplitN(strings.TrimSpace(v), ".", 3)
			if len(parts) >= 2 {
				return parts[0] + "." + parts[1]
			}
		}
	}
	return ""
}

// system observes the distribution's Python. ok is false when the root has
// neither its interpreter nor any of its site directories.
func (o *observer) system(interp string) (facts.PythonEnv, bool) {
	env := facts.PythonEnv{Interpreter: interp, Prefix: "/usr", System: true, SitePackages: []string{}, Frameworks: []facts.Framework{}}
	if env.Interpreter == "" {
		if _, err := o.h.Lstat(systemPython); err == nil {
			env.Interpreter = systemPython
		}
	}
	if env.Interpreter != "" {
		// /usr/bin/python3 -> python3.11 names the version.
		if target, err := o.h.Readlink(env.Interpreter); err == nil {
			if v, ok := strings.CutPrefix(path.Base(target), "python"); ok && strings.HasPrefix(v, "3.") {
				env.Version = v
			}
		} else if v, ok := strings.CutPrefix(path.Base(env.Interpreter), "python"); ok && strings.HasPrefix(v, "3.") {
			env.Version = v
		}
	}
	seen := make(map[string]bool)
	for _, g := range systemSiteGlobs {
		if env.Version != "" {
			// The interpreter's own minor names its directories: no need
			// to list /usr/lib, which is large, to find them.
			g = strings.Replace(g, "python3.*", "python"+env.Version, 1)
		}
		matches, _ := o.h.Glob(g)
		for _, d := range matches {
			real, err := o.h.EvalSymlinks(d)
			if err != nil || seen[real] {
				continue
			}
			if fi, err := o.h.Stat(d); err != nil || !fi.IsDir() {
				continue
			}
			// Another minor's directory belongs to another interpreter.
			if env.Version != "" && strings.Contains(d, "/python3.") && !strings.Contains(d, "/python"+env.Version+"/") {
				continue
			}
			seen[real] = true
			env.SitePackages = append(env.SitePackages, d)
		}
	}
	if env.Interpreter == "" && len(env.SitePackages) == 0 {
		return env, false
	}
	if env.Version == "" {
		for _, d := range env.SitePackages {
			if i := strings.Index(d, "/python3."); i >= 0 {
				v, _, _ := strings.Cut(d[i+len("/python"):], "/")
				env.Version = v
				break
			}
		}
	}
	for _, d := range env.SitePackages {
		env.Frameworks = append(env.Frameworks, o.site(d, true)...)
	}
	return env, true
}

// dist is one installed distribution's metadata directory.
type dist struct {
	dir     string // "torch-2.5.1+cu124.dist-info"
	version string // "2.5.1+cu124"
}

// site observes the frameworks of one site directory. distro is true for
// the system Python's directories, where a distribution package may have
// put a framework.
func (o *observer) site(dir string, distro bool) []facts.Framework {
	entries, err := o.h.ReadDir(dir)
	if err != nil {
		o.warn(dir, err.Error())
		return nil
	}
	// Distribution metadata directories, by normalised project name: the
	// version is in the directory's name, so METADATA need not be read.
	dists := make(map[string]dist)
	present := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		present[name] = true
		for _, suffix := range []string{".dist-info", ".egg-info"} {
			stem, ok := strings.CutSuffix(name, suffix)
			if !ok {
				continue
			}
			project, version, ok := strings.Cut(stem, "-")
			if !ok {
				continue
			}
			project = normalise(project)
			// A dist-info beats an egg-info of the same project.
			if _, had := dists[project]; !had || suffix == ".dist-info" {
				dists[project] = dist{dir: name, version: version}
			}
		}
	}
	var out []facts.Framework
	if present["torch"] {
		out = append(out, o.torch(dir, dists, distro))
	}
	if present["tensorflow"] {
		out = append(out, o.tensorflow(dir, dists, distro))
	}
	if present["jax"] {
		out = append(out, o.jax(dir, dists, present, distro))
	}
	return out
}

// normalise spells a project name as PEP 503 does, with underscores:
// "jax-cuda12-plugin", "jax_cuda12_plugin" and "Jax.Cuda12_Plugin" are one.
func normalise(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "_", ".", "_").Replace(s)
}

// provenance fills Installer and Package: the dist-info's INSTALLER
// ("pip", "uv", "conda"), or, in the system's own site directory, the
// distribution package that owns the framework.
func (o *observer) provenance(fw *facts.Framework, dir string, d dist, haveDist, distro bool, pkgNames ...string) {
	if haveDist && strings.HasSuffix(d.dir, ".dist-info") {
		p := path.Join(dir, d.dir, "INSTALLER")
		if data, err := o.h.ReadFile(p); err == nil {
			fw.Installer = strings.TrimSpace(string(data))
		}
	}
	if fw.Installer != "" || !distro || !strings.HasPrefix(dir, "/usr/lib") {
		return
	}
	// pip never installs into /usr/lib/python3/dist-packages or
	// /usr/lib*/python3.X/site-packages on these systems; the package
	// manager does.
	for _, name := range pkgNames {
		if p, ok := pkgdb.Installed(o.pkgs, name, pkgdb.FilesPresent); ok {
			fw.Package = p.Name
			switch o.pkgs.Manager {
			case facts.DatabaseRPM:
				fw.Installer = "rpm"
			default:
				fw.Installer = "debian"
			}
			return
		}
	}
}

// pipCuDNN is the cuDNN wheel a pip-installed framework loads, when the
// environment has one.
func pipCuDNN(dists map[string]dist) string {
	for _, n := range []string{"nvidia_cudnn_cu13", "nvidia_cudnn_cu12", "nvidia_cudnn_cu11"} {
		if d, ok := dists[n]; ok {
			return d.version
		}
	}
	return ""
}

var (
	pyVersion = lazyregexp.New(`(?m)^__version__\s*(?::[^=]*)?=\s*(?:'([^']*)'|"([^"]*)")`)
	pyCUDA    = lazyregexp.New(`(?m)^cuda\s*(?::[^=]*)?=\s*(None|'[^']*'|"[^"]*")`)
	pyHIP     = lazyregexp.New(`(?m)^hip\s*(?::[^=]*)?=\s*(None|'[^']*'|"[^"]*")`)
	variant   = lazyregexp.New(`^(cu\d+|cpu|rocm[\d.]+|xpu)$`)
)

// TorchVersion is what torch/version.py says.
type TorchVersion struct {
	Version string // __version__
	// CUDA is torch.version.cuda ("12.4"); "" when it is None.
	CUDA string
	// HIP is torch.version.hip, for ROCm builds.
	HIP string
}

// ParseTorchVersion reads torch/version.py.
func ParseTorchVersion(data []byte) (TorchVersion, error) {
	var tv TorchVersion
	m := pyVersion.FindSubmatch(data)
	if m == nil {
		return tv, errors.New("no __version__ assignment")
	}
	tv.Version = string(m[1]) + string(m[2])
	c := pyCUDA.FindSubmatch(data)
	if c == nil {
		return tv, errors.New("no cuda assignment")
	}
	tv.CUDA = pyString(string(c[1]))
	if h := pyHIP.FindSubmatch(data); h != nil {
		tv.HIP = pyString(string(h[1]))
	}
	return tv, nil
}

// pyString turns 'x' or "x" into x, and None into "".
func pyString(s string) string {
	if s == "None" || len(s) < 2 {
		return ""
	}
	return s[1 : len(s)-1]
}

func (o *observer) torch(dir string, dists map[string]dist, distro bool) facts.Framework {
	fw := facts.Framework{Name: PyTorch, Location: path.Join(dir, "torch")}
	d, haveDist := dists["torch"]
	vp := path.Join(dir, "torch", "version.py")
	data, err := o.h.ReadFile(vp)
	if err == nil {
		tv, perr := ParseTorchVersion(data)
		if perr != nil {
			o.warn(vp, perr.Error())
		}
		fw.Version, fw.CUDA = tv.Version, tv.CUDA
		fw.CPUOnly = perr == nil && tv.CUDA == "" && tv.HIP == ""
	} else {
		o.warn(vp, err.Error())
	}
	if fw.Version == "" && haveDist {
		fw.Version = d.version
	}
	if _, local, ok := strings.Cut(fw.Version, "+"); ok && variant.MatchString(local) {
		fw.Variant = local
	}
	if fw.CUDA != "" {
		fw.CuDNN = pipCuDNN(dists)
		o.torchArchs(&fw, dir)
	}
	o.provenance(&fw, dir, d, haveDist, distro, "python3-torch", "python3-torch-cuda", "python3-torch-rocm")
	return fw
}

// BuildInfo is what tensorflow/python/platform/build_info.py says.
type BuildInfo struct {
	CUDA       string   // "12.3"
	CuDNN      string   // "8": the major only
	CUDABuild  bool     // is_cuda_build
	ROCmBuild  bool     // is_rocm_build
	CUDAArches []string // cuda_compute_capabilities
}

var (
	// ('key', value) pairs of the generated OrderedDict.
	biPair = lazyregexp.New(`\(\s*'([A-Za-z_]+)'\s*,\s*('[^']*'|"[^"]*"|True|False|None|\[[^\]]*\])\s*\)`)
	// key = value assignments of releases before the OrderedDict form.
	biAssign = lazyregexp.New(`(?m)^([A-Za-z_]+)\s*=\s*('[^']*'|"[^"]*"|True|False|None|\[[^\]]*\])\s*$`)
	biItem   = lazyregexp.New(`'([^']*)'|"([^"]*)"`)
)

// ParseBuildInfo reads TensorFlow's generated build_info.py: the
// OrderedDict of (key, value) pairs of current releases, or the module
// assignments of older ones (cuda_version_number, cudnn_version_number).
func ParseBuildInfo(data []byte) (BuildInfo, error) {
	var bi BuildInfo
	kv := make(map[string]string)
	for _, m := range biPair.FindAllSubmatch(data, -1) {
		kv[string(m[1])] = string(m[2])
	}
	for _, m := range biAssign.FindAllSubmatch(data, -1) {
		if _, ok := kv[string(m[1])]; !ok {
			kv[string(m[1])] = string(m[2])
		}
	}
	cudaBuild, ok1 := kv["is_cuda_build"]
	_, ok2 := kv["cuda_version"]
	_, ok3 := kv["cuda_version_number"]
	if !ok1 && !ok2 && !ok3 {
		return bi, errors.New("no is_cuda_build or cuda_version entry")
	}
	bi.CUDABuild = cudaBuild == "True"
	bi.ROCmBuild = kv["is_rocm_build"] == "True"
	bi.CUDA = pyString(first(kv["cuda_version"], kv["cuda_version_number"]))
	bi.CuDNN = pyString(first(kv["cudnn_version"], kv["cudnn_version_number"]))
	if bi.CUDA != "" && !ok1 {
		bi.CUDABuild = true
	}
	if caps := kv["cuda_compute_capabilities"]; strings.HasPrefix(caps, "[") {
		for _, m := range biItem.FindAllStringSubmatch(caps, -1) {
			bi.CUDAArches = append(bi.CUDAArches, m[1]+m[2])
		}
	}
	return bi, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tensorflowDists are the project names TensorFlow is published under.
var tensorflowDists = []string{"tensorflow", "tensorflow_cpu", "tensorflow_gpu", "tensorflow_intel", "tf_nightly"}

func (o *observer) tensorflow(dir string, dists map[string]dist, distro bool) facts.Framework {
	fw := facts.Framework{Name: TensorFlow, Location: path.Join(dir, "tensorflow")}
	var d dist
	var haveDist bool
	for _, n := range tensorflowDists {
		if d, haveDist = dists[n]; haveDist {
			fw.Version = d.version
			break
		}
	}
	bp := path.Join(dir, "tensorflow", "python", "platform", "build_info.py")
	data, err := o.h.ReadFile(bp)
	if err == nil {
		bi, perr := ParseBuildInfo(data)
		if perr != nil {
			o.warn(bp, perr.Error())
		} else {
			fw.CUDA, fw.CuDNN, fw.CUDAArchs = bi.CUDA, bi.CuDNN, bi.CUDAArches
			fw.CPUOnly = !bi.CUDABuild && !bi.ROCmBuild
		}
	} else {
		o.warn(bp, err.Error())
	}
	if fw.Version == "" {
		o.warn(fw.Location, "no TensorFlow dist-info names its version")
	}
	if _, local, ok := strings.Cut(fw.Version, "+"); ok && variant.MatchString(local) {
		fw.Variant = local
	}
	fw.Plugins = nvidiaWheels(dir, dists)
	o.provenance(&fw, dir, d, haveDist, distro, "python3-tensorflow")
	return fw
}

// tensorflowWheels are the NVIDIA wheels TensorFlow's [and-cuda] extra
// installs whose libraries it loads at import: cuDNN, the CUDA runtime
// and cuBLAS, as nvidia-<lib>-cu<major>. They sit in the site directory
// under nvidia/<lib>/lib, where TensorFlow looks before the loader's path.
var tensorflowWheels = []string{"cudnn", "cuda_runtime", "cublas"}

// nvidiaWheels lists the tensorflowWheels installed in dir, each as the
// directory of its libraries and the wheel's version.
func nvidiaWheels(dir string, dists map[string]dist) []facts.Library {
	var out []facts.Library
	for _, lib := range tensorflowWheels {
		for _, cu := range []string{"cu11", "cu12", "cu13"} {
			if d, ok := dists["nvidia_"+lib+"_"+cu]; ok {
				out = append(out, facts.Library{Path: path.Join(dir, "nvidia", lib), Version: d.version})
			}
		}
	}
	return out
}

var (
	jaxVersion = lazyregexp.New(`(?m)^_version\s*(?::[^=]*)?=\s*(?:'([^'\r\n]*)'|"([^"\r\n]*)")`)
	// jaxlib wheels before the plugin split carried CUDA in the local
	// version: "0.3.25+cuda11.cudnn82".
	jaxlibLocal = lazyregexp.New(`\+cuda(\d+)(?:\.cudnn(\d)(\d+))?`)
	// jax_cuda12_plugin, jax_cuda13_pjrt …
	jaxPlugin = lazyregexp.New(`^jax_cuda(\d+)_(plugin|pjrt)$`)
)

// ParseJAXVersion reads `_version = "0.4.35"` from jax/version.py and
// the copies of it in jaxlib and the CUDA plugins.
func ParseJAXVersion(data []byte) (string, error) {
	m := jaxVersion.FindSubmatch(data)
	if m == nil {
		return "", errors.New("no _version assignment")
	}
	return string(m[1]) + string(m[2]), nil
}

func (o *observer) jax(dir string, dists map[string]dist, present map[string]bool, distro bool) facts.Framework {
	fw := facts.Framework{Name: JAX, Location: path.Join(dir, "jax")}
	d, haveDist := dists["jax"]
	if haveDist {
		fw.Version = d.version
	} else {
		vp := path.Join(dir, "jax", "version.py")
		if data, err := o.h.ReadFile(vp); err != nil {
			o.warn(vp, err.Error())
		} else if v, err := ParseJAXVersion(data); err != nil {
			o.warn(vp, err.Error())
		} else {
			fw.Version = v
		}
	}

	// jaxlib, then the CUDA plugin and its PJRT companion: each from its
	// dist-info, else from the version.py its package directory carries.
	type companion struct{ project, pkgDir string }
	comps := []companion{{"jaxlib", "jaxlib"}}
	var majors []string
	for project := range dists {
		if m := jaxPlugin.FindStringSubmatch(project); m != nil {
			majors = append(majors, m[1])
		}
	}
	for _, e := range []string{"jax_cuda11_plugin", "jax_cuda12_plugin", "jax_cuda13_plugin"} {
		if present[e] {
			majors = append(majors, strings.TrimSuffix(strings.TrimPrefix(e, "jax_cuda"), "_plugin"))
		}
	}
	majors = uniqueSorted(majors)
	for _, mj := range majors {
		comps = append(comps,
			companion{"jax_cuda" + mj + "_plugin", "jax_cuda" + mj + "_plugin"},
			companion{"jax_cuda" + mj + "_pjrt", "jax_plugins/xla_cuda" + mj})
	}
	for _, c := range comps {
		loc := path.Join(dir, c.pkgDir)
		v := ""
		if cd, ok := dists[c.project]; ok {
			v = cd.version
		} else if fi, err := o.h.Stat(loc); err == nil && fi.IsDir() {
			vp := path.Join(loc, "version.py")
			if data, err := o.h.ReadFile(vp); err == nil {
				if pv, err := ParseJAXVersion(data); err == nil {
					v = pv
				} else {
					o.warn(vp, err.Error())
				}
			}
		} else {
			continue
		}
		fw.Plugins = append(fw.Plugins, facts.Library{Path: loc, Version: v})
		if c.project == "jaxlib" {
			if m := jaxlibLocal.FindStringSubmatch(v); m != nil {
				fw.CUDA = m[1]
				if m[2] != "" {
					fw.CuDNN = m[2] + "." + m[3]
				}
			}
		}
	}
	if len(majors) > 0 {
		// The plugin's name is all it says of CUDA: the major it targets.
		fw.CUDA = majors[len(majors)-1]
	}
	if fw.CUDA != "" && fw.CuDNN == "" {
		fw.CuDNN = pipCuDNN(dists)
	}
	fw.CPUOnly = fw.CUDA == ""
	o.provenance(&fw, dir, d, haveDist, distro, "python3-jax")
	return fw
}

func uniqueSorted(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
