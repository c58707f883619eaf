//go:build realsystem

package realsys

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Deb is a small package built with dpkg-deb: a name and version as
// NVIDIA's CUDA repository has them, a few files, the relations and the
// maintainer scripts it needs. Files under /etc/ are conffiles, as
// debhelper makes them.
type Deb struct {
	Name, Version string
	Files         map[string]string // absolute path inside the package → content
	Depends       string            // the control file's Depends field, as written there
	// Maintainer scripts (whole scripts, "#!/bin/sh" first) and the
	// triggers file ("interest /path").
	Preinst, Postinst, Prerm, Postrm string
	Triggers                         string
}

// control is the package's DEBIAN/ tree: the control file, the
// conffiles list, the scripts and the triggers file, by path.
func (d Deb) control() map[string]string {
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: gpuenv tests <tests@gpuenv.invalid>\n", d.Name, d.Version)
	if d.Depends != "" {
		control += "Depends: " + d.Depends + "\n"
	}
	control += fmt.Sprintf("Description: %s test package, laid out like NVIDIA's\n", d.Name)
	out := map[string]string{"/DEBIAN/control": control}
	var conffiles []string
	for p := range d.Files {
		if strings.HasPrefix(p, "/etc/") {
			conffiles = append(conffiles, p)
		}
	}
	if len(conffiles) > 0 {
		sort.Strings(conffiles)
		out["/DEBIAN/conffiles"] = strings.Join(conffiles, "\n") + "\n"
	}
	for name, script := range map[string]string{"preinst": d.Preinst, "postinst": d.Postinst, "prerm": d.Prerm, "postrm": d.Postrm, "triggers": d.Triggers} {
		if script != "" {
			out["/DEBIAN/"+name] = script
		}
	}
	return out
}

// isScript says which DEBIAN/ files dpkg runs, and so must be executable.
func isScript(p string) bool {
	switch p {
	case "/DEBIAN/preinst", "/DEBIAN/postinst", "/DEBIAN/prerm", "/DEBIAN/postrm":
		return true
	}
	return false
}

// Build writes the package file into dir (on this machine) and returns
// its path.
func (d Deb) Build(t testing.TB, dir string) string {
	t.Helper()
	tree := filepath.Join(t.TempDir(), d.Name+"_"+d.Version)
	files := d.control()
	for p, c := range d.Files {
		files[p] = c
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		full := filepath.Join(tree, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		// A file that starts with "#!" is a program the package ships.
		if isScript(p) || strings.HasPrefix(files[p], "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(files[p]), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build %s: %v\n%s", d.Name, err, b)
	}
	return filepath.Join(dir, d.Name+"_"+d.Version+"_amd64.deb")
}

// AddRepository builds debs into a flat repository at dir inside the root
// (one directory, suite "./", as NVIDIA's CUDA repository is), indexes it
// with dpkg-scanpackages, lists it in the root's apt sources as trusted
// (the packages are unsigned; the test trusts them explicitly) and
// refreshes apt's lists for that source only.
func (r *Root) AddRepository(dir string, debs []Deb) {
	r.t.Helper()
	r.BuildRepository(dir, debs)
	r.UseRepository(filepath.Base(dir), "file://"+dir)
}

// BuildRepository builds debs into a flat repository at dir inside the
// root and indexes it, without telling apt about it.
func (r *Root) BuildRepository(dir string, debs []Deb) {
	r.t.Helper()
	out := r.Path(dir)
	for _, d := range debs {
		d.Build(r.t, out)
	}
	scan := exec.Command("dpkg-scanpackages", "--multiversion", ".")
	scan.Dir = out
	packages, err := scan.Output()
	if err != nil {
		r.t.Fatalf("dpkg-scanpackages: %v", err)
	}
	if err := os.WriteFile(filepath.Join(out, "Packages"), packages, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// UseRepository lists the flat repository at uri in the root's apt
// sources, as name.list, trusted, and refreshes apt's lists for that
// source only.
func (r *Root) UseRepository(name, uri string) {
	r.t.Helper()
	list := "/etc/apt/sources.list.d/" + name + ".list"
	r.WriteFile(list, fmt.Sprintf("deb [trusted=yes] %s ./\n", uri))
	r.MustSh("apt-get update -o Dir::Etc::sourcelist=" + strings.TrimPrefix(list, "/etc/apt/") +
		" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0")
}

// cudaToolkit is a package like NVIDIA's cuda-toolkit-X-Y: its toolkit
// directory with the version.json that names the release.
func cudaToolkit(release, full, debVersion string) Deb {
	dashed := strings.ReplaceAll(release, ".", "-")
	dir := "/usr/local/cuda-" + release
	return Deb{
		Name:    "cuda-toolkit-" + dashed,
		Version: debVersion,
		Files: map[string]string{
			dir + "/version.json": fmt.Sprintf(`{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : %q
   }
}
`, full),
			dir + "/bin/nvcc": "#!/bin/sh\necho 'Cuda compilation tools, release " + release + "'\n",
		},
	}
}

// Wheel is a small pure-Python wheel named like a real one.
type Wheel struct {
	Name, Version string
	Files         map[string]string // path inside the wheel → content
}

// filename is the wheel's file name; the tag is the pure-Python one,
// which any interpreter accepts.
func (w Wheel) filename() string { return w.Name + "-" + w.Version + "-py3-none-any.whl" }

// build writes the wheel: its files, and the dist-info pip needs
// (METADATA, WHEEL, RECORD with each file's hash).
func (w Wheel) build(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	distInfo := w.Name + "-" + w.Version + ".dist-info/"
	files := maps.Clone(w.Files)
	files[distInfo+"METADATA"] = fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s test wheel\n", w.Name, w.Version, w.Name)
	files[distInfo+"WHEEL"] = "Wheel-Version: 1.0\nGenerator: gpuenv-realsys\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	for _, p := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256([]byte(files[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", distInfo)
	files[distInfo+"RECORD"] = record.String()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		zf, err := zw.Create(p)
		if err != nil {
			return err
		}
		if _, err := zf.Write([]byte(files[p])); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// AddPackageIndex writes a PEP 503 simple index of wheels at dir inside the
// root: dir/simple/<project>/ holds the wheels and an index.html linking
// them, so that pip's --index-url file://dir/simple finds them.
func (r *Root) AddPackageIndex(dir string, wheels []Wheel) {
	r.t.Helper()
	projects := map[string][]Wheel{}
	for _, w := range wheels {
		projects[w.Name] = append(projects[w.Name], w)
	}
	var top strings.Builder
	top.WriteString("<!DOCTYPE html>\n<html><body>\n")
	for _, name := range slices.Sorted(maps.Keys(projects)) {
		fmt.Fprintf(&top, "<a href=\"%s/\">%s</a>\n", name, name)
		var page strings.Builder
		page.WriteString("<!DOCTYPE html>\n<html><body>\n")
		for _, w := range projects[name] {
			p := r.Path(filepath.Join(dir, "simple", name, w.filename()))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				r.t.Fatal(err)
			}
			if err := w.build(p); err != nil {
				r.t.Fatal(err)
			}
			fmt.Fprintf(&page, "<a href=\"%s\">%s</a>\n", url.PathEscape(w.filename()), w.filename())
		}
		page.WriteString("</body></html>\n")
		r.WriteFile(filepath.Join(dir, "simple", name, "index.html"), page.String())
	}
	top.WriteString("</body></html>\n")
	r.WriteFile(filepath.Join(dir, "simple", "index.html"), top.String())
}

// torchWheel is a wheel named like PyTorch's CUDA builds, with the
// torch/version.py a real one has.
func torchWheel(version, cuda string) Wheel {
	return Wheel{
		Name:    "torch",
		Version: version,
		Files: map[string]string{
			"torch/__init__.py": "from .version import __version__\n",
			"torch/version.py": fmt.Sprintf(`from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
__version__ = '%s'
debug = False
cuda: Optional[str] = '%s'
git_version = '0000000000000000000000000000000000000000'
hip: Optional[str] = None
`, version, cuda),
		},
	}
}

// SignRepository makes the flat repository at dir inside the root one apt
// accepts by signature, as it does NVIDIA's: a Release file with the
// Packages index's hash, signed inline (InRelease) with a key made for the
// test, whose public half it writes into the root at keyring.
func (r *Root) SignRepository(dir, keyring string) {
	r.t.Helper()
	out := r.Path(dir)
	packages, err := os.ReadFile(filepath.Join(out, "Packages"))
	if err != nil {
		r.t.Fatal(err)
	}
	sum := sha256.Sum256(packages)
	release := fmt.Sprintf("Origin: gpuenv tests\nLabel: %s\nDate: %s\nSHA256:\n %x %d Packages\n",
		filepath.Base(dir), time.Now().UTC().Format(time.RFC1123), sum, len(packages))
	if err := os.WriteFile(filepath.Join(out, "Release"), []byte(release), 0o644); err != nil {
		r.t.Fatal(err)
	}
	home := r.t.TempDir()
	gpg := func(args ...string) []byte {
		r.t.Helper()
		cmd := exec.Command("gpg", append([]string{"--batch", "--homedir", home, "--pinentry-mode", "loopback", "--passphrase", ""}, args...)...)
		b, err := cmd.Output()
		if err != nil {
			r.t.Fatalf("gpg %v: %v", args, err)
		}
		return b
	}
	// gpg starts an agent for the home directory; it must not outlive
	// the test.
	defer exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run()
	gpg("--quick-gen-key", "gpuenv tests <tests@gpuenv.invalid>", "ed25519", "sign", "never")
	gpg("--output", filepath.Join(out, "InRelease"), "--clearsign", filepath.Join(out, "Release"))
	key := gpg("--export")
	if err := os.MkdirAll(filepath.Dir(r.Path(keyring)), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(r.Path(keyring), key, 0o644); err != nil {
		r.t.Fatal(err)
	}
}
