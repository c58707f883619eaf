package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

// verifyLiveTick is how often the live line of verify is redrawn, for
// its clock.
const verifyLiveTick = time.Second

// verifyLive is verify's live line on a terminal: while the
// framework-free check or a workload runs, one line says what runs, on
// which GPUs, which have finished and how long it has taken, redrawn
// every second, and erased before verify prints a result, so that what
// stays on the screen is what a file would get.
type verifyLive struct {
	mu    sync.Mutex
	w     io.Writer
	width func() int
	now   func() time.Time

	what   string
	labels []string
	marks  []string // per label: "" running, "✓" or "✗" finished
	start  time.Time
	drawn  bool
	ticker *time.Ticker
	stop   chan struct{}
}

func newVerifyLive(w io.Writer, width func() int) *verifyLive {
	return &verifyLive{w: w, width: width, now: time.Now}
}

// running shows what starts now: the CUDA driver check when w is nil,
// else the workload w, on targets.
func (l *verifyLive) running(w *verify.Workload, targets []*verify.Target) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.halt()
	l.what, l.labels = "checking the CUDA driver", nil
	if w != nil {
		l.what = strings.TrimSpace("running "+w.Framework+" "+w.Version) + " in " + w.Interpreter
		for _, t := range targets {
			if t == nil {
				continue
			}
			l.labels = append(l.labels, fmt.Sprintf("GPU %d", t.Index))
		}
	}
	l.marks = make([]string, len(l.labels))
	l.start = l.now()
	l.draw()
	l.ticker, l.stop = time.NewTicker(verifyLiveTick), make(chan struct{})
	go l.tick(l.ticker, l.stop)
}

func (l *verifyLive) tick(t *time.Ticker, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.mu.Lock()
			if l.stop == stop {
				l.draw()
			}
			l.mu.Unlock()
		}
	}
}

// finished marks the target i of the running workload done.
func (l *verifyLive) finished(i int, r verify.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i < 0 || i >= len(l.marks) || l.stop == nil {
		return
	}
	l.marks[i] = "✓"
	if !r.OK() {
		l.marks[i] = "✗"
	}
	l.draw()
}

// clear erases the line and stops its clock, before a result is printed.
func (l *verifyLive) clear() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.halt()
}

func (l *verifyLive) halt() {
	if l.stop != nil {
		l.ticker.Stop()
		close(l.stop)
		l.ticker, l.stop = nil, nil
	}
	if l.drawn {
		io.WriteString(l.w, "\r\x1b[K")
		l.drawn = false
	}
}

func (l *verifyLive) draw() {
	text := "  … " + l.what
	if len(l.labels) > 0 {
		parts := make([]string, len(l.labels))
		for i, label := range l.labels {
			mark := "running"
			if l.marks[i] != "" {
				mark = l.marks[i]
			}
			parts[i] = label + " " + mark
		}
		text += ": " + strings.Join(parts, ", ")
	}
	text += fmt.Sprintf(" (%s)", l.now().Sub(l.start).Round(time.Second))
	width := l.width()
	if width <= 0 {
		width = 80
	}
	io.WriteString(l.w, "\r"+esc(fitWidth(text, width-1))+"\x1b[K")
	l.drawn = true
}
