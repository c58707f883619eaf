package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReportOf(t *testing.T) {
	for _, tc := range []struct {
		argv  string
		asked string // "": the command is not asked for a report
		phase string
	}{
		{"apt-get -o DPkg::Lock::Timeout=300 -y install --no-install-recommends -- a=1 b-", "apt-get -o APT::Status-Fd=3 -o DPkg::Lock::Timeout=300 -y install --no-install-recommends -- a=1 b-", PhaseInstalling},
		{"apt-get -s install --no-install-recommends -- a=1", "", PhaseRunning},
		{"apt-get -y --allow-change-held-packages purge -- a", "apt-get -o APT::Status-Fd=3 -y --allow-change-held-packages purge -- a", PhaseRemoving},
		{"apt-get update", "apt-get -o APT::Status-Fd=3 update", PhaseDownloading},
		{"env -C /var/lib/gpuenv/generations/1/packages/1-a apt-get -o APT::Sandbox::User=root download -- a=1", "env -C /var/lib/gpuenv/generations/1/packages/1-a apt-get -o APT::Status-Fd=3 -o APT::Sandbox::User=root download -- a=1", PhaseDownloading},
		{"apt-mark hold -- a", "", PhaseRunning},
		{"apt-cache policy a", "", PhaseRunning},
		{"dpkg --force-confdef --force-confold --install -- /g/a.deb /g/b.deb", "dpkg --status-fd 3 --force-confdef --force-confold --install -- /g/a.deb /g/b.deb", PhaseUnpacking},
		{"dpkg --force-remove-reinstreq --purge -- a", "dpkg --status-fd 3 --force-remove-reinstreq --purge -- a", PhaseRemoving},
		{"dpkg --force-confdef --force-confold --configure --pending", "dpkg --status-fd 3 --force-confdef --force-confold --configure --pending", PhaseConfiguring},
		{"dpkg --audit", "", PhaseRunning},
		{"update-initramfs -u", "", PhaseInitramfs},
		{"dracut -f", "", PhaseInitramfs},
		{"/opt/ml/bin/python -m pip install --index-url file:///i -- torch==2.5.1", "", PhaseInstalling},
		{"/opt/ml/bin/python -m pip uninstall -y -- torch", "", PhaseRemoving},
		{"/usr/bin/python3 -m venv -- /opt/jax", "", PhaseRunning},
		{"dnf -y install -- nvidia-driver", "", PhaseInstalling},
		{"gpasswd -a bob video", "", PhaseRunning},
	} {
		r := reportOf(strings.Fields(tc.argv))
		if got := strings.Join(r.argv, " "); got != tc.asked || r.phase != tc.phase {
			t.Errorf("%s:\n got %q, phase %s\nwant %q, phase %s", tc.argv, got, r.phase, tc.asked, tc.phase)
		}
	}
}

func TestDpkgAction(t *testing.T) {
	for _, tc := range []struct {
		args          string
		phase         string
		stages, count int
	}{
		{"--force-confdef --install -- a.deb b.deb c.deb", PhaseUnpacking, 2, 3},
		{"-i a.deb", PhaseUnpacking, 2, 1},
		{"--purge -- a b", PhaseRemoving, 1, 2},
		{"--configure --pending", PhaseConfiguring, 1, 0},
		{"--configure -a", PhaseConfiguring, 1, 0},
		{"--audit", "", 0, 0},
	} {
		phase, stages, count := dpkgAction(strings.Fields(tc.args))
		if phase != tc.phase || stages != tc.stages || count != tc.count {
			t.Errorf("dpkg %s: %s, %d stages, %d packages; want %s, %d, %d", tc.args, phase, stages, count, tc.phase, tc.stages, tc.count)
		}
	}
}

// show is a progress as the tests compare it.
func show(p Progress) string {
	s := p.Phase
	if p.Package != "" {
		s += " " + p.Package
	}
	switch {
	case p.Count > 0:
		s += fmt.Sprintf(" %d/%d", p.Index, p.Count)
	case p.Index > 0:
		s += fmt.Sprintf(" #%d", p.Index)
	}
	if p.Percent != nil {
		s += fmt.Sprintf(" %.1f%%", *p.Percent)
	}
	return s
}

// The lines apt writes for the install of one package (apt's own test,
// test/integration/test-apt-progress-fd), then those of a DKMS package,
// of initramfs-tools' trigger, of a removal, in another language, and
// lines that are not apt's.
func TestAptStatusLines(t *testing.T) {
	tr := &tracker{}
	tr.begin(PhaseInstalling, true)
	feed(t, tr, &aptStatus{t: tr, count: 2, seen: map[string]map[string]bool{}}, []lineCase{
		{"dlstatus:1:0.0000:Retrieving file 1 of 1", "downloading 1/1 0.0%"},
		{"dlstatus:1:100.0000:Retrieving file 1 of 1", "downloading 1/1 100.0%"},
		{"pmstatus:dpkg-exec:0.0000:Running dpkg", "installing 0.0%"},
		{"pmstatus:testing:0.0000:Preparing testing (amd64)", "unpacking testing 1/2 0.0%"},
		{"pmstatus:testing:20.0000:Unpacking testing (amd64)", "unpacking testing 1/2 20.0%"},
		{"pmstatus:testing:40.0000:Installing testing (amd64)", "unpacking testing 1/2 40.0%"},
		{"pmstatus:dpkg-exec:40.0000:Running dpkg", "unpacking testing 1/2 40.0%"},
		{"pmstatus:testing:40.0000:Preparing to configure testing (amd64)", "configuring testing 1/2 40.0%"},
		{"pmstatus:testing:60.0000:Configuring testing (amd64)", "configuring testing 1/2 60.0%"},
		{"pmstatus:testing:80.0000:Installed testing (amd64)", "configuring testing 1/2 80.0%"},
		{"pmstatus:nvidia-kernel-dkms:82.0000:Configuring nvidia-kernel-dkms (amd64)", "kernel_module nvidia-kernel-dkms 2/2 82.0%"},
		{"pmerror:nvidia-kernel-dkms:83.0000:installed nvidia-kernel-dkms package post-installation script subprocess returned error exit status 10", "kernel_module nvidia-kernel-dkms 2/2 82.0%"},
		{"pmconffile:/etc/modprobe.d/nvidia.conf:84.0000:'/etc/modprobe.d/nvidia.conf' '/etc/modprobe.d/nvidia.conf.dpkg-new' 1 1", "kernel_module nvidia-kernel-dkms 2/2 82.0%"},
		{"pmstatus:initramfs-tools:90.0000:Running post-installation trigger initramfs-tools", "initramfs initramfs-tools 90.0%"},
		{"pmstatus:man-db:95.0000:Running post-installation trigger man-db", "triggers man-db 95.0%"},
		// A third package where the dry run listed two: no count.
		{"pmstatus:old:96.0000:Removing old (amd64)", "removing old 1/2 96.0%"},
		{"pmstatus:other:97.0000:Configuring other (amd64)", "configuring other #3 97.0%"},
		{"pmstatus:paket:98.0000:paket (amd64) wird konfiguriert", "installing paket 98.0%"},
		{"pmstatus:x:120.0:Configuring x (amd64)", "installing paket 98.0%"},
		{"pmstatus:x", "installing paket 98.0%"},
		{"media-change: Debian:/cdrom/:Please insert the disc", "installing paket 98.0%"},
	})
}

// lineCase is a status line and the progress after it, as show says it.
type lineCase struct{ line, want string }

// feed gives r each line and checks the progress tr then has.
func feed(t *testing.T, tr *tracker, r statusReader, cases []lineCase) {
	t.Helper()
	for _, tc := range cases {
		r.line(tc.line)
		if got := show(tr.cur); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.line, got, tc.want)
		}
	}
}

func TestFilesOf(t *testing.T) {
	for _, tc := range []struct {
		msg        string
		file, want int
	}{
		{"Retrieving file 3 of 7", 3, 7},
		{"Retrieving file 3 of 7 (4m40s remaining)", 3, 7},
		{"Retrieving file 12 of 71 (12s remaining)", 12, 71},
		{"Datei 3 von 7 wird heruntergeladen", 3, 7},
		{"Retrieving", 1, 0},
	} {
		if got := filesOf(tc.msg, tc.file); got != tc.want {
			t.Errorf("filesOf(%q, %d) = %d, want %d", tc.msg, tc.file, got, tc.want)
		}
	}
}

// dpkg's own lines (dpkg(1), --status-fd) for `dpkg --install` of two
// package files, and for a removal and a trigger.
func TestDpkgStatusLines(t *testing.T) {
	tr := &tracker{}
	tr.begin(PhaseUnpacking, true)
	feed(t, tr, &dpkgStatus{t: tr, total: 4, count: 2, seen: map[string]map[string]bool{}}, []lineCase{
		{"processing: upgrade: libnvidia-ml1", "unpacking libnvidia-ml1 1/2 0.0%"},
		{"status: libnvidia-ml1: half-installed", "unpacking libnvidia-ml1 1/2 0.0%"},
		{"status: libnvidia-ml1: unpacked", "unpacking libnvidia-ml1 1/2 0.0%"},
		{"processing: install: nvidia-smi:amd64", "unpacking nvidia-smi 2/2 25.0%"},
		{"processing: configure: libnvidia-ml1", "configuring libnvidia-ml1 1/2 50.0%"},
		{"status: libnvidia-ml1 : error : subprocess installed post-installation script returned error exit status 1", "configuring libnvidia-ml1 1/2 50.0%"},
		{"processing: configure: nvidia-kernel-dkms", "kernel_module nvidia-kernel-dkms 2/2 75.0%"},
		{"processing: trigproc: initramfs-tools", "initramfs initramfs-tools"},
		{"processing: purge: cuda-toolkit-12-4", "removing cuda-toolkit-12-4 1/2"},
		{"processing: frobnicate: x", "removing cuda-toolkit-12-4 1/2"},
	})
}

// The tracker sends a change at most every three quarters of
// progressEvery, and for a Long phase also when its elapsed time reaches
// another second, with the last line printed.
func TestTrackerSends(t *testing.T) {
	tr := &tracker{}
	at := time.Now()
	due := func(after time.Duration) string {
		p, ok := tr.due(at.Add(after))
		if !ok {
			return "-"
		}
		return fmt.Sprintf("%s %.1fs %q", show(p), p.Seconds, p.Line)
	}
	if got := due(0); got != "-" {
		t.Errorf("before any command: %s", got)
	}
	tr.begin(PhaseInstalling, true)
	tr.since = at
	pct := 10.0
	tr.update(func(p *Progress) { p.Phase, p.Package, p.Percent = PhaseUnpacking, "a", &pct })
	tr.since = at
	(&lastLine{t: tr}).Write([]byte("Unpacking a ...\n"))
	for _, tc := range []struct {
		after time.Duration
		do    func()
		want  string
	}{
		{0, nil, `unpacking a 10.0% 0.0s ""`},
		{100 * time.Millisecond, nil, "-"},
		{150 * time.Millisecond, func() { tr.update(func(p *Progress) { p.Package = "b" }) }, "-"},
		{200 * time.Millisecond, nil, `unpacking b 10.0% 0.2s ""`},
		{2 * time.Second, nil, "-"},
		{2100 * time.Millisecond, func() {
			tr.update(func(p *Progress) { p.Phase = PhaseKernelModule })
			tr.since = at.Add(2 * time.Second)
		}, `kernel_module b 10.0% 0.1s "Unpacking a ..."`},
		{2500 * time.Millisecond, func() { (&lastLine{t: tr}).Write([]byte("Building initial\rBuilding initial module for 6.1.0\n")) }, `kernel_module b 10.0% 0.5s "Building initial module for 6.1.0"`},
		{2800 * time.Millisecond, nil, "-"},
		{3100 * time.Millisecond, nil, `kernel_module b 10.0% 1.1s "Building initial module for 6.1.0"`},
	} {
		if tc.do != nil {
			tc.do()
		}
		if got := due(tc.after); got != tc.want {
			t.Errorf("at %s: %s, want %s", tc.after, got, tc.want)
		}
	}
}

// A tool that prints DKMS's lines without reporting its phases (dnf's
// scriptlets) is seen building the kernel module.
func TestTrackerSeesDKMSInOutput(t *testing.T) {
	tr := &tracker{}
	// apt names DKMS packages it does not install.
	tr.begin(PhaseInstalling, true)
	fmt.Fprint(&lastLine{t: tr}, "Suggested packages:\n  nvidia-kernel-dkms\n")
	if tr.cur.Phase != PhaseInstalling {
		t.Errorf("apt's suggestion: phase %s", tr.cur.Phase)
	}
	tr.begin(PhaseInstalling, false)
	w := &lastLine{t: tr}
	fmt.Fprint(w, "Installing : kmod-nvidia 1/3\n")
	if tr.cur.Phase != PhaseInstalling {
		t.Fatalf("phase %s", tr.cur.Phase)
	}
	fmt.Fprint(w, "  Running scriptlet: dkms-nvidia-3:560.35.03-1.el9.x86_64\nSign command: /lib/modules/5.14.0/build/scripts/sign-file\nBuilding module:\n")
	if tr.cur.Phase != PhaseKernelModule || tr.last != "Building module:" {
		t.Errorf("phase %s, last line %q", tr.cur.Phase, tr.last)
	}
}

// The bytes of a download are what the directory and its partial/ gained
// since the command started.
func TestDownloadBytes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cached_1_amd64.deb", 1000)
	write("partial/resumed_1_amd64.deb", 300)
	d := newDownloads(&tracker{}, func(p string) (string, error) { return filepath.Join(dir, p), nil }, "/")
	if got := d.fetched(); got != 0 {
		t.Fatalf("before the download: %d bytes", got)
	}
	write("partial/resumed_1_amd64.deb", 500)
	write("partial/new_1_amd64.deb", 70)
	if got := d.fetched(); got != 270 {
		t.Errorf("partial files: %d bytes, want 270", got)
	}
	os.Remove(filepath.Join(dir, "partial/new_1_amd64.deb"))
	write("new_1_amd64.deb", 90)
	if got := d.fetched(); got != 290 {
		t.Errorf("a file moved out of partial/ whole: %d bytes, want 290", got)
	}
}

// A line far longer than any status line is skipped whole, and the
// lines after it are read.
func TestReadStatusSkipsLongLines(t *testing.T) {
	var got []string
	sr := &recordLines{lines: &got}
	in := "pmstatus:a:1.0:x\n" + strings.Repeat("y", 10000) + "\npmstatus:b:2.0:x\nlast"
	readStatus(strings.NewReader(in), sr)
	if want := []string{"pmstatus:a:1.0:x", "pmstatus:b:2.0:x"}; !slices.Equal(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}
}

type recordLines struct{ lines *[]string }

func (r *recordLines) line(s string) { *r.lines = append(*r.lines, s) }
func (r *recordLines) end()          {}
