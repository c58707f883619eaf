package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/apply"
)

// Live reports whether the human view may draw a line and redraw it in
// place (the progress of the running operation): only on a terminal
// that colour would be used on, since both are escape sequences a file,
// a pipe, NO_COLOR, TERM=dumb and --no-color all rule out.
func (g *globalOptions) Live() bool { return g.Color() }

// liveRedraw is the least time between two drawings of the live line.
// The engine sends progress four times a second at most; this holds the
// view to five whatever it is sent, drawing what came too soon once the
// time is up, so that the line never stays behind.
const liveRedraw = 200 * time.Millisecond

// liveLine is the text view of apply and rollback (runHuman) on a
// terminal: the view's text passes through it to the terminal, and under
// the operation it says is running (its "[2/5] step: what …" line, not
// yet ended) it draws one line of that operation's progress, redrawn in
// place as progress comes and erased before the text goes on, so that
// what stays on the screen is exactly what a file would get.
type liveLine struct {
	mu sync.Mutex
	w  io.Writer
	// width is the terminal's width in columns, read at every drawing
	// (the window may change); 0 when unknown.
	width func() int
	// open is what was written since the last newline: the operation's
	// line, waiting for its end.
	open []byte
	// drawn: the live line is on the screen, on the row under open's
	// last one when open has anything, which then takes rows rows.
	drawn bool
	rows  int
	last  time.Time
	// next is progress that came too soon after the last drawing, drawn
	// by later when its time comes; the text going on drops it.
	next  *apply.Progress
	later *time.Timer
}

func newLiveLine(w io.Writer, width func() int) *liveLine {
	return &liveLine{w: w, width: width}
}

// Write passes the view's text on, erasing the live line first.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = nil
	l.erase()
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		l.open = append(l.open[:0], p[i+1:]...)
	} else {
		l.open = append(l.open, p...)
	}
	return l.w.Write(p)
}

// erase takes the live line off the screen and puts the cursor back
// where the text left it.
func (l *liveLine) erase() {
	if !l.drawn {
		return
	}
	l.drawn = false
	io.WriteString(l.w, "\r\x1b[K")
	if l.rows == 0 {
		return
	}
	// Go up to the first row of the operation's line and write it again,
	// which leaves the cursor at its end, as the text left it.
	fmt.Fprintf(l.w, "\x1b[%dA\r", l.rows)
	l.w.Write(l.open)
}

// progress draws the progress of the running operation.
func (l *liveLine) progress(e apply.RunEvent) {
	if e.Progress == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next = e.Progress
	if wait := liveRedraw - time.Since(l.last); wait > 0 {
		if l.later == nil {
			l.later = time.AfterFunc(wait, l.drawNext)
		}
		return
	}
	l.draw()
}

// drawNext draws the progress that came too soon, if the text has not
// gone on since.
func (l *liveLine) drawNext() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.later = nil
	if l.next != nil {
		l.draw()
	}
}

// draw draws next.
func (l *liveLine) draw() {
	p := l.next
	l.next = nil
	width := l.width()
	if width <= 0 {
		width = 80
	}
	text := fitWidth("      "+progressText(p), width-1)
	if !l.drawn {
		// Under the operation's line, which the terminal wrapped onto
		// as many rows as its width takes.
		l.rows = 0
		if n := utf8.RuneCount(l.open); n > 0 {
			l.rows = (n + width - 1) / width
			io.WriteString(l.w, "\n")
		}
	}
	io.WriteString(l.w, "\r"+text+"\x1b[K")
	l.drawn, l.last = true, time.Now()
}

// phaseWords are the human words of the engine's phases.
var phaseWords = map[string]string{
	apply.PhaseDownloading:  "downloading",
	apply.PhaseUnpacking:    "unpacking",
	apply.PhaseConfiguring:  "configuring",
	apply.PhaseRemoving:     "removing",
	apply.PhaseTriggers:     "running triggers",
	apply.PhaseKernelModule: "building the kernel module",
	apply.PhaseInitramfs:    "rebuilding the initramfs",
	apply.PhaseInstalling:   "installing",
	apply.PhaseRunning:      "running",
}

// progressText says in one line how far an operation has got:
//
//	downloading file 3 of 7 · 41% · 612.3 MB at 48.1 MB/s
//	unpacking cuda-nvcc-12-4 (23 of 71) · 56%
//	building the kernel module (nvidia-kernel-dkms) · 2m13s · Building initial module for 6.1.0-28-amd64
func progressText(p *apply.Progress) string {
	words := phaseWords[p.Phase]
	if words == "" {
		words = p.Phase
	}
	var b strings.Builder
	b.WriteString(words)
	switch {
	case p.Phase == apply.PhaseDownloading && p.Count > 0:
		fmt.Fprintf(&b, " file %d of %d", p.Index, p.Count)
	case p.Package != "" && p.Long():
		fmt.Fprintf(&b, " (%s)", p.Package)
	case p.Package != "" && p.Count > 0:
		fmt.Fprintf(&b, " %s (%d of %d)", p.Package, p.Index, p.Count)
	case p.Package != "":
		fmt.Fprintf(&b, " %s", p.Package)
	}
	if p.Percent != nil {
		fmt.Fprintf(&b, " · %.0f%%", *p.Percent)
	}
	if p.Phase == apply.PhaseDownloading && p.Bytes > 0 {
		fmt.Fprintf(&b, " · %s", byteSize(p.Bytes))
		if p.Rate > 0 {
			fmt.Fprintf(&b, " at %s/s", byteSize(p.Rate))
		}
	}
	if p.Long() {
		fmt.Fprintf(&b, " · %s", (time.Duration(p.Seconds) * time.Second).String())
		if p.Line != "" {
			b.WriteString(" · " + plainText(p.Line))
		}
	}
	return b.String()
}

// plainText is s without what a terminal would act on rather than show:
// a tool's colours and cursor movements, and other control characters.
func plainText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			// A control sequence: ESC [ parameters, ending in a byte
			// from @ to ~.
			for i += 2; i < len(s) && (s[i] < '@' || s[i] > '~'); i++ {
			}
		case c < 0x20 || c == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// byteSize writes n in decimal units, as apt does.
func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// fitWidth cuts s to at most width columns, ending it with "…" when cut:
// a line longer than the terminal would wrap, and erasing it would then
// leave its first rows behind.
func fitWidth(s string, width int) string {
	if utf8.RuneCountInString(s) <= width || width < 1 {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
