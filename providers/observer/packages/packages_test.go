package packages

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// root lays out an inline txtar fixture and returns a Host on it.
func root(t testing.TB, archive string, opts ...host.Option) *host.Host {
	t.Helper()
	dir := t.TempDir()
	if err := hosttest.BuildArchive(txtar.Parse([]byte(archive)), dir, hosttest.TestdataDir(t)); err != nil {
		t.Fatal(err)
	}
	return hosttest.New(t, dir, opts...)
}

const statusHead = `-- var/lib/dpkg/status --
Package: bash
Essential: yes
Status: install ok installed
Priority: required
Architecture: amd64
Version: 5.2.15-2+b7
Description: GNU Bourne Again SHell
 Bash is an sh-compatible command language interpreter.
 .
 Package: not-a-field because continuation lines start with a space

Package: nvidia-driver
Status: hold ok installed
Priority: optional
Section: non-free/x11
Installed-Size: 1426
Maintainer: Debian NVIDIA Maintainers <pkg-nvidia-devel@lists.alioth.debian.org>
Architecture: amd64
Source: nvidia-graphics-drivers
Version: 535.261.03-1
Depends: nvidia-driver-libs (= 535.261.03-1), nvidia-kernel-dkms (= 535.261.03-1) | nvidia-kernel-535.261.03
Description: NVIDIA metapackage
 This metapackage depends on the NVIDIA binary driver.

Package: libnvidia-ml1
Status: install ok half-configured
Architecture: amd64
Multi-Arch: same
Source: nvidia-graphics-drivers (535.261.03-1)
Version: 535.309.01-0+deb12u1
Description: NVIDIA Management Library (NVML) runtime library

Package: nvidia-kernel-dkms
Status: install reinstreq half-installed
Architecture: amd64
Source: nvidia-graphics-drivers
Version: 535.261.03-1
Description: NVIDIA binary kernel module DKMS source

Package: libcuda1
Status: install ok unpacked
Architecture: i386
Multi-Arch: same
Source: nvidia-graphics-drivers
Version: 535.261.03-1
Description: NVIDIA CUDA Driver Library

Package: libcuda1
Status: install ok triggers-pending
Architecture: amd64
Multi-Arch: same
Source: nvidia-graphics-drivers
Version: 535.261.03-1
Triggers-Pending: ldconfig
Description: NVIDIA CUDA Driver Library

Package: nvidia-smi
Status: deinstall ok config-files
Architecture: amd64
Source: nvidia-graphics-drivers
Config-Version: 535.216.03-1
Description: NVIDIA System Management Interface

Package: nvidia-persistenced
Status: purge ok not-installed
Architecture: amd64

Package: zlib1g
Status: install ok installed
Architecture: amd64
Version: 1:1.2.13.dfsg-1
Description: compression library - runtime
`

func TestDpkgStatus(t *testing.T) {
	h := root(t, statusHead)
	got, warns := Observe(context.Background(), h, "deb")
	hosttest.NoWarnings(t, warns)
	want := facts.Packages{
		Manager: "dpkg",
		// Every package but the purged nvidia-persistenced.
		Total: 8,
		Packages: []facts.Package{
			{Name: "libcuda1", Version: "535.261.03-1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "triggers-pending", Want: "install"},
			{Name: "libcuda1", Version: "535.261.03-1", Architecture: "i386", Source: "nvidia-graphics-drivers", State: "unpacked", Want: "install"},
			{Name: "libnvidia-ml1", Version: "535.309.01-0+deb12u1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "half-configured", Want: "install"},
			{Name: "nvidia-driver", Version: "535.261.03-1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "installed", Want: "hold", Hold: true},
			{Name: "nvidia-kernel-dkms", Version: "535.261.03-1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "half-installed", Want: "install", ReinstallRequired: true},
			{Name: "nvidia-smi", Version: "535.216.03-1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "config-files", Want: "deinstall"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	if p, ok := pkgdb.Installed(got, "nvidia-smi", pkgdb.FilesPresent); ok {
		t.Errorf("Installed(nvidia-smi) = %v: config-files leave no program", p)
	}
	if p, ok := pkgdb.Installed(got, "nvidia-driver", pkgdb.FilesPresent); !ok || p.Version != "535.261.03-1" {
		t.Errorf("Installed(nvidia-driver) = %v, %v", p, ok)
	}
}

func TestDpkgFamilyUnknown(t *testing.T) {
	h := root(t, statusHead)
	got, _ := Observe(context.Background(), h, "")
	if got.Manager != "dpkg" || got.Total != 8 {
		t.Errorf("with no family and a dpkg database: manager %q, total %d", got.Manager, got.Total)
	}
	empty := root(t, "-- etc/hostname --\nx\n")
	got, warns := Observe(context.Background(), empty, "")
	if got.Manager != "" || len(got.Packages) != 0 || len(warns) != 0 {
		t.Errorf("no database: %+v %v", got, warns)
	}
	got, warns = Observe(context.Background(), empty, "deb")
	if len(warns) != 1 || warns[0].Path != pkgdb.StatusPath || got.Manager != "dpkg" {
		t.Errorf("deb family without a database: %+v %v", got, warns)
	}
}

// TestDpkgJournal: after an interrupted run, dpkg's journal entries
// replace the status file's paragraphs.
func TestDpkgJournal(t *testing.T) {
	h := root(t, statusHead+`
-- var/lib/dpkg/updates/0000 --
Package: nvidia-driver
Status: install ok unpacked
Architecture: amd64
Source: nvidia-graphics-drivers
Version: 535.309.01-0+deb12u1

-- var/lib/dpkg/updates/0001 --
Package: bash
Status: purge ok not-installed
Architecture: amd64

Package: nvidia-driver
Status: install ok half-configured
Architecture: amd64
Source: nvidia-graphics-drivers
Version: 535.309.01-0+deb12u1

-- var/lib/dpkg/updates/tmp.i --
Package: nvidia-driver
Status: garbage
`)
	got, warns := Observe(context.Background(), h, "deb")
	hosttest.NoWarnings(t, warns)
	if !got.Interrupted {
		t.Error("Interrupted = false with journal entries")
	}
	if got.Total != 7 {
		t.Errorf("Total = %d, want 7 (bash removed by the journal)", got.Total)
	}
	p, ok := pkgdb.Installed(got, "nvidia-driver", pkgdb.FilesPresent)
	if !ok || p.Version != "535.309.01-0+deb12u1" || p.State != "half-configured" || p.Hold {
		t.Errorf("nvidia-driver = %+v, want the journal's newest entry", p)
	}
	n := 0
	for _, p := range got.Packages {
		if p.Name == "nvidia-driver" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("nvidia-driver listed %d times", n)
	}
}

func TestDpkgMalformed(t *testing.T) {
	cases := []struct {
		name     string
		status   string
		total    int
		packages []string
		warn     string // substring of a warning; "" for none
	}{
		{
			name:     "truncated mid-paragraph",
			status:   "Package: nvidia-driver\nStatus: install ok installed\nArchitecture: amd64\nVersion: 535.261.03-1\n\nPackage: libcuda1\nStatus: install ok inst",
			total:    1,
			packages: []string{"nvidia-driver"},
			warn:     "does not end with a newline",
		},
		{
			name:     "bad status word",
			status:   "Package: libcuda1\nStatus: install ok inst\nVersion: 1\n",
			packages: nil,
			warn:     `unrecognised Status "install ok inst"`,
		},
		{
			name:     "line without colon",
			status:   "Package: nvidia-smi\nStatus: install ok installed\nthis line has no colon\n\nPackage: bash\nStatus: install ok installed\n",
			total:    1,
			packages: nil,
			warn:     "package nvidia-smi",
		},
		{
			name:   "paragraph without Package",
			status: "Status: install ok installed\nVersion: 1\n\nPackage: bash\nStatus: install ok installed\n",
			total:  1,
			warn:   "paragraph 1 has no Package field",
		},
		{
			name:   "unrelated package without Status",
			status: "Package: bash\nVersion: 1\n",
			total:  1,
			warn:   "package bash has no Status field",
		},
		{
			name:     "relevant package without Version",
			status:   "Package: cuda-toolkit-12-4\nStatus: install ok installed\n",
			total:    1,
			packages: []string{"cuda-toolkit-12-4"},
			warn:     "has no Version field",
		},
		{
			name:     "Package not the first field",
			status:   "Package: bash\nStatus: install ok installed\n\nStatus: install ok installed\nPackage: nvidia-smi\nArchitecture: amd64\nVersion: 535.261.03-1\n\nPackage: libc6\nStatus: install ok installed\nVersion: 1\nPackage: libc6\n",
			total:    3,
			packages: []string{"nvidia-smi"},
		},
		{
			name:     "blank line inside a reported package",
			status:   "Package: nvidia-smi\nStatus: install ok installed\nVersion: 535.261.03-1\n\nDescription: stray\n\nPackage: bash\nStatus: install ok installed\n",
			total:    2,
			packages: []string{"nvidia-smi"},
			warn:     "package nvidia-smi: a blank line inside its paragraph",
		},
		{
			name:   "binary garbage",
			status: "\x00\x01\x02\n\n\xff\xfe",
			warn:   "has no Package field",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := root(t, "-- var/lib/dpkg/status --\n"+c.status)
			// txtar adds a final newline to a member; write the file as
			// the case has it.
			if err := os.WriteFile(filepath.Join(h.Root(), pkgdb.StatusPath), []byte(c.status), 0o644); err != nil {
				t.Fatal(err)
			}
			got, warns := Observe(context.Background(), h, "deb")
			var names []string
			for _, p := range got.Packages {
				names = append(names, p.Name)
			}
			if got.Total != c.total || !cmp.Equal(names, c.packages) {
				t.Errorf("total %d, packages %v; want %d, %v", got.Total, names, c.total, c.packages)
			}
			found := false
			for _, w := range warns {
				if w.Path != pkgdb.StatusPath {
					t.Errorf("warning %+v does not name %s", w, pkgdb.StatusPath)
				}
				found = found || strings.Contains(w.Message, c.warn)
			}
			if c.warn == "" && len(warns) != 0 {
				t.Errorf("warnings: %v", warns)
			}
			if c.warn != "" && !found {
				t.Errorf("no warning containing %q in %v", c.warn, warns)
			}
		})
	}
}

// fakeRunner stands in for rpm(8): it records the command and answers
// with canned output.
type fakeRunner struct {
	argv   []string
	stdout string
	err    error
}

func (f *fakeRunner) Run(_ context.Context, c host.Command) error {
	f.argv = c.Argv
	if c.Stdout != nil {
		io.WriteString(c.Stdout, f.stdout)
	}
	if f.err != nil && c.Stderr != nil {
		io.WriteString(c.Stderr, "error: cannot open Packages database in /var/lib/rpm\n")
	}
	return f.err
}

const rpmOutput = "bash\t0\t5.1.8\t9.el9\tx86_64\tbash-5.1.8-9.el9.src.rpm\n" +
	"gpg-pubkey\t0\td42d0685\t62027e8a\t(none)\t(none)\n" +
	"nvidia-driver\t3\t550.54.15\t1.el9\tx86_64\tnvidia-driver-550.54.15-1.el9.src.rpm\n" +
	"nvidia-driver-cuda-libs\t3\t550.54.15\t1.el9\tx86_64\tnvidia-driver-550.54.15-1.el9.src.rpm\n" +
	"kmod-nvidia-latest-dkms\t3\t550.54.15\t1.el9\tx86_64\tkmod-nvidia-latest-dkms-550.54.15-1.el9.src.rpm\n" +
	"cuda-toolkit-12-4\t0\t12.4.1\t1\tx86_64\tcuda-toolkit-12-4-12.4.1-1.src.rpm\n" +
	"kernel-headers\t0\t5.14.0\t427.13.1.el9_4\tx86_64\tkernel-5.14.0-427.13.1.el9_4.src.rpm\n" +
	"broken line\n"

func TestRPM(t *testing.T) {
	r := &fakeRunner{stdout: rpmOutput}
	h := root(t, `-- etc/dnf/plugins/versionlock.list --
# Added lock on Mon Mar 4 10:00:00 2024
nvidia-driver-3:550.54.15-1.el9.*
!cuda-toolkit-12-4-0:12.4.1-1.*
`, host.WithRunner(r))
	got, warns := Observe(context.Background(), h, "rpm")
	wantArgv := []string{"chroot", h.Root(), "rpm", "-qa", "--qf", pkgdb.RPMQueryFormat}
	if !cmp.Equal(r.argv, wantArgv) {
		t.Errorf("ran %q, want %q", r.argv, wantArgv)
	}
	want := facts.Packages{
		Manager: "rpm",
		Total:   6,
		Packages: []facts.Package{
			{Name: "cuda-toolkit-12-4", Version: "12.4.1-1", Architecture: "x86_64", Source: "cuda-toolkit-12-4", State: "installed", Want: "install"},
			{Name: "kmod-nvidia-latest-dkms", Version: "3:550.54.15-1.el9", Architecture: "x86_64", Source: "kmod-nvidia-latest-dkms", State: "installed", Want: "install"},
			{Name: "nvidia-driver", Version: "3:550.54.15-1.el9", Architecture: "x86_64", Source: "nvidia-driver", State: "installed", Want: "hold", Hold: true},
			{Name: "nvidia-driver-cuda-libs", Version: "3:550.54.15-1.el9", Architecture: "x86_64", Source: "nvidia-driver", State: "installed", Want: "install"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, `line 8: unexpected output "broken line"`) {
		t.Errorf("warnings = %v", warns)
	}
}

func TestRPMFails(t *testing.T) {
	r := &fakeRunner{err: errors.New("exit status 1")}
	h := root(t, "-- etc/os-release --\nID=rhel\n", host.WithRunner(r))
	got, warns := Observe(context.Background(), h, "rpm")
	if got.Manager != "rpm" || len(got.Packages) != 0 {
		t.Errorf("got %+v", got)
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "cannot open Packages database") {
		t.Errorf("warnings = %v", warns)
	}
}

// TestDebianStartsNoProcess: on a Debian-family host no command runs.
func TestDebianStartsNoProcess(t *testing.T) {
	r := &fakeRunner{err: errors.New("must not run")}
	h := root(t, statusHead, host.WithRunner(r))
	for _, family := range []string{"deb", ""} {
		Observe(context.Background(), h, family)
		if r.argv != nil {
			t.Errorf("family %q ran %q", family, r.argv)
		}
	}
}
