package apply

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"time"
)

// Progress is how far the command an operation runs has got, as its
// package manager reports it on a descriptor of its own (see status.go):
// what it is doing (Phase), to which package, how far through the
// transaction. A command that reports nothing of the kind still has a
// phase, the time it has taken and the last line it printed.
type Progress struct {
	// Command numbers, from 1, the commands the operation has run: a
	// new command starts its percentage again.
	Command int `json:"command"`
	// Phase is one of the Phase constants.
	Phase string `json:"phase"`
	// Package is the package being worked on, when the tool says.
	Package string `json:"package,omitempty"`
	// Index is the package's place, from 1, among the Count packages the
	// phase works through; 0 when not known. While downloading they
	// count files.
	Index int `json:"index,omitempty"`
	Count int `json:"count,omitempty"`
	// Percent is how much of the command's work is done, as the tool
	// reckons it: apt weighs the bytes downloaded, then, from 0 again,
	// the dpkg steps of every package. Absent when the tool does not say.
	Percent *float64 `json:"percent,omitempty"`
	// Bytes downloaded so far, and the rate over the last seconds, while
	// downloading.
	Bytes int64 `json:"bytes,omitempty"`
	Rate  int64 `json:"bytes_per_second,omitempty"`
	// Seconds is how long the phase has run.
	Seconds float64 `json:"seconds"`
	// Line is the last line the tool printed, for a step that gives no
	// percentage or takes long whatever it gives (Long).
	Line string `json:"line,omitempty"`
}

// Phases of a Progress.
const (
	PhaseDownloading = "downloading"
	PhaseUnpacking   = "unpacking"
	PhaseConfiguring = "configuring"
	PhaseRemoving    = "removing"
	// PhaseTriggers: dpkg runs packages' triggers (man-db's index, the
	// linker cache).
	PhaseTriggers = "triggers"
	// PhaseKernelModule: DKMS builds a kernel module, which takes minutes
	// and reports no progress of its own.
	PhaseKernelModule = "kernel_module"
	// PhaseInitramfs: update-initramfs or dracut rebuilds the initramfs.
	PhaseInitramfs = "initramfs"
	// PhaseInstalling: a package manager that reports no phases (pip,
	// dnf) installs or upgrades; also apt when its messages are in a
	// language gpuenv does not read.
	PhaseInstalling = "installing"
	// PhaseRunning: any other command.
	PhaseRunning = "running"
)

// Long reports whether the phase is one a person waits on without a
// percentage that moves: elapsed time and the last line the tool printed
// are what says it is still at work.
func (p *Progress) Long() bool {
	switch p.Phase {
	case PhaseKernelModule, PhaseInitramfs, PhaseTriggers:
		return true
	}
	return p.Percent == nil
}

// progressEvery is how often progress goes out: four times a second is
// enough for a line a person reads, and bounds what the JSON stream
// carries however fast a tool reports. Two sends are never closer than
// three quarters of it, even when a late tick is followed by one on
// time.
const progressEvery = 250 * time.Millisecond

// tracker follows the progress of one operation while it runs, from the
// reports of its commands (status.go) and the lines they print, and
// sends it out at most every progressEvery, when something changed or,
// for a Long phase, when the elapsed time reached another second.
type tracker struct {
	mu      sync.Mutex
	cur     Progress
	since   time.Time // when cur's phase began
	last    string    // the last line printed
	dirty   bool
	planned int // packages the transaction changes, from its dry run
	command int
	// reported: the command reports its progress, and nothing is read
	// from what it prints but the last line.
	reported bool
	sent     Progress
	sentAt   time.Time
	out      func(Progress)
	stop     chan struct{}
	done     chan struct{}
}

func newTracker(every time.Duration, out func(Progress)) *tracker {
	t := &tracker{out: out, since: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go t.loop(every)
	return t
}

func (t *tracker) loop(every time.Duration) {
	defer close(t.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			if p, ok := t.due(time.Now()); ok {
				t.out(p)
			}
		}
	}
}

// due is what to send at now, if anything.
func (t *tracker) due(now time.Time) (Progress, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur.Phase == "" {
		return Progress{}, false
	}
	p := t.cur
	p.Seconds = math.Round(now.Sub(t.since).Seconds()*10) / 10
	long := p.Long()
	if long {
		p.Line = t.last
	}
	if !t.dirty && !(long && int(p.Seconds) != int(t.sent.Seconds)) || now.Sub(t.sentAt) < progressEvery*3/4 {
		return Progress{}, false
	}
	t.dirty = false
	t.sent, t.sentAt = p, now
	return p, true
}

// close stops the tracker; nothing is sent once it returns.
func (t *tracker) close() {
	if t == nil {
		return
	}
	close(t.stop)
	<-t.done
}

// begin starts following a new command, in phase; reported says whether
// it reports its progress itself.
func (t *tracker) begin(phase string, reported bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reported = reported
	t.command++
	t.cur = Progress{Command: t.command, Phase: phase}
	t.since = time.Now()
	t.last = ""
	t.dirty = true
}

// update changes the progress as f says; a new phase starts its clock.
func (t *tracker) update(f func(p *Progress)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	phase := t.cur.Phase
	f(&t.cur)
	if t.cur.Phase != phase {
		t.since = time.Now()
	}
	t.dirty = true
}

// printed records the last line a command printed. DKMS, run by a
// package manager that reports no phases (dnf's scriptlets), is known
// only from what it prints; apt, which names DKMS packages in lines that
// are not a build ("Suggested packages: nvidia-kernel-dkms"), says what
// it configures itself.
func (t *tracker) printed(line string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if line == t.last {
		return
	}
	t.last = line
	if p := t.cur.Phase; !t.reported && (p == PhaseInstalling || p == PhaseRunning) && strings.Contains(strings.ToLower(line), "dkms") {
		t.cur.Phase = PhaseKernelModule
		t.since = time.Now()
	}
	if t.cur.Long() {
		t.dirty = true
	}
}

// plan records how many packages the transaction being prepared changes.
func (t *tracker) plan(n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.planned = n
}

func (t *tracker) plannedPackages() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.planned
}

// lastLine is the writer a command's output also goes to, telling the
// tracker its last non-empty line.
type lastLine struct {
	t    *tracker
	line []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.line = append(l.line, p...)
	for {
		i := bytes.IndexAny(l.line, "\r\n")
		if i < 0 {
			break
		}
		// A carriage return redraws a line in place (a progress bar):
		// what follows it is the line now shown.
		l.note(l.line[:i])
		l.line = l.line[i+1:]
	}
	if len(l.line) > 4096 {
		l.line = l.line[len(l.line)-4096:]
	}
	return len(p), nil
}

func (l *lastLine) note(b []byte) {
	s := strings.TrimSpace(string(b))
	if s != "" {
		l.t.printed(s)
	}
}
