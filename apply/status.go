package apply

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// How the package managers report their progress. apt and dpkg write
// machine-readable lines to a descriptor they are given, apart from their
// output for people; gpuenv gives them a pipe of their own as descriptor
// statusFd and reads nothing of their human output but its last line.
//
// apt (-o APT::Status-Fd=N; apt's doc/progress-reporting.md, and the
// writers GetProgressFdString in apt-pkg/install-progress.cc and
// pkgAcquireStatus::Pulse in apt-pkg/acquire.cc):
//
//	dlstatus:FILE:PERCENT:Retrieving file FILE of FILES
//	pmstatus:PACKAGE:PERCENT:ACTION
//	pmerror:PACKAGE:PERCENT:ERROR
//	pmconffile:CONFFILE:PERCENT:'CURRENT' 'NEW' USEREDITED DISTEDITED
//
// PERCENT is printed with four decimals in the C locale: downloads weigh
// bytes 0.8 and files 0.2; the package manager's percentage counts the
// dpkg states of every package of the transaction. PACKAGE is
// "dpkg-exec" when apt starts dpkg. ACTION is a translation of one of a
// few messages of apt's ("Unpacking %s", "Configuring %s"; the table in
// apt-pkg/deb/dpkgpm.cc), which gpuenv reads in apt's own wording for the
// phase; in another language the phase is shown as installing.
//
// dpkg (--status-fd N; dpkg(1)):
//
//	processing: STAGE: PACKAGE     STAGE: install, upgrade, configure,
//	                               trigproc, disappear, remove, purge
//	status: PACKAGE: STATE         STATE as in dpkg's status file
//	status: PACKAGE : error : MESSAGE
//
// pip reports no progress a program can read apart from its output: its
// --progress-bar raw (pip 24.1 and later) writes "Progress N of M" lines
// among its messages on standard output, in a format pip does not
// promise to keep, and older pips (Debian 12's 23.0, Ubuntu 22.04's 22.0)
// refuse the option. dnf has no such option either. Their progress is
// their phase, the time taken and the last line printed.

// statusFd is the descriptor a package manager is told to write its
// progress to: the first of host.Command's ExtraFiles.
const statusFd = 3

// statusReader reads one command's progress lines into a tracker.
type statusReader interface {
	line(s string)
	// end is called once the command has exited.
	end()
}

// commandReport is what gpuenv knows of how one command reports.
type commandReport struct {
	phase string
	// argv asks for the report on statusFd; nil when the command gives
	// none.
	argv []string
	read func(t *tracker, resolve func(string) (string, error)) statusReader
}

// reportOf says how argv reports its progress.
func reportOf(argv []string) commandReport {
	i, dir := 0, "/"
	if len(argv) > 0 && path.Base(argv[0]) == "env" {
		// env -C DIR PROGRAM …: the program is what reports.
		for i = 1; i < len(argv) && strings.HasPrefix(argv[i], "-"); i++ {
			if argv[i] == "-C" && i+1 < len(argv) {
				i++
				dir = argv[i]
			} else if d, ok := strings.CutPrefix(argv[i], "--chdir="); ok {
				dir = d
			}
		}
	}
	if i >= len(argv) {
		return commandReport{phase: PhaseRunning}
	}
	args := argv[i+1:]
	ask := func(opt ...string) []string {
		return slices.Concat(argv[:i+1], opt, args)
	}
	switch prog := path.Base(argv[i]); {
	case prog == "apt-get":
		sub, simulated := aptSubcommand(args)
		phase := aptGetPhases[sub]
		if phase == "" || simulated {
			return commandReport{phase: PhaseRunning}
		}
		// apt fetches into its archive cache, apt-get download into
		// its working directory.
		fetched := "/var/cache/apt/archives"
		if sub == "download" {
			fetched = dir
		} else if sub == "update" {
			fetched = "/var/lib/apt/lists"
		}
		return commandReport{phase: phase, argv: ask("-o", "APT::Status-Fd="+strconv.Itoa(statusFd)),
			read: func(t *tracker, resolve func(string) (string, error)) statusReader {
				return &aptStatus{t: t, count: t.plannedPackages(), seen: map[string]map[string]bool{}, dl: newDownloads(t, resolve, fetched)}
			}}
	case prog == "dpkg":
		phase, stages, count := dpkgAction(args)
		if phase == "" {
			return commandReport{phase: PhaseRunning}
		}
		return commandReport{phase: phase, argv: ask("--status-fd", strconv.Itoa(statusFd)),
			read: func(t *tracker, _ func(string) (string, error)) statusReader {
				return &dpkgStatus{t: t, total: stages * count, count: count, seen: map[string]map[string]bool{}}
			}}
	case prog == "update-initramfs" || prog == "dracut" || prog == "mkinitramfs":
		return commandReport{phase: PhaseInitramfs}
	case prog == "dkms":
		return commandReport{phase: PhaseKernelModule}
	case prog == "dnf" || prog == "yum" || strings.HasPrefix(prog, "python") && len(args) > 1 && args[0] == "-m" && args[1] == "pip":
		for _, a := range args {
			switch a {
			case "install", "reinstall", "downgrade", "upgrade", "distro-sync":
				return commandReport{phase: PhaseInstalling}
			case "remove", "erase", "uninstall":
				return commandReport{phase: PhaseRemoving}
			case "download", "makecache":
				return commandReport{phase: PhaseDownloading}
			}
		}
	}
	return commandReport{phase: PhaseRunning}
}

// aptGetPhases are the phases apt-get's subcommands begin in; the others
// do not report.
var aptGetPhases = map[string]string{
	"install": PhaseInstalling, "reinstall": PhaseInstalling, "upgrade": PhaseInstalling,
	"dist-upgrade": PhaseInstalling, "full-upgrade": PhaseInstalling,
	"remove": PhaseRemoving, "purge": PhaseRemoving, "autoremove": PhaseRemoving,
	"download": PhaseDownloading, "update": PhaseDownloading,
}

// aptSubcommand is apt-get's subcommand, and whether apt is only asked to
// say what it would do.
func aptSubcommand(args []string) (sub string, simulated bool) {
	for k := 0; k < len(args); k++ {
		switch a := args[k]; {
		case a == "-o" || a == "-c" || a == "-t":
			k++
		case a == "-s" || a == "--simulate" || a == "--just-print" || a == "--dry-run" || a == "--recon" || a == "--no-act" || a == "--print-uris":
			simulated = true
		case a == "--":
			return sub, simulated
		case !strings.HasPrefix(a, "-") && sub == "":
			sub = a
		}
	}
	return sub, simulated
}

// dpkgAction is the phase of a dpkg command that changes packages, how
// many processing stages each package goes through, and how many
// packages it names (0: those dpkg finds pending).
func dpkgAction(args []string) (phase string, stages, count int) {
	operands := 0
	pending := false
	for k, a := range args {
		switch a {
		case "-i", "--install":
			phase, stages = PhaseUnpacking, 2
		case "--unpack":
			phase, stages = PhaseUnpacking, 1
		case "--configure":
			phase, stages = PhaseConfiguring, 1
		case "-r", "--remove", "-P", "--purge":
			phase, stages = PhaseRemoving, 1
		case "--triggers-only":
			phase, stages = PhaseTriggers, 1
		case "-a", "--pending":
			pending = true
		case "--":
			operands += len(args) - k - 1
			if pending {
				operands = 0
			}
			return phase, stages, operands
		default:
			if !strings.HasPrefix(a, "-") {
				operands++
			}
		}
	}
	if pending {
		operands = 0
	}
	return phase, stages, operands
}

// aptPhases are apt's messages for what it does to a package, in its
// own wording (the msgids of apt-pkg/deb/dpkgpm.cc), longest first where
// one begins another.
var aptPhases = []struct{ prefix, phase string }{
	{"Preparing to configure ", PhaseConfiguring},
	{"Preparing for removal of ", PhaseRemoving},
	{"Preparing to completely remove ", PhaseRemoving},
	{"Preparing ", PhaseUnpacking},
	{"Unpacking ", PhaseUnpacking},
	{"Installing ", PhaseUnpacking},
	{"Configuring ", PhaseConfiguring},
	{"Installed ", PhaseConfiguring},
	{"Removing ", PhaseRemoving},
	{"Completely removing ", PhaseRemoving},
	{"Completely removed ", PhaseRemoving},
	{"Noting disappearance of ", PhaseRemoving},
	{"Running post-installation trigger ", PhaseTriggers},
}

// packagePhase refines a phase by the package it works on: configuring
// a DKMS package builds its kernel module, and the triggers of
// initramfs-tools or dracut rebuild the initramfs.
func packagePhase(phase, pkg string) string {
	switch {
	case phase == PhaseConfiguring && (strings.HasSuffix(pkg, "-dkms") || pkg == "dkms"):
		return PhaseKernelModule
	case phase == PhaseTriggers && (pkg == "dkms" || strings.HasSuffix(pkg, "-dkms")):
		return PhaseKernelModule
	case phase == PhaseTriggers && (pkg == "initramfs-tools" || pkg == "dracut"):
		return PhaseInitramfs
	}
	return phase
}

// ordinal numbers the packages of a phase in the order they come.
func ordinal(seen map[string]map[string]bool, phase, pkg string) int {
	s := seen[phase]
	if s == nil {
		s = map[string]bool{}
		seen[phase] = s
	}
	s[pkg] = true
	return len(s)
}

// aptStatus reads apt's status lines.
type aptStatus struct {
	t *tracker
	// count is how many packages the transaction changes, as its dry
	// run listed them; 0 when not known.
	count int
	seen  map[string]map[string]bool
	dl    *downloads
}

func (a *aptStatus) line(s string) {
	kind, rest, _ := strings.Cut(s, ":")
	f := strings.SplitN(rest, ":", 3)
	if len(f) != 3 {
		return
	}
	pct, err := strconv.ParseFloat(strings.TrimSpace(f[1]), 64)
	if err != nil || pct < 0 || pct > 100 {
		return
	}
	pkg, msg := strings.TrimSpace(f[0]), f[2]
	switch kind {
	case "dlstatus":
		i, _ := strconv.Atoi(pkg)
		files := filesOf(msg, i)
		a.t.update(func(p *Progress) {
			*p = Progress{Command: p.Command, Phase: PhaseDownloading, Index: i, Count: files, Percent: &pct, Bytes: p.Bytes, Rate: p.Rate}
		})
		a.dl.start()
	case "pmstatus":
		a.dl.stop()
		phase := ""
		for _, m := range aptPhases {
			if strings.HasPrefix(msg, m.prefix) {
				phase = m.phase
				break
			}
		}
		a.t.update(func(p *Progress) {
			if pkg == "dpkg-exec" {
				// apt starts dpkg: no package yet.
				if p.Phase == PhaseDownloading {
					*p = Progress{Command: p.Command, Phase: PhaseInstalling}
				}
				p.Percent = &pct
				return
			}
			if phase == "" {
				phase = PhaseInstalling
			}
			next := Progress{Command: p.Command, Phase: packagePhase(phase, pkg), Package: pkg, Percent: &pct}
			if phase != PhaseTriggers && phase != PhaseInstalling {
				next.Index, next.Count = ordinal(a.seen, phase, pkg), a.count
				if next.Index > next.Count {
					// Not the transaction the dry run listed (an undo's),
					// or more than it: no count to show.
					next.Count = 0
				}
			}
			*p = next
		})
	}
}

func (a *aptStatus) end() { a.dl.stop() }

// filesOf reads FILES from dlstatus' message "Retrieving file FILE of
// FILES": of its numbers the one after FILE, which translations keep as
// numbers whatever their words.
func filesOf(msg string, file int) int {
	var nums []int
	for _, w := range strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == '(' || r == ')' || r == ',' }) {
		if n, err := strconv.Atoi(w); err == nil {
			nums = append(nums, n)
		}
	}
	for k := 0; k+1 < len(nums); k++ {
		if nums[k] == file && nums[k+1] >= file {
			return nums[k+1]
		}
	}
	return 0
}

// dpkgStatus reads dpkg's status lines. dpkg gives no percentage: it is
// the processing stages begun out of those the command's packages go
// through, when the command names them.
type dpkgStatus struct {
	t            *tracker
	total, count int
	begun        int
	seen         map[string]map[string]bool
}

// dpkgStages are the phases of dpkg's processing stages.
var dpkgStages = map[string]string{
	"install": PhaseUnpacking, "upgrade": PhaseUnpacking, "configure": PhaseConfiguring,
	"remove": PhaseRemoving, "purge": PhaseRemoving, "disappear": PhaseRemoving, "trigproc": PhaseTriggers,
}

func (d *dpkgStatus) line(s string) {
	kind, rest, _ := strings.Cut(s, ":")
	if kind != "processing" {
		return
	}
	stage, pkg, ok := strings.Cut(rest, ":")
	if !ok {
		return
	}
	stage, pkg = strings.TrimSpace(stage), strings.TrimSpace(pkg)
	phase := dpkgStages[stage]
	if phase == "" {
		return
	}
	name, _, _ := strings.Cut(pkg, ":") // dpkg names a package "name:arch" when that is needed
	next := Progress{Phase: packagePhase(phase, name), Package: name}
	if phase != PhaseTriggers {
		next.Index, next.Count = ordinal(d.seen, phase, name), d.count
		if next.Index > next.Count {
			next.Count = 0
		}
		if d.total > 0 && d.begun < d.total {
			pct := float64(d.begun) / float64(d.total) * 100
			next.Percent = &pct
			d.begun++
		}
	}
	d.t.update(func(p *Progress) {
		next.Command = p.Command
		*p = next
	})
}

func (d *dpkgStatus) end() {}

// readStatus reads lines from r until it ends, passing each to the
// reader; a line too long to be a status line is skipped, never left
// unread, since a writer blocked on a full pipe would stop the package
// manager.
func readStatus(r io.Reader, sr statusReader) {
	br := bufio.NewReaderSize(r, 4096)
	long := false
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			long = true
			continue
		case err == nil && !long:
			sr.line(strings.TrimRight(string(b), "\r\n"))
		}
		long = false
		if err != nil {
			return
		}
	}
}

// downloads measures the bytes a download has written to the directory
// it fetches into (and its partial/ subdirectory, where apt keeps a file
// until it is whole), against what was there when the command started:
// apt reports no bytes of its own.
type downloads struct {
	t      *tracker
	dir    string // on this machine
	before map[string]int64
	mu     sync.Mutex
	quit   chan struct{}
	done   chan struct{}
}

// downloadSample is one measurement of the bytes fetched.
type downloadSample struct {
	at    time.Time
	bytes int64
}

func newDownloads(t *tracker, resolve func(string) (string, error), dir string) *downloads {
	if t == nil {
		return nil
	}
	real, err := resolve(dir)
	if err != nil {
		return nil
	}
	d := &downloads{t: t, dir: real, before: map[string]int64{}}
	d.sizes(func(name string, size int64) { d.before[name] = size }, true)
	return d
}

// sizes calls f with the size of every file in the directory and in its
// partial/; those of the directory itself only when it is new or all.
func (d *downloads) sizes(f func(name string, size int64), all bool) {
	for _, sub := range []string{"", "partial"} {
		entries, err := os.ReadDir(filepath.Join(d.dir, sub))
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := filepath.Join(sub, e.Name())
			if !e.Type().IsRegular() {
				continue
			}
			if _, known := d.before[name]; known && sub == "" && !all {
				// A whole file in the directory does not grow: apt
				// fetches into partial/ and renames.
				continue
			}
			if fi, err := e.Info(); err == nil {
				f(name, fi.Size())
			}
		}
	}
}

func (d *downloads) fetched() int64 {
	var n int64
	d.sizes(func(name string, size int64) {
		if grown := size - d.before[name]; grown > 0 {
			n += grown
		}
	}, false)
	return n
}

// start measures every progressEvery until stop, from the first
// dlstatus line on.
func (d *downloads) start() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quit != nil {
		return
	}
	d.quit, d.done = make(chan struct{}), make(chan struct{})
	go d.measure()
}

func (d *downloads) measure() {
	defer close(d.done)
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	// The rate is over the last rateWindow of samples.
	const rateWindow = 3 * time.Second
	var samples []downloadSample
	for {
		select {
		case <-d.quit:
			return
		case now := <-tick.C:
			b := d.fetched()
			samples = append(samples, downloadSample{now, b})
			for len(samples) > 2 && now.Sub(samples[0].at) > rateWindow {
				samples = samples[1:]
			}
			var rate int64
			if first := samples[0]; now.Sub(first.at) >= progressEvery {
				rate = int64(float64(b-first.bytes) / now.Sub(first.at).Seconds())
			}
			d.t.update(func(p *Progress) {
				if p.Phase == PhaseDownloading {
					p.Bytes, p.Rate = b, rate
				}
			})
		}
	}
}

func (d *downloads) stop() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quit == nil {
		return
	}
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	<-d.done
}
