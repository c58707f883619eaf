package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"

	"github.com/gpuenv/gpuenv/internal/manpage"
	"github.com/gpuenv/gpuenv/internal/release"
)

//go:embed files
var embedded embed.FS

// Result names what Build wrote.
type Result struct {
	Version string // the packages' version, as "gpuenv version" prints it
	Deb     string // path of the .deb
	RPM     string // path of the .rpm
}

// Where each format keeps what differs between distributions.
const (
	// Debian 12 still ships units under /lib: dpkg tracks paths, and a
	// unit under /usr/lib would be a second name for the same file on a
	// merged-/usr system.
	debUnitDir = "/lib/systemd/system"
	rpmUnitDir = "/usr/lib/systemd/system"
	// Debian's zsh searches vendor-completions; Fedora's, site-functions.
	debZshDir = "/usr/share/zsh/vendor-completions"
	rpmZshDir = "/usr/share/zsh/site-functions"
)

// Build builds gpuenv from the module at mod and writes its .deb and .rpm
// into out. A package is written under a temporary name and renamed, so
// out never holds a partial one.
func Build(ctx context.Context, mod, out string) (*Result, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("the packages are for linux/amd64 and the binary is run to write its completions and manual page; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	stage, err := os.MkdirTemp("", "gpuenv-package-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)

	commit, err := gitCommit(ctx, mod)
	if err != nil {
		return nil, err
	}
	version := release.WithCommit(commit.rev, commit.dirty)
	bin := filepath.Join(stage, "gpuenv")
	ldflags := ""
	if commit.rev != "" {
		ldflags = release.LinkerFlags(commit.rev, commit.dirty)
	}
	if err := goBuild(ctx, mod, bin, ldflags); err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, bin, version); err != nil {
		return nil, err
	}
	glibc, err := glibcRequired(bin)
	if err != nil {
		return nil, err
	}

	contents, err := stageContents(ctx, stage, bin, mod, version)
	if err != nil {
		return nil, err
	}
	scripts := func(name string) string { return filepath.Join(stage, "scripts", name) }
	if err := extract("files", stage, "scripts", "deb-postinst", "deb-prerm", "deb-postrm", "rpm-post", "rpm-preun", "rpm-postun"); err != nil {
		return nil, err
	}

	cfg := nfpm.Config{Info: nfpm.Info{
		Name:        "gpuenv",
		Arch:        "amd64",
		Platform:    "linux",
		Version:     version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "The gpuenv project <https://github.com/gpuenv/gpuenv/issues>",
		Homepage:    "https://github.com/gpuenv/gpuenv",
		Description: description,
		// Globbing would read a '[' or '*' in a staged path as a pattern.
		DisableGlobbing: true,
		MTime:           commit.time,
		Overridables: nfpm.Overridables{
			Contents: contents,
			RPM: nfpm.RPM{
				Summary: summary,
				Group:   "Applications/System",
			},
		},
	}}
	cfg.Overrides = map[string]*nfpm.Overridables{
		"deb": {
			Depends: []string{"libc6 (>= " + glibc + ")"},
			Scripts: nfpm.Scripts{PostInstall: scripts("deb-postinst"), PreRemove: scripts("deb-prerm"), PostRemove: scripts("deb-postrm")},
		},
		"rpm": {
			Depends: []string{"glibc >= " + glibc},
			Scripts: nfpm.Scripts{PostInstall: scripts("rpm-post"), PreRemove: scripts("rpm-preun"), PostRemove: scripts("rpm-postun")},
		},
	}
	res := &Result{Version: version}
	for _, p := range []struct {
		format string
		pkgr   nfpm.Packager
		dst    *string
	}{{"deb", deb.Default, &res.Deb}, {"rpm", rpm.DefaultRPM, &res.RPM}} {
		if *p.dst, err = writePackage(&cfg, p.format, p.pkgr, out); err != nil {
			return nil, err
		}
	}
	return res, nil
}

const summary = "Declarative NVIDIA GPU environments: observe, plan, apply, roll back"

const description = summary + `
gpuenv makes a Linux host's NVIDIA GPU stack (driver and kernel modules,
CUDA toolkit, cuDNN, PyTorch, TensorFlow, JAX, GPU groups) match a spec
written in HCL, explaining every change before it makes it, applying it
journaled and reversibly, and rolling it back. The package includes a
systemd timer that plans /etc/gpuenv hourly and records the drift; it
never applies.`

// writePackage writes one format's package into out under nfpm's
// conventional name.
func writePackage(cfg *nfpm.Config, format string, pkgr nfpm.Packager, out string) (string, error) {
	info, err := cfg.Get(format)
	if err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return "", fmt.Errorf("%s: %w", format, err)
	}
	dst := filepath.Join(out, pkgr.ConventionalFileName(info))
	tmp, err := os.CreateTemp(out, ".gpuenv-*."+format)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	info.Target = dst
	if err := pkgr.Package(info, tmp); err != nil {
		tmp.Close()
		return "", fmt.Errorf("%s: %w", format, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}

// moduleDir is the root of the gpuenv module this command runs in.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the gpuenv module: run it from the repository, as go run ./deploy/package")
	}
	return filepath.Dir(gomod), nil
}

// goBuild builds gpuenv with cgo (go-nvml needs it), without the build
// machine's paths.
func goBuild(ctx context.Context, mod, bin, ldflags string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", bin, "./cmd/gpuenv")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOOS=linux", "GOARCH=amd64")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/gpuenv: %v\n%s", err, stderr.Bytes())
	}
	return nil
}

// commit is the source a package is built from.
type commit struct {
	rev   string // full id; "" outside a git checkout
	dirty bool   // tracked files differ from rev
	time  time.Time
}

// gitCommit reads the checkout at mod. Untracked files (dist/, a built
// gpuenv) do not make it dirty: they are not part of the build. Outside a
// checkout (a source tarball) the version is the release alone, and the
// files are stamped now.
func gitCommit(ctx context.Context, mod string) (commit, error) {
	c := commit{time: time.Now().UTC().Truncate(time.Second)}
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", mod}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		return c, nil
	}
	if inside, err := git("rev-parse", "--is-inside-work-tree"); err != nil || inside != "true" {
		return c, nil
	}
	out, err := git("show", "-s", "--format=%H %ct", "HEAD")
	if err != nil {
		return c, err
	}
	rev, secs, _ := strings.Cut(out, " ")
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return c, fmt.Errorf("git show: commit time %q: %v", secs, err)
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return c, err
	}
	return commit{rev: rev, dirty: status != "", time: time.Unix(n, 0).UTC()}, nil
}

// checkVersion runs the built binary: the package's version is only right
// if it is what "gpuenv version" prints.
func checkVersion(ctx context.Context, bin, want string) error {
	out, err := exec.CommandContext(ctx, bin, "version", "--json").Output()
	if err != nil {
		return fmt.Errorf("gpuenv version --json: %w", err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return fmt.Errorf("gpuenv version --json: %w", err)
	}
	if v.Version != want {
		return fmt.Errorf("the built gpuenv says it is %s, the package would be %s", v.Version, want)
	}
	return nil
}

// glibcRequired is the newest GLIBC_x.y symbol version bin links against:
// the least C library it runs with, which the packages depend on as
// dpkg-shlibdeps would work it out.
func glibcRequired(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	syms, err := f.ImportedSymbols()
	if err != nil {
		return "", fmt.Errorf("%s: imported symbols: %w (was it built with cgo?)", bin, err)
	}
	best, bestKey := "", [2]int{}
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		major, minor, ok := strings.Cut(v, ".")
		maj, err1 := strconv.Atoi(major)
		min, err2 := strconv.Atoi(strings.SplitN(minor, ".", 2)[0])
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		if k := [2]int{maj, min}; best == "" || k[0] > bestKey[0] || k[0] == bestKey[0] && k[1] > bestKey[1] {
			best, bestKey = fmt.Sprintf("%d.%d", maj, min), k
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s links no versioned glibc symbol: gpuenv must be built with cgo", bin)
	}
	return best, nil
}

// extract copies embedded files from dir into stage/sub.
func extract(dir, stage, sub string, names ...string) error {
	if err := os.MkdirAll(filepath.Join(stage, sub), 0o755); err != nil {
		return err
	}
	for _, n := range names {
		b, err := embedded.ReadFile(path.Join(dir, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(stage, sub, n), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// stageContents writes what the binary generates, and lists every file and
// directory of the packages with its owner and mode.
func stageContents(ctx context.Context, stage, bin, mod, version string) (files.Contents, error) {
	gen := func(name string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("gpuenv %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		p := filepath.Join(stage, name)
		return p, os.WriteFile(p, b, 0o644)
	}
	var c files.Contents
	file := func(src, dst string, mode fs.FileMode, packager string) {
		c = append(c, &files.Content{Source: src, Destination: dst, Packager: packager,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}})
	}
	file(bin, "/usr/bin/gpuenv", 0o755, "")

	bash, err := gen("gpuenv.bash", "completion", "bash")
	if err != nil {
		return nil, err
	}
	zsh, err := gen("_gpuenv", "completion", "zsh")
	if err != nil {
		return nil, err
	}
	fish, err := gen("gpuenv.fish", "completion", "fish")
	if err != nil {
		return nil, err
	}
	man, err := gen("gpuenv.1", "man")
	if err != nil {
		return nil, err
	}
	manGz := man + ".gz"
	if err := gzipFile(man, manGz); err != nil {
		return nil, err
	}
	file(bash, "/usr/share/bash-completion/completions/gpuenv", 0o644, "")
	file(zsh, debZshDir+"/_gpuenv", 0o644, "deb")
	file(zsh, rpmZshDir+"/_gpuenv", 0o644, "rpm")
	file(fish, "/usr/share/fish/vendor_completions.d/gpuenv.fish", 0o644, "")
	file(manGz, "/usr/share/man/man1/gpuenv.1.gz", 0o644, "")
	specMan, err := specPage(stage, mod, version)
	if err != nil {
		return nil, err
	}
	file(specMan, "/usr/share/man/man5/gpuenv-spec.5.gz", 0o644, "")
	// slurmd starts HealthCheckProgram and Prolog without arguments, so
	// slurm.conf names this link and gpuenv takes its name for the
	// command (cmd/gpuenv/main.go, slurmHealthName).
	c = append(c, &files.Content{Source: "/usr/bin/gpuenv", Destination: "/usr/sbin/gpuenv-slurm-health", Type: files.TypeSymlink,
		FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: 0o777}})

	if err := extract("files", stage, "units", "gpuenv-drift.service", "gpuenv-drift.timer", "README"); err != nil {
		return nil, err
	}
	for _, u := range []string{"gpuenv-drift.service", "gpuenv-drift.timer"} {
		file(filepath.Join(stage, "units", u), debUnitDir+"/"+u, 0o644, "deb")
		file(filepath.Join(stage, "units", u), rpmUnitDir+"/"+u, 0o644, "rpm")
	}
	file(filepath.Join(stage, "units", "README"), "/usr/share/doc/gpuenv/README", 0o644, "")

	examples := filepath.Join(mod, "examples")
	err = filepath.WalkDir(examples, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: the examples hold only regular files", p)
		}
		rel, err := filepath.Rel(examples, p)
		if err != nil {
			return err
		}
		file(p, "/usr/share/doc/gpuenv/examples/"+filepath.ToSlash(rel), 0o644, "")
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("examples: %w", err)
	}

	dir := func(dst string, mode fs.FileMode) {
		c = append(c, &files.Content{Destination: dst, Type: files.TypeDir,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}})
	}
	// The spec directory ships empty: the spec is the administrator's,
	// never replaced by an upgrade, and dpkg keeps a directory it owns for
	// as long as it holds their files.
	dir("/etc/gpuenv", 0o755)
	// gpuenv's state directory, with the owner and mode gpuenv demands of
	// it (apply.stateDirMode): every user may reach the drift file and
	// status, none may list the generations.
	dir("/var/lib/gpuenv", 0o711)
	return c, nil
}

// gzipFile compresses src into dst without a name or time in the header,
// so the same page gives the same bytes.
func gzipFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// specPage makes gpuenv-spec(5) from the manual's spec reference chapter,
// at each build, so that the page and the chapter are one text.
func specPage(stage, mod, version string) (string, error) {
	md, err := os.ReadFile(filepath.Join(mod, "docs", "spec-reference.md"))
	if err != nil {
		return "", err
	}
	page, err := manpage.Render(md, manpage.Page{
		Name:    "gpuenv-spec",
		Section: 5,
		Summary: "the spec language of gpuenv",
		Source:  "gpuenv " + version,
		Manual:  "File Formats",
		SeeAlso: []string{"gpuenv(1)"},
	})
	if err != nil {
		return "", fmt.Errorf("docs/spec-reference.md: %w", err)
	}
	raw := filepath.Join(stage, "gpuenv-spec.5")
	if err := os.WriteFile(raw, page, 0o644); err != nil {
		return "", err
	}
	return raw + ".gz", gzipFile(raw, raw+".gz")
}
