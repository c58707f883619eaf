// Package pydeps reads, for each observed Python environment, what the
// framework observer does not: the GPU libraries besides the frameworks
// (onnxruntime's CPU and GPU wheels, CuPy's CUDA-specific wheels, numba,
// vLLM) and the GPU requirements of the installed distributions
// (Requires-Dist in each METADATA) that what is installed does not meet,
// judged as pip check judges them, with PEP 440 versions and PEP 508
// markers. Only the distributions that bring GPU code are read, and only
// their requirements on such distributions are judged: a missing pure
// Python dependency is pip's business, not the GPU's.
package pydeps

import (
	"bufio"
	"bytes"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// metadataLimit bounds a METADATA read: the headers come first, and the
// long description after them is not needed.
const metadataLimit = 4 << 20

var (
	cupyDist = regexp.MustCompile(`^cupy(_cuda(\d+?)(\d|x)?)?$`)
	// gpuProject names the distributions whose requirements are read and
	// which are judged as requirements.
	gpuProject = regexp.MustCompile(`^(nvidia_.*|torch|torchvision|torchaudio|triton|tensorflow.*|tf_nightly.*|jax|jaxlib|jax_cuda\d+_(plugin|pjrt)|onnxruntime.*|cupy.*|numba|numba_cuda|tensorrt.*|vllm)$`)
)

type dist struct {
	project, dir, version string
}

// Observe fills each environment's Libraries and Unmet from its site
// directories. arch is the machine ("x86_64", "aarch64") for markers
// that read platform_machine; "" leaves them undecided.
func Observe(h *host.Host, envs []facts.PythonEnv, arch string) []facts.Warning {
	var warns []facts.Warning
	for i := range envs {
		env := &envs[i]
		menv := Environment{"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
			"implementation_name": "cpython", "platform_python_implementation": "CPython"}
		if env.Version != "" {
			menv["python_version"] = env.Version
		}
		if arch != "" {
			menv["platform_machine"] = arch
		}
		for _, site := range env.SitePackages {
			entries, err := h.ReadDir(site)
			if err != nil {
				continue
			}
			dists := map[string]dist{}
			for _, e := range entries {
				stem, ok := strings.CutSuffix(e.Name(), ".dist-info")
				if !ok {
					continue
				}
				project, version, ok := strings.Cut(stem, "-")
				if !ok {
					continue
				}
				p := normalise(project)
				dists[p] = dist{project: p, dir: path.Join(site, e.Name()), version: version}
			}
			names := make([]string, 0, len(dists))
			for p := range dists {
				names = append(names, p)
			}
			sort.Strings(names)
			for _, p := range names {
				if l, ok := library(dists[p]); ok {
					env.Libraries = append(env.Libraries, l)
				}
			}
			met := map[string][]string{}
			first := len(env.Unmet)
			for _, p := range names {
				if !gpuProject.MatchString(p) {
					continue
				}
				d := dists[p]
				file := path.Join(d.dir, "METADATA")
				data, err := h.ReadFileLimit(file, metadataLimit)
				if err != nil {
					continue
				}
				for _, jr := range inEffect(RequiresDist(data), menv, dists) {
					u, judged, unmet := judge(jr.line, jr.env, dists)
					if !judged {
						continue
					}
					if !unmet {
						met[u.Target] = append(met[u.Target], displayName(p)+" "+d.version)
						continue
					}
					u.Distribution, u.Version, u.File = displayName(p), d.version, file
					env.Unmet = append(env.Unmet, u)
				}
			}
			for j := first; j < len(env.Unmet); j++ {
				env.Unmet[j].InstalledFor = met[env.Unmet[j].Target]
			}
		}
	}
	return warns
}

// library recognises the GPU libraries besides the frameworks.
func library(d dist) (facts.PythonLibrary, bool) {
	l := facts.PythonLibrary{Distribution: displayName(d.project), Version: d.version, Location: d.dir}
	switch {
	case strings.HasPrefix(d.project, "onnxruntime"):
		l.Name = "onnxruntime"
	case d.project == "numba" || d.project == "numba_cuda":
		l.Name = "numba"
	case d.project == "vllm":
		// vLLM reads CUDA_VISIBLE_DEVICES itself, apart from CUDA: what
		// it accepts there is judged against the session.
		l.Name = "vllm"
	default:
		m := cupyDist.FindStringSubmatch(d.project)
		if m == nil {
			return l, false
		}
		l.Name = "cupy"
		// cupy-cuda12x names the major; cupy-cuda102 and cupy-cuda111 a
		// major and a minor digit, which the pattern leaves out.
		l.CUDA = m[2]
	}
	return l, true
}

// displayName is a normalised project name as pip prints it.
func displayName(p string) string { return strings.ReplaceAll(p, "_", "-") }

func normalise(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "_", ".", "_").Replace(s)
}

// RequiresDist returns the Requires-Dist values of a METADATA file's
// header block.
func RequiresDist(data []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the body (the long description) follows
		}
		if v, ok := strings.CutPrefix(line, "Requires-Dist:"); ok {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// Requirement is one parsed PEP 508 requirement.
type Requirement struct {
	Name, Extras, Specifiers, Marker string
}

// ParseRequirement splits "name[extra] (>=1,<2) ; marker" or
// "name[extra]>=1,<2; marker". A URL requirement (name @ url) has no
// specifiers to judge.
func ParseRequirement(s string) (Requirement, bool) {
	var r Requirement
	spec, marker, _ := strings.Cut(s, ";")
	r.Marker = strings.TrimSpace(marker)
	spec = strings.TrimSpace(spec)
	i := 0
	for i < len(spec) && (spec[i] == '-' || spec[i] == '_' || spec[i] == '.' || spec[i] >= 'a' && spec[i] <= 'z' || spec[i] >= 'A' && spec[i] <= 'Z' || spec[i] >= '0' && spec[i] <= '9') {
		i++
	}
	if i == 0 {
		return r, false
	}
	r.Name, spec = spec[:i], strings.TrimSpace(spec[i:])
	if strings.HasPrefix(spec, "[") {
		j := strings.IndexByte(spec, ']')
		if j < 0 {
			return r, false
		}
		r.Extras, spec = spec[1:j], strings.TrimSpace(spec[j+1:])
	}
	if strings.HasPrefix(spec, "@") {
		return r, true
	}
	spec = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(spec, "("), ")"))
	r.Specifiers = spec
	return r, true
}

// judge evaluates one requirement: judged is false when its marker does
// not hold in env (or cannot be decided) or its target is no GPU
// distribution; unmet is true when the target is missing or its
// installed version is outside the specifiers.
func judge(line string, env Environment, dists map[string]dist) (u facts.UnmetRequirement, judged, unmet bool) {
	r, ok := ParseRequirement(line)
	if !ok {
		return u, false, false
	}
	target := normalise(r.Name)
	if !gpuProject.MatchString(target) {
		return u, false, false
	}
	if r.Marker != "" {
		if holds, decided := EvalMarker(r.Marker, env); !decided || !holds {
			return u, false, false
		}
	}
	req := r.Name
	if r.Extras != "" {
		req += "[" + r.Extras + "]"
	}
	req += r.Specifiers
	u = facts.UnmetRequirement{Requirement: req, Target: displayName(target)}
	d, installed := dists[target]
	if !installed {
		return u, true, true
	}
	u.Installed = d.version
	specs, err := ParseSpecifiers(r.Specifiers)
	if err != nil {
		return u, false, false
	}
	v, err := ParseVersion(d.version)
	if err != nil {
		return u, false, false
	}
	return u, true, !Allows(specs, v, d.version)
}

var extraMarker = regexp.MustCompile(`extra\s*==\s*["']([^"']+)["']`)

type judgedReq struct {
	line string
	env  Environment
}

// inEffect returns the requirements to judge, each with the marker
// environment to judge it in. pip records no extras an install asked
// for, so an extra ("jax-cuda12-plugin[with-cuda]", "tensorflow
// [and-cuda]") is taken as asked for when every GPU distribution it
// requires is installed, whatever their versions: then its version
// requirements are judged like the others.
func inEffect(lines []string, env Environment, dists map[string]dist) []judgedReq {
	var out []judgedReq
	byExtra := map[string][]string{}
	raw := map[string]string{}
	var extras []string
	for _, l := range lines {
		m := extraMarker.FindStringSubmatch(l)
		if m == nil {
			out = append(out, judgedReq{l, env})
			continue
		}
		x := normalise(m[1])
		if _, ok := byExtra[x]; !ok {
			extras = append(extras, x)
			raw[x] = m[1]
		}
		byExtra[x] = append(byExtra[x], l)
	}
	for _, x := range extras {
		xenv := Environment{"extra": raw[x]}
		for k, v := range env {
			xenv[k] = v
		}
		gpu, all := 0, true
		for _, l := range byExtra[x] {
			r, ok := ParseRequirement(l)
			if !ok || !gpuProject.MatchString(normalise(r.Name)) {
				continue
			}
			if r.Marker != "" {
				if holds, decided := EvalMarker(r.Marker, xenv); !decided || !holds {
					continue
				}
			}
			gpu++
			if _, ok := dists[normalise(r.Name)]; !ok {
				all = false
			}
		}
		if gpu == 0 || !all {
			continue
		}
		for _, l := range byExtra[x] {
			out = append(out, judgedReq{l, xenv})
		}
	}
	return out
}
