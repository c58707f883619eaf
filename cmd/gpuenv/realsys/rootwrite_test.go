//go:build realsystem

package realsys

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The racer is this test binary run again, inside the root as nobody,
// with racerEnv naming the directory it races in (TestMain hands over to
// runRacer).
const (
	racerEnv       = "GPUENV_REALSYS_RACER_DIR"
	racerTargetEnv = "GPUENV_REALSYS_RACER_TARGET"
	nobody         = 65534
)

// runRacer is the unprivileged user of the probe that made root change
// /etc/shadow's mode: it keeps a symlink to the target ready in dir, and
// the moment inotify shows a new hidden entry (the temporary file of a
// whole-file write) exchanges the symlink with it, so that whatever root
// does next to that name by path lands on the target. It prints one line
// per swap and runs until it is killed.
func runRacer(dir, target string) int {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		fmt.Fprintln(os.Stderr, "racer:", err)
		return 1
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE); err != nil {
		fmt.Fprintln(os.Stderr, "racer:", err)
		return 1
	}
	// Each swap exchanges a fresh symlink with the temporary file, which
	// fails when that file is gone already: a swap counted is one root's
	// file really lost. The first link is also the sign the racer runs.
	links := 0
	link := filepath.Join(dir, ",racer")
	ready := func() { links++; link = filepath.Join(dir, fmt.Sprintf(",racer%d", links)); os.Symlink(target, link) }
	if err := os.Symlink(target, link); err != nil {
		fmt.Fprintln(os.Stderr, "racer:", err)
		return 1
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "racer:", err)
			return 1
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if !strings.HasPrefix(name, ".") {
				continue
			}
			if unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, filepath.Join(dir, name), unix.RENAME_EXCHANGE) == nil {
				fmt.Println("swapped", name)
				ready()
			}
		}
	}
}

// startRacer runs the racer in r as nobody, racing in dir (inside the
// root) for target; stop kills it and returns how many temporary files it
// swapped.
func startRacer(t *testing.T, r *Root, dir, target string) (stop func() int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r.copyFile(self, r.Path("/usr/local/bin/realsys-racer"), 0o755)
	var out, errs bytes.Buffer
	cmd := exec.Command("/usr/local/bin/realsys-racer")
	cmd.Dir = "/"
	cmd.Env = []string{racerEnv + "=" + dir, racerTargetEnv + "=" + target}
	cmd.Stdout, cmd.Stderr = &out, &errs
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     r.Dir,
		Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}},
		Setpgid:    true,
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() int {
		if !done {
			done = true
			cmd.Process.Kill()
			cmd.Wait()
			if errs.Len() > 0 {
				t.Errorf("racer: %s", errs.String())
			}
		}
		return strings.Count(out.String(), "swapped ")
	}
	t.Cleanup(func() { stop() })
	// The racer watches once its symlink is there.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(r.Path(dir + "/,racer")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the racer did not start: %s", errs.String())
		}
	}
	return stop
}

// fileMode is the permission bits of p inside r.
func fileMode(t *testing.T, r *Root, p string) uint32 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(r.Path(p), &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// Issue 26's probe: Debian's prometheus-node-exporter gives
// /var/lib/prometheus to the prometheus user, who can then rename the
// entries of the directory root writes gpuenv.prom into. A racer running
// as that user swaps each temporary file of `doctor --prometheus` for a
// symlink to /etc/shadow; root then set the mode of the temporary file by
// path, and /etc/shadow became 0644. gpuenv now refuses such a directory
// outright, naming it, its owner and mode; /etc/shadow never changes. A
// group-writable directory is refused the same way, and a sticky one
// (as /tmp) is written, the racer there unable to swap anything.
func TestWholeFileWriteRacer(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	healthyNode(t, r)
	const shadow = "/etc/shadow"
	before := fileMode(t, r, shadow)
	if before&0o004 != 0 {
		t.Fatalf("%s is mode %04o in the root: the scenario needs a private file", shadow, before)
	}

	const theirs = "/var/lib/prometheus/node-exporter"
	r.MustSh(fmt.Sprintf("mkdir -p %[1]s && chown -R %[2]d:%[2]d /var/lib/prometheus", theirs, nobody))
	stop := startRacer(t, r, theirs, shadow)
	// Every run first, the target checked after each: the race is what
	// must never be won; the refusal that now prevents it is checked after.
	const runs = 40
	want := fmt.Sprintf("refusing to write %s/gpuenv.prom: /var/lib/prometheus is owned by uid %d (nobody) with mode 0755, not by root", theirs, nobody)
	var notRefused []string
	for i := range runs {
		res := r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", theirs+"/gpuenv.prom")
		if got := fileMode(t, r, shadow); got != before {
			t.Fatalf("run %d: %s is now mode %04o, was %04o: root changed it through the racer's symlink (%d swaps)\n%s", i, shadow, got, before, stop(), res)
		}
		if res.Code != 1 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, "chown root:root /var/lib/prometheus") {
			notRefused = append(notRefused, fmt.Sprintf("run %d: %s", i, res))
		}
	}
	if len(notRefused) > 0 {
		t.Fatalf("%d of %d runs were not refused with exit 1 and %q and the fix; the first:\n%s", len(notRefused), runs, want, notRefused[0])
	}
	if swaps := stop(); swaps != 0 {
		t.Errorf("the racer swapped %d files in a directory gpuenv refused", swaps)
	}
	if _, err := os.Lstat(r.Path(theirs + "/gpuenv.prom")); err == nil {
		t.Errorf("%s/gpuenv.prom was written", theirs)
	}

	const group = "/srv/metrics"
	r.MustSh(fmt.Sprintf("mkdir -p %[1]s && chown 0:%[2]d %[1]s && chmod 0775 %[1]s", group, nobody))
	res := r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", group+"/gpuenv.prom")
	if want := "/srv/metrics is owned by uid 0 (root) with mode 0775, writable by its group"; res.Code != 1 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, "chmod go-w /srv/metrics") {
		t.Errorf("group-writable directory: want exit 1 and %q; %s", want, res)
	}

	const sticky = "/srv/shared"
	r.MustSh(fmt.Sprintf("mkdir -p %[1]s && chmod 1777 %[1]s", sticky))
	stop = startRacer(t, r, sticky, shadow)
	for i := range 10 {
		res := r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", sticky+"/gpuenv.prom")
		if res.Code != 0 {
			t.Fatalf("run %d in a sticky directory: want exit 0; %s", i, res)
		}
		if got := fileMode(t, r, shadow); got != before {
			t.Fatalf("run %d: %s is now mode %04o, was %04o", i, shadow, got, before)
		}
		if got := fileMode(t, r, sticky+"/gpuenv.prom"); got != 0o644 {
			t.Fatalf("run %d: %s/gpuenv.prom is mode %04o, want 0644", i, sticky, got)
		}
	}
	if swaps := stop(); swaps != 0 {
		t.Errorf("the racer swapped %d of root's files in a sticky directory", swaps)
	}
}
