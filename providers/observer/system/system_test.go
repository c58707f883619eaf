package system_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/observer/system"
)

func observe(t *testing.T, root string) *facts.Observation {
	t.Helper()
	h := hosttest.New(t, root)
	obs := &facts.Observation{}
	system.Observe(context.Background(), h, obs)
	return obs
}

func TestObserveFixtures(t *testing.T) {
	cases := []struct {
		fixture string
		os      facts.OS
		release string
		sb      string
		pid1    string
	}{
		{"ubuntu2204-h100-fresh", facts.OS{ID: "ubuntu", IDLike: []string{"debian"}, VersionID: "22.04", Codename: "jammy", Name: "Ubuntu 22.04.4 LTS", Family: "deb", Arch: "x86_64"}, "5.15.0-105-generic", "enabled", "systemd"},
		{"debian12-distro", facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Name: "Debian GNU/Linux 12 (bookworm)", Family: "deb", Arch: "x86_64"}, "6.1.0-28-amd64", "disabled", "systemd"},
		{"rhel9", facts.OS{ID: "rhel", IDLike: []string{"fedora"}, VersionID: "9.4", Name: "Red Hat Enterprise Linux 9.4 (Plow)", Family: "rpm"}, "5.14.0-427.13.1.el9_4.x86_64", "unknown", "systemd"},
		// A container: process 1 is its shell, and /proc is the host's
		// kernel's otherwise.
		{"ubuntu2204-container", facts.OS{ID: "ubuntu", IDLike: []string{"debian"}, VersionID: "22.04", Codename: "jammy", Name: "Ubuntu 22.04.4 LTS", Family: "deb"}, "5.15.0-105-generic", "unknown", "bash"},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			obs := observe(t, hosttest.Build(t, c.fixture))
			if diff := cmp.Diff(c.os, obs.OS); diff != "" {
				t.Errorf("OS (-want +got):\n%s", diff)
			}
			if obs.Kernel.Release != c.release || obs.Kernel.SecureBoot != c.sb {
				t.Errorf("kernel %q, Secure Boot %q; want %q, %q", obs.Kernel.Release, obs.Kernel.SecureBoot, c.release, c.sb)
			}
			// A fixture root is not the running system, whatever its
			// /proc says: systemd runs it only once it boots.
			if want := (facts.Init{PID1: c.pid1}); obs.Init != want {
				t.Errorf("init %+v, want %+v", obs.Init, want)
			}
			if len(obs.Warnings) != 0 {
				t.Errorf("warnings: %v", obs.Warnings)
			}
		})
	}
}

// TestInitUnreadable: a /proc/1/comm that cannot be read is a warning
// naming it, and systemd is not taken to run the root.
func TestInitUnreadable(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, system.InitComm), 0o755); err != nil {
		t.Fatal(err)
	}
	obs := observe(t, root)
	if obs.Init != (facts.Init{}) {
		t.Errorf("init %+v", obs.Init)
	}
	found := false
	for _, w := range obs.Warnings {
		found = found || w.Path == system.InitComm
	}
	if !found {
		t.Errorf("no warning for %s: %v", system.InitComm, obs.Warnings)
	}
}

// TestBrokenFiles: a truncated os-release, a garbage kernel release and a
// short efivar each give a warning naming the file, and what can still be
// read is kept.
func TestBrokenFiles(t *testing.T) {
	root := t.TempDir()
	hosttest.WriteFile(t, root, "etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.")
	hosttest.WriteFile(t, root, "proc/sys/kernel/osrelease", "\x00\x01 garbage here\n")
	hosttest.WriteFile(t, root, "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", "\x06\x00")
	obs := observe(t, root)
	if obs.OS.ID != "ubuntu" || obs.OS.VersionID != "22.04" || obs.OS.Family != "deb" || obs.OS.Name != "" {
		t.Errorf("OS = %+v; want the lines before the truncation", obs.OS)
	}
	want := map[string]string{
		system.OSReleasePath: "unterminated double quote",
		system.KernelRelease: "not a kernel release",
		system.SecureBootVar: "2 bytes",
	}
	for _, w := range obs.Warnings {
		if frag, ok := want[w.Path]; ok && strings.Contains(w.Message, frag) {
			delete(want, w.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing warnings %v; got %v", want, obs.Warnings)
	}
	if obs.Kernel.Release != "" || obs.Kernel.SecureBoot != "unknown" {
		t.Errorf("kernel %q, Secure Boot %q", obs.Kernel.Release, obs.Kernel.SecureBoot)
	}
}

func TestNoOSRelease(t *testing.T) {
	obs := observe(t, t.TempDir())
	if obs.OS.Family != "" || len(obs.Warnings) == 0 || obs.Warnings[0].Path != system.OSReleasePath {
		t.Errorf("OS %+v, warnings %v", obs.OS, obs.Warnings)
	}
}

func TestOSReleaseFallback(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755)
	os.WriteFile(filepath.Join(root, "usr/lib/os-release"), []byte("ID=debian\n"), 0o644)
	if obs := observe(t, root); obs.OS.ID != "debian" {
		t.Errorf("/usr/lib/os-release not read: %+v", obs.OS)
	}
}

func TestParseOSRelease(t *testing.T) {
	kv, errs := system.ParseOSRelease([]byte(`# comment
NAME="Debian GNU/Linux"
ID=debian
QUOTED='single "q"'
ESC="a \"b\" \$c \\d"
EMPTY=
bad line
=novalue
UNQUOTED=two words
`))
	want := map[string]string{"NAME": "Debian GNU/Linux", "ID": "debian", "QUOTED": `single "q"`, "ESC": `a "b" $c \d`, "EMPTY": ""}
	if diff := cmp.Diff(want, kv); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(errs) != 3 {
		t.Errorf("errors %v, want 3 (lines 8, 9, 10)", errs)
	}
}

func TestFamily(t *testing.T) {
	for _, c := range []struct {
		id   string
		like []string
		want string
	}{
		{"ubuntu", []string{"debian"}, "deb"},
		{"linuxmint", []string{"ubuntu", "debian"}, "deb"},
		{"rocky", []string{"rhel", "centos", "fedora"}, "rpm"},
		{"rhel", []string{"fedora"}, "rpm"},
		{"arch", nil, ""},
	} {
		if got := system.Family(c.id, c.like); got != c.want {
			t.Errorf("Family(%q, %q) = %q, want %q", c.id, c.like, got, c.want)
		}
	}
}

func TestSecureBoot(t *testing.T) {
	for in, want := range map[string]string{"\x06\x00\x00\x00\x01": "enabled", "\x06\x00\x00\x00\x00": "disabled", "\x06\x00\x00\x00\x07": "unknown", "": "unknown"} {
		got, err := system.SecureBoot([]byte(in))
		if got != want || (want == "unknown") != (err != nil) {
			t.Errorf("SecureBoot(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestLiveRoot(t *testing.T) {
	if _, err := os.Stat("/etc/os-release"); err != nil {
		t.Skip("this machine has no /etc/os-release")
	}
	obs := observe(t, "/")
	if obs.OS.ID == "" || obs.Kernel.Release == "" || obs.OS.Arch == "" {
		t.Errorf("live root: OS %+v, kernel %q", obs.OS, obs.Kernel.Release)
	}
	// Process 1 of this machine is whatever runs the tests' container or
	// host: systemd or not, the observation says what /proc says.
	comm, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		t.Skipf("no /proc/1/comm: %v", err)
	}
	pid1 := strings.TrimSpace(string(comm))
	// Whether the tests run in a chroot, or where even root may not look
	// at process 1's root, is the machine's too.
	chroot := ""
	if fi, err := os.Stat("/proc/1/root"); err == nil && !os.SameFile(fi, must(os.Stat("/"))) {
		chroot = "yes"
	} else if errors.Is(err, fs.ErrPermission) && os.Geteuid() == 0 {
		chroot = "unknown"
	}
	if want := (facts.Init{PID1: pid1, Live: true, Systemd: pid1 == "systemd", Chroot: chroot}); obs.Init != want {
		t.Errorf("live root: init %+v, want %+v", obs.Init, want)
	}
}

// A root made to stand for the running system (the fault matrix's
// chroot, with GPUENV_FAULT_RUNNING_SYSTEM) is no chroot's, whatever "/"
// is: where the tests run in a chroot, or where process 1's root is
// hidden, the plain observation above says so and this one must not.
func TestRunningSystemOptionIsNoChroot(t *testing.T) {
	h, err := host.New("/", host.AsRunningSystem())
	if err != nil {
		t.Fatal(err)
	}
	obs := &facts.Observation{}
	system.Observe(context.Background(), h, obs)
	if !obs.Init.Live || obs.Init.Chroot != "" {
		t.Errorf("/ made the running system: init %+v, want live and no chroot", obs.Init)
	}
	t.Logf("without the option: chroot %q", observe(t, "/").Init.Chroot)
}

func must(fi os.FileInfo, err error) os.FileInfo {
	if err != nil {
		panic(err)
	}
	return fi
}

func FuzzParseOSRelease(f *testing.F) {
	for _, s := range []string{
		"NAME=\"Ubuntu\"\nID=ubuntu\n", "A='b'\nC=\"d\\\"e\"", "X=\"unterminated", "=", "A=\\", "A='", "K=v\\\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kv, errs := system.ParseOSRelease(data)
		for k := range kv {
			if k == "" || strings.ContainsAny(k, "\n=") {
				t.Errorf("bad key %q", k)
			}
		}
		_ = errs
	})
}

// TestHostname: a root's name is its /etc/hostname, comments skipped;
// a root without one has none, and that is no warning. The running
// system's is the kernel's, which fleet tools report.
func TestHostname(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"plain", "gpu-017\n", "gpu-017"},
		{"comments and blanks", "# set by the installer\n\n  node-a.example.org  \n", "node-a.example.org"},
		{"only comments", "# nothing\n", ""},
		{"no file", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "etc"), 0o755)
			os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("ID=debian\n"), 0o644)
			if tc.file != "" {
				os.WriteFile(filepath.Join(root, "etc/hostname"), []byte(tc.file), 0o644)
			}
			obs := observe(t, root)
			if obs.Hostname != tc.want {
				t.Errorf("hostname %q, want %q", obs.Hostname, tc.want)
			}
			for _, w := range obs.Warnings {
				if strings.Contains(w.Path, "hostname") {
					t.Errorf("warning %+v", w)
				}
			}
		})
	}
	kernel, err := os.ReadFile("/proc/sys/kernel/hostname")
	if err != nil {
		t.Skipf("no kernel hostname: %v", err)
	}
	if got, want := observe(t, "/").Hostname, strings.TrimSpace(string(kernel)); got != want {
		t.Errorf("live root: hostname %q, want the kernel's %q", got, want)
	}
}

// TestChrootWithoutProc: a process chrooted into a directory where no
// /proc is mounted, as an image being built often is, observes its root
// as a chroot's: no running system's root lacks /proc. The test runs
// itself again, chrooted into an empty directory.
func TestChrootWithoutProc(t *testing.T) {
	if dir := os.Getenv("GPUENV_TEST_CHROOT"); dir != "" {
		if err := syscall.Chroot(dir); err != nil {
			fmt.Println("chroot:", err)
			os.Exit(3)
		}
		if err := os.Chdir("/"); err != nil {
			os.Exit(3)
		}
		h, err := host.New("/")
		if err != nil {
			os.Exit(3)
		}
		obs := &facts.Observation{}
		system.Observe(context.Background(), h, obs)
		fmt.Printf("chroot=%q live=%v\n", obs.Init.Chroot, obs.Init.Live)
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChrootWithoutProc$")
	cmd.Env = append(os.Environ(), "GPUENV_TEST_CHROOT="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chrooted test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `chroot="yes" live=true`) {
		t.Errorf("chrooted into a directory without /proc, the observation says:\n%s", out)
	}
}
