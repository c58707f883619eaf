package doctor

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// defaultPath is where a login shell finds programs without any
// configuration.
var defaultPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// searchDirs returns the directories a list-valued variable (PATH,
// LD_LIBRARY_PATH) adds, as set by the host's files and the session, with
// where each came from. Parts that expand another variable are left out:
// they are the previous value ("${PATH:+:${PATH}}").
func (d *doctor) searchDirs(name string) map[string]string {
	out := map[string]string{}
	for _, a := range d.assignments(name) {
		for _, p := range strings.Split(withoutExpansions(a.Value), ":") {
			p = strings.TrimSpace(p)
			if p == "" || !path.IsAbs(p) {
				continue
			}
			p = path.Clean(p)
			if _, seen := out[p]; !seen {
				out[p] = where(a)
			}
		}
	}
	return out
}

// withoutExpansions removes shell expansions ($NAME, ${…} with nested
// braces) from a value, leaving the literal text around them.
func withoutExpansions(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '$' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '{' {
			depth := 0
			for i++; i < len(v); i++ {
				if v[i] == '{' {
					depth++
				} else if v[i] == '}' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			b.WriteByte(':')
			continue
		}
		for i+1 < len(v) && (v[i+1] == '_' || v[i+1] >= 'A' && v[i+1] <= 'Z' || v[i+1] >= 'a' && v[i+1] <= 'z' || v[i+1] >= '0' && v[i+1] <= '9') {
			i++
		}
		// A separator stands where the expansion was, so that the text on
		// either side is not joined into one directory.
		b.WriteByte(':')
	}
	return b.String()
}

// assignments returns the settings of a variable in the host's files,
// the user's shell files, a named process's environment, then the
// session.
func (d *doctor) assignments(name string) []facts.Assignment {
	var out []facts.Assignment
	for _, a := range d.obs.Environment.Variables {
		if a.Name == name {
			out = append(out, a)
		}
	}
	for _, a := range d.sessionAssignments() {
		if a.Name == name {
			out = append(out, a)
		}
	}
	for _, a := range d.in.Session {
		if a.Name == name {
			out = append(out, a)
		}
	}
	return out
}

func where(a facts.Assignment) string {
	if a.Line > 0 {
		return fmt.Sprintf("%s:%d", a.File, a.Line)
	}
	if a.File == "" {
		return "this session's environment"
	}
	return a.File
}

// sameDir reports whether dir names the toolkit directory tk (or a
// directory below it) through /usr/local/cuda or /usr/local/cuda-<major>,
// the links NVIDIA's packages make.
func (d *doctor) sameDir(dir, tkPath, sub string) bool {
	want := path.Join(tkPath, sub)
	if dir == want {
		return true
	}
	rest, ok := strings.CutPrefix(dir, "/usr/local/cuda")
	if !ok {
		return false
	}
	alias := "/usr/local/cuda"
	if strings.HasPrefix(rest, "-") {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			i = len(rest)
		}
		alias += rest[:i]
		rest = rest[i:]
	}
	if alias == "/usr/local/cuda" {
		if d.obs.CUDA.Default != tkPath {
			return false
		}
	} else if alias != tkPath && !strings.HasPrefix(tkPath, alias+".") {
		return false
	}
	return path.Join(tkPath, rest) == want
}

// toolkitVersion parses a toolkit's version.
func toolkitVersion(tk facts.Toolkit) (version.Version, bool) {
	v, err := version.Parse(tk.Version)
	return v, err == nil && len(v.Parts()) >= 2
}

// mainToolkit is the toolkit programs get by default: /usr/local/cuda's,
// else the only one, else the newest.
func (d *doctor) mainToolkit() *facts.Toolkit {
	tks := d.obs.CUDA.Toolkits
	if len(tks) == 0 {
		return nil
	}
	for i := range tks {
		if tks[i].Path == d.obs.CUDA.Default {
			return &tks[i]
		}
	}
	best := 0
	for i := range tks {
		a, _ := toolkitVersion(tks[i])
		b, _ := toolkitVersion(tks[best])
		if a.Compare(b) > 0 {
			best = i
		}
	}
	return &tks[best]
}

func (d *doctor) cudaToolkits() {
	tks := d.obs.CUDA.Toolkits
	if len(tks) == 0 {
		d.skip(Check{ID: "cuda.toolkit", Group: GroupCUDA}, "No CUDA toolkit installed (frameworks from pip bring the CUDA libraries they need)")
		return
	}
	drv, from := d.driverVersion()
	for _, tk := range tks {
		d.cudaDriver(tk, drv, from)
	}
	d.cudaDefault(drv)
	if tk := d.mainToolkit(); tk != nil {
		d.cudaNvcc(*tk)
		d.cudaLoader(*tk)
	}
}

func (d *doctor) cudaDriver(tk facts.Toolkit, drv version.Version, from string) {
	c := Check{ID: "cuda.driver:" + tk.Path, Group: GroupCUDA}
	c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA %s (from %s)", tk.Path, tk.Version, tk.VersionFrom))
	v, ok := toolkitVersion(tk)
	switch {
	case !ok:
		c.Status, c.Summary = Skipped, fmt.Sprintf("The version of the toolkit in %s is unknown", tk.Path)
	case drv.IsZero():
		c.Status, c.Summary = Skipped, fmt.Sprintf("CUDA %s in %s: no driver to judge it against", tk.Version, tk.Path)
	default:
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: driver %s", from, drv))
		d.judgeCUDA(&c, drv, v, fmt.Sprintf("CUDA %s in %s", tk.Version, tk.Path))
		if c.Status == Problem {
			fix := &Fix{Text: "Upgrade the driver, or install a toolkit it runs; with gpuenv, one of:"}
			if exact, _, _, err := compat.MinDriverForCUDA(v); err == nil && !exact.IsZero() {
				fix.Spec = fmt.Sprintf("driver {\n  version = \">= %s\"\n}", exact)
			}
			if maxCUDA := compat.MaxCUDAForDriver(drv); !maxCUDA.IsZero() {
				if fix.Spec != "" {
					fix.Spec += "\n\n"
				}
				fix.Spec += fmt.Sprintf("cuda {\n  version = %q\n}", maxCUDA.String())
			}
			c.Fix = fix
		}
	}
	d.add(c)
}

// judgeCUDA sets c's status and summary for code built with CUDA cuda
// running on driver drv.
func (d *doctor) judgeCUDA(c *Check, drv, cuda version.Version, what string) {
	ok, how := compat.DriverSupportsCUDA(drv, cuda)
	maxCUDA := compat.MaxCUDAForDriver(drv)
	if !maxCUDA.IsZero() {
		c.Evidence = append(c.Evidence, fmt.Sprintf("driver %s runs CUDA up to %s without compatibility packages", drv, maxCUDA))
	}
	switch {
	case !ok:
		c.Status = Problem
		c.Summary = fmt.Sprintf("%s needs a newer driver than %s (%s): \"CUDA driver version is insufficient for CUDA runtime version\"", what, drv, how)
	case how == compat.HowMinorCompat:
		c.Status = Warning
		c.Summary = fmt.Sprintf("%s runs on driver %s only through minor-version compatibility: code that JIT-compiles newer PTX fails (\"unsupported toolchain\") and some features are missing", what, drv)
	default:
		c.Status = OK
		c.Summary = fmt.Sprintf("Driver %s runs %s", drv, what)
	}
}

func (d *doctor) cudaDefault(drv version.Version) {
	cu := d.obs.CUDA
	c := Check{ID: "cuda.default", Group: GroupCUDA}
	var nvidiaLayout []facts.Toolkit
	for _, tk := range cu.Toolkits {
		if tk.Layout != "distro" {
			nvidiaLayout = append(nvidiaLayout, tk)
		}
	}
	if len(nvidiaLayout) == 0 {
		d.skip(c, "The distribution's toolkit lives in /usr; /usr/local/cuda is not needed")
		return
	}
	// The expected toolkit is the newest the driver runs exactly, else the
	// newest it runs at all, else the newest.
	expected := nvidiaLayout[0]
	rank := func(tk facts.Toolkit) int {
		v, ok := toolkitVersion(tk)
		if !ok || drv.IsZero() {
			return 0
		}
		switch ok, how := compat.DriverSupportsCUDA(drv, v); {
		case ok && how == compat.HowExact:
			return 2
		case ok:
			return 1
		}
		return 0
	}
	for _, tk := range nvidiaLayout[1:] {
		a, _ := toolkitVersion(tk)
		b, _ := toolkitVersion(expected)
		if rank(tk) > rank(expected) || rank(tk) == rank(expected) && a.Compare(b) > 0 {
			expected = tk
		}
	}
	switch {
	case cu.Default == "":
		c.Status = Warning
		c.Evidence = []string{"/usr/local/cuda: does not exist"}
		c.Summary = "/usr/local/cuda does not exist: build systems and scripts that look there find no toolkit"
		c.Fix = &Fix{Text: "Point it at the toolkit:", Commands: []string{"ln -s " + expected.Path + " /usr/local/cuda"}}
	case !slices.ContainsFunc(cu.Toolkits, func(tk facts.Toolkit) bool { return tk.Path == cu.Default }):
		c.Status = Problem
		c.Evidence = []string{"/usr/local/cuda -> " + cu.Default}
		c.Summary = fmt.Sprintf("/usr/local/cuda points at %s, which holds no toolkit", cu.Default)
		c.Fix = &Fix{Text: "Point it at an installed toolkit:", Commands: []string{"ln -sfn " + expected.Path + " /usr/local/cuda"}}
	case cu.Default != expected.Path:
		c.Status = Warning
		c.Evidence = []string{"/usr/local/cuda -> " + cu.Default, fmt.Sprintf("%s: CUDA %s", expected.Path, expected.Version)}
		c.Summary = fmt.Sprintf("/usr/local/cuda points at %s, not at %s, the newest toolkit the driver runs", cu.Default, expected.Path)
		c.Fix = &Fix{Text: "If programs should build with the newer toolkit:", Commands: []string{"ln -sfn " + expected.Path + " /usr/local/cuda"}}
	default:
		c.Status = OK
		c.Evidence = []string{"/usr/local/cuda -> " + cu.Default}
		c.Summary = "/usr/local/cuda points at " + cu.Default
	}
	d.add(c)
}

func (d *doctor) cudaNvcc(tk facts.Toolkit) {
	c := Check{ID: "cuda.nvcc", Group: GroupCUDA}
	if tk.Nvcc == "" {
		c.Status = Warning
		c.Summary = fmt.Sprintf("The toolkit in %s has no nvcc: programs run, but nothing can be compiled against it", tk.Path)
		c.Evidence = []string{tk.Path + "/bin/nvcc: missing"}
		d.add(c)
		return
	}
	bin := path.Dir(tk.Nvcc)
	c.Evidence = []string{"nvcc: " + tk.Nvcc}
	if slices.Contains(defaultPath, bin) {
		c.Status, c.Summary = OK, fmt.Sprintf("nvcc is on the default PATH (%s)", bin)
		d.add(c)
		return
	}
	dirs := d.searchDirs("PATH")
	for dir, from := range dirs {
		if d.sameDir(dir, path.Dir(bin), path.Base(bin)) {
			c.Status = OK
			c.Summary = "nvcc is on PATH"
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: PATH includes %s", from, dir))
			d.add(c)
			return
		}
	}
	c.Status = Warning
	c.Summary = fmt.Sprintf("nvcc (%s) is not on PATH: builds of CUDA extensions cannot find it", tk.Nvcc)
	c.Evidence = append(c.Evidence, "no PATH setting in /etc/environment, /etc/profile.d or systemd includes "+bin)
	c.Fix = &Fix{Text: "Put the toolkit on PATH for login shells; with gpuenv:", Spec: toolkitSpec(tk, "set_environment = true")}
	d.add(c)
}

// toolkitSpec writes a cuda block for tk with one more attribute.
func toolkitSpec(tk facts.Toolkit, attr string) string {
	v := tk.Version
	if pv, ok := toolkitVersion(tk); ok {
		v = pv.Trunc(2).String()
	}
	src := "nvidia"
	if tk.Layout == "distro" {
		src = "distro"
	}
	return fmt.Sprintf("cuda {\n  version         = %q\n  source          = %q\n  %s\n}", v, src, attr)
}

func (d *doctor) cudaLoader(tk facts.Toolkit) {
	c := Check{ID: "cuda.loader", Group: GroupCUDA}
	if tk.Layout == "distro" {
		c.Status, c.Summary = OK, "The distribution's CUDA libraries are in the loader's default directories"
		c.Evidence = []string{tk.Path + ": distribution layout"}
		d.add(c)
		return
	}
	subs := []string{"lib64", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "lib"}
	for _, lp := range d.obs.Environment.LoaderPaths {
		for _, s := range subs {
			if d.sameDir(path.Clean(lp.Dir), tk.Path, s) {
				c.Status = OK
				c.Summary = fmt.Sprintf("The loader finds CUDA %s's libraries", tk.Version)
				c.Evidence = []string{fmt.Sprintf("%s: %s", lp.File, lp.Dir)}
				d.add(c)
				return
			}
		}
	}
	for dir, from := range d.searchDirs("LD_LIBRARY_PATH") {
		for _, s := range subs {
			if d.sameDir(dir, tk.Path, s) {
				c.Status = OK
				c.Summary = fmt.Sprintf("The loader finds CUDA %s's libraries through LD_LIBRARY_PATH", tk.Version)
				c.Evidence = []string{fmt.Sprintf("%s: LD_LIBRARY_PATH includes %s", from, dir)}
				d.add(c)
				return
			}
		}
	}
	c.Status = Warning
	c.Summary = fmt.Sprintf("The dynamic loader does not find CUDA %s's libraries (libcudart, libcublas) in %s", tk.Version, tk.Path)
	c.Evidence = []string{"no directory of /etc/ld.so.conf.d or LD_LIBRARY_PATH is below " + tk.Path}
	c.Fix = &Fix{Text: "Add the toolkit's library directory to the loader's configuration; with gpuenv:", Spec: toolkitSpec(tk, "set_environment = true")}
	d.add(c)
}

func (d *doctor) cudnn() {
	ins := d.obs.CuDNN.Installs
	if len(ins) == 0 {
		d.skip(Check{ID: "cudnn", Group: GroupCuDNN}, "No cuDNN installed system-wide (PyTorch and JAX wheels bring their own)")
		return
	}
	drv, _ := d.driverVersion()
	for _, in := range ins {
		c := Check{ID: "cudnn:" + in.Version, Group: GroupCuDNN}
		where := in.Header
		if where == "" && len(in.Libraries) > 0 {
			where = in.Libraries[0]
		}
		desc := fmt.Sprintf("%s: cuDNN %s", where, in.Version)
		if in.CUDAMajor != "" {
			desc += " for CUDA " + in.CUDAMajor
		}
		if in.Package != "" {
			desc += fmt.Sprintf(" (package %s %s)", in.Package, in.PackageVersion)
		}
		c.Evidence = []string{desc}
		v, err := version.Parse(in.Version)
		if err != nil {
			d.skip(c, "cuDNN's version is unreadable: "+in.Version)
			continue
		}
		var majors []string
		for _, tk := range d.obs.CUDA.Toolkits {
			tv, ok := toolkitVersion(tk)
			if !ok {
				continue
			}
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA %s", tk.Path, tk.Version))
			majors = append(majors, strconv.FormatUint(tv.Major(), 10))
			if in.CUDAMajor == "" {
				if ok, _ := compat.CuDNNSupportsCUDA(v, tv); ok {
					in.CUDAMajor = strconv.FormatUint(tv.Major(), 10)
				}
			}
		}
		switch {
		case len(majors) > 0 && in.CUDAMajor != "" && !slices.Contains(majors, in.CUDAMajor):
			c.Status = Problem
			c.Summary = fmt.Sprintf("cuDNN %s is built for CUDA %s, but the toolkit is CUDA %s: it fails to load with it", in.Version, in.CUDAMajor, strings.Join(majors, ", "))
			c.Fix = &Fix{Text: fmt.Sprintf("Install the cuDNN build for CUDA %s (libcudnn%d-cuda-%s); with gpuenv, the cudnn block picks the build for the installed toolkit:", majors[0], v.Major(), majors[0]),
				Spec: fmt.Sprintf("cudnn {\n  version = \"%s.*\"\n}", v.Trunc(2))}
		case len(majors) > 0 && in.CUDAMajor == "":
			c.Status = Problem
			c.Summary = fmt.Sprintf("cuDNN %s has no build for the installed CUDA %s", in.Version, strings.Join(majors, ", "))
			c.Fix = &Fix{Text: "Install a cuDNN release built for the toolkit; with gpuenv, the cudnn block picks one:", Spec: "cudnn {\n  version = \"9.*\"\n}"}
		default:
			c.Status = OK
			c.Summary = fmt.Sprintf("cuDNN %s", in.Version)
			if in.CUDAMajor != "" {
				c.Summary += " is built for CUDA " + in.CUDAMajor
				if len(majors) > 0 {
					c.Summary += ", the installed toolkit's major"
				}
				if mj, err := strconv.ParseUint(in.CUDAMajor, 10, 64); err == nil && !drv.IsZero() {
					if row, ok := compat.CuDNNBuild(v, mj); ok && drv.Compare(row.MinDriver) < 0 {
						c.Status = Problem
						c.Summary = fmt.Sprintf("cuDNN %s for CUDA %s needs driver %s or newer; the driver is %s", in.Version, in.CUDAMajor, row.MinDriver, drv)
						c.Evidence = append(c.Evidence, fmt.Sprintf("cuDNN support matrix: %s", row.Source))
						c.Fix = &Fix{Text: "Upgrade the driver; with gpuenv:", Spec: fmt.Sprintf("driver {\n  version = \">= %s\"\n}", row.MinDriver)}
					}
				}
			}
		}
		d.add(c)
	}
}
