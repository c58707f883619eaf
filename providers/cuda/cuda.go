// Package cuda observes the CUDA toolkits installed on a host: NVIDIA's
// installs under /usr/local/cuda-X.Y (from the runfile or NVIDIA's
// cuda-toolkit-X-Y packages), the /usr/local/cuda link that picks the
// default one, and Debian's nvidia-cuda-toolkit, which spreads one toolkit
// over /usr. Versions come from the toolkit's own files, and from the
// package database where the files do not say.
package cuda

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// Paths of the two layouts.
const (
	// DefaultLink is the link NVIDIA's packages and runfile point at the
	// chosen toolkit.
	DefaultLink = "/usr/local/cuda"
	// DistroDir is where Debian's nvidia-cuda-toolkit keeps the real
	// compiler and its helpers; /usr/bin/nvcc is a script that runs
	// DistroDir/bin/nvcc, headers are in /usr/include and libraries in
	// /usr/lib/x86_64-linux-gnu.
	DistroDir     = "/usr/lib/nvidia-cuda-toolkit"
	DistroNvcc    = "/usr/bin/nvcc"
	DistroPackage = "nvidia-cuda-toolkit"
	// DistroPkgconfig is nvidia-cuda-dev's pkg-config file, whose Version
	// is the toolkit release; read only when the package database does not
	// know the toolkit.
	DistroPkgconfig = "/usr/lib/x86_64-linux-gnu/pkgconfig/cuda.pc"

	LayoutNVIDIA = "nvidia"
	LayoutDistro = "distro"
)

// Observe finds every CUDA toolkit in h: each /usr/local/cuda-* directory
// (links such as /usr/local/cuda-12 that lead to one already seen are the
// same install), /usr/local/cuda itself when it is a directory rather than
// a link, and Debian's layout. pkgs is the package database as
// packages.Observe read it, used for versions the files do not carry and
// to name the package a toolkit came from.
//
// Toolkits are returned in path order, Debian's last. A version.json or version.txt that
// cannot be parsed is a warning naming it, and the version falls back to
// the next source.
func Observe(h *host.Host, pkgs facts.Packages) (facts.CUDA, []facts.Warning) {
	out := facts.CUDA{Toolkits: []facts.Toolkit{}}
	var warns []facts.Warning

	if target, err := h.EvalSymlinks(DefaultLink); err == nil {
		out.Default = target
	}

	candidates, _ := h.Glob("/usr/local/cuda-*")
	candidates = append(candidates, DefaultLink)
	seen := make(map[string]bool)
	for _, c := range candidates {
		fi, err := h.Stat(c)
		if err != nil || !fi.IsDir() {
			continue
		}
		dir, err := h.EvalSymlinks(c)
		if err != nil || seen[dir] {
			continue
		}
		seen[dir] = true
		tk, ws := observeNVIDIA(h, dir, pkgs)
		warns = append(warns, ws...)
		out.Toolkits = append(out.Toolkits, tk)
	}

	sort.Slice(out.Toolkits, func(i, j int) bool { return out.Toolkits[i].Path < out.Toolkits[j].Path })

	// NVIDIA's packages without their directory: a toolkit the database
	// believes in but the files no longer show.
	for _, p := range pkgs.Packages {
		major, minor, ok := nvidiarepo.ToolkitRelease(p.Name)
		if !ok || p.State == facts.StateConfigFiles || p.State == facts.StateNotInstalled {
			continue
		}
		dir := nvidiarepo.ToolkitDir(major, minor)
		if !seen[dir] {
			warns = append(warns, facts.Warning{Path: dir, Message: fmt.Sprintf("package %s %s is installed but its directory is missing", p.Name, p.Version)})
		}
	}

	tk, ok, ws := observeDistro(h, pkgs)
	if ok {
		out.Toolkits = append(out.Toolkits, tk)
	}
	warns = append(warns, ws...)
	return out, warns
}

// observeNVIDIA reads one toolkit directory of NVIDIA's layout.
func observeNVIDIA(h *host.Host, dir string, pkgs facts.Packages) (facts.Toolkit, []facts.Warning) {
	tk := facts.Toolkit{Path: dir, Layout: LayoutNVIDIA}
	var warns []facts.Warning
	if fi, err := h.Stat(path.Join(dir, "bin/nvcc")); err == nil && fi.Mode().IsRegular() {
		tk.Nvcc = path.Join(dir, "bin/nvcc")
	}

	// The package NVIDIA's repository installs it with, named after the
	// directory's release: /usr/local/cuda-12.4 → cuda-toolkit-12-4.
	var pkg facts.Package
	var havePkg bool
	if rel, ok := strings.CutPrefix(path.Base(dir), "cuda-"); ok {
		dashed := strings.ReplaceAll(rel, ".", "-")
		for _, name := range []string{"cuda-toolkit-" + dashed, "cuda-" + dashed, "cuda-nvcc-" + dashed, "cuda-cudart-" + dashed} {
			if p, ok := pkgdb.Installed(pkgs, name, pkgdb.FilesPresent); ok {
				pkg, havePkg = p, true
				tk.Package = p.Name
				break
			}
		}
	}

	// The toolkit's own version file says best: version.json, or the
	// version.txt of older toolkits.
	for _, vf := range []struct {
		name  string
		parse func([]byte) (version, runtime string, err error)
	}{{"version.json", ParseVersionJSON}, {"version.txt", ParseVersionTxt}} {
		p := path.Join(dir, vf.name)
		data, err := h.ReadFile(p)
		if err == nil {
			var v, rt string
			if v, rt, err = vf.parse(data); err == nil {
				tk.Version, tk.Runtime, tk.VersionFrom = v, rt, vf.name
				return tk, warns
			}
		}
		if !notExist(err) {
			warns = append(warns, facts.Warning{Path: p, Message: err.Error()})
		}
	}

	if havePkg {
		up := pkgdb.Upstream(pkg.Version)
		if strings.HasPrefix(pkg.Name, "cuda-nvcc-") || strings.HasPrefix(pkg.Name, "cuda-cudart-") {
			// Component packages carry the component's version
			// (12.4.131), not the release's.
			tk.Runtime = up
			tk.Version = majorMinor(up)
		} else {
			tk.Version = up
		}
		tk.VersionFrom = "package:" + pkg.Name
		return tk, warns
	}
	warns = append(warns, facts.Warning{Path: dir, Message: "no version.json, version.txt or package tells this toolkit's version"})
	return tk, warns
}

// observeDistro finds Debian's nvidia-cuda-toolkit. ok is false when
// neither its files nor its package are there.
func observeDistro(h *host.Host, pkgs facts.Packages) (facts.Toolkit, bool, []facts.Warning) {
	tk := facts.Toolkit{Path: DistroDir, Layout: LayoutDistro}
	fi, err := h.Stat(DistroDir)
	haveDir := err == nil && fi.IsDir()
	pkg, havePkg := pkgdb.Installed(pkgs, DistroPackage, pkgdb.FilesPresent)
	switch {
	case !haveDir && !havePkg:
		return tk, false, nil
	case !haveDir:
		return tk, false, []facts.Warning{{Path: DistroDir, Message: fmt.Sprintf("package %s %s is installed but its directory is missing", pkg.Name, pkg.Version)}}
	}
	for _, p := range []string{DistroNvcc, path.Join(DistroDir, "bin/nvcc")} {
		if fi, err := h.Stat(p); err == nil && fi.Mode().IsRegular() {
			tk.Nvcc = p
			break
		}
	}
	if havePkg {
		tk.Package = pkg.Name
		tk.Version, tk.Runtime = DebianToolkitVersion(pkg.Version)
		tk.VersionFrom = "package:" + pkg.Name
		return tk, true, nil
	}
	data, err := h.ReadFile(DistroPkgconfig)
	if err != nil {
		return tk, true, []facts.Warning{{Path: DistroDir, Message: "no package or pkg-config file tells this toolkit's version"}}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			tk.Version = strings.TrimSpace(v)
			tk.VersionFrom = "cuda.pc"
			return tk, true, nil
		}
	}
	return tk, true, []facts.Warning{{Path: DistroPkgconfig, Message: "no Version field"}}
}

// DebianToolkitVersion splits the version of Debian's CUDA packages,
// "11.8.89~11.8.0-5~deb12u1", into the toolkit release ("11.8.0", after
// the tilde) and the component's own version ("11.8.89", before it).
func DebianToolkitVersion(v string) (release, component string) {
	up := pkgdb.Upstream(v)
	if c, r, ok := strings.Cut(up, "~"); ok {
		return r, c
	}
	return up, ""
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// component is one entry of version.json.
type component struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ParseVersionJSON reads a toolkit's version.json. version is the
// release: cuda.version as written when its third part is an update
// number ("12.4.1"), only its major.minor when the third part is a date
// stamp ("11.8.20220929") or a build number (Jetson's "12.2.140").
// runtime is cuda_cudart.version ("12.4.127"), when present.
func ParseVersionJSON(data []byte) (version, runtime string, err error) {
	var doc map[string]component
	if err := json.Unmarshal(data, &doc); err != nil {
		return "", "", fmt.Errorf("parsing version.json: %w", err)
	}
	runtime = doc["cuda_cudart"].Version
	sdk := doc["cuda"].Version
	switch {
	case sdk != "":
		version = releaseOf(sdk)
	case runtime != "":
		version = majorMinor(runtime)
	}
	if version == "" {
		return "", "", fmt.Errorf("version.json names neither cuda nor cuda_cudart with a version")
	}
	return version, runtime, nil
}

// releaseOf keeps a third part that is an update number.
func releaseOf(v string) string {
	parts := strings.Split(v, ".")
	if len(parts) < 3 {
		return v
	}
	if u, err := strconv.Atoi(parts[2]); err == nil && u < 100 {
		return strings.Join(parts[:3], ".")
	}
	return parts[0] + "." + parts[1]
}

func majorMinor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

var versionTxt = lazyregexp.New(`^CUDA Version (\d+\.\d+)((?:\.\d+)*)\s*$`)

// ParseVersionTxt reads the version.txt of toolkits before 11.1:
// "CUDA Version 10.2.89" gives release "10.2" and runtime "10.2.89".
func ParseVersionTxt(data []byte) (version, runtime string, err error) {
	line, _, _ := strings.Cut(string(data), "\n")
	m := versionTxt.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", "", fmt.Errorf("version.txt does not read \"CUDA Version X.Y.Z\": %.60q", line)
	}
	return m[1], m[1] + m[2], nil
}
