package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/providers/host"
)

// terminalLines is what a terminal of the given width shows after out,
// as lines: its rows, each without trailing blanks, with a row the
// terminal wrapped a line onto joined to the one before. It acts on what
// gpuenv writes — printable text, carriage return, newline, erase to the
// end of the line (CSI K), cursor up (CSI n A) — wrapping a full row at
// the next character, as terminals do, and shows no colours.
func terminalLines(out string, width int) []string {
	var rows [][]rune
	wrapped := map[int]bool{} // rows that continue the one above
	r, c := 0, 0
	for s := out; s != ""; {
		if m := csi.FindStringSubmatch(s); m != nil {
			s = s[len(m[0]):]
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 {
				n = 1
			}
			switch m[2] {
			case "A":
				r = max(r-n, 0)
			case "K":
				if r < len(rows) && c < len(rows[r]) {
					rows[r] = rows[r][:c]
				}
			}
			continue
		}
		ch, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch ch {
		case '\r':
			c = 0
		case '\n':
			r++
		default:
			if c >= width {
				r, c = r+1, 0
				wrapped[r] = true
			}
			for len(rows) <= r {
				rows = append(rows, nil)
			}
			for len(rows[r]) < c {
				rows[r] = append(rows[r], ' ')
			}
			if c < len(rows[r]) {
				rows[r][c] = ch
			} else {
				rows[r] = append(rows[r], ch)
			}
			c++
		}
	}
	var lines []string
	for i, row := range rows {
		if wrapped[i] && len(lines) > 0 {
			lines[len(lines)-1] += string(row)
			continue
		}
		lines = append(lines, string(row))
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return lines
}

var csi = regexp.MustCompile(`^\x1b\[([0-9;?]*)([@-~])`)

// normalized is the engine's text from the line that begins with from
// on, with durations and the fixture's directory masked, for comparing
// two runs.
func normalized(lines []string, from, root string) string {
	for i, l := range lines {
		if strings.HasPrefix(l, from) {
			lines = lines[i:]
			break
		}
	}
	text := strings.Join(lines, "\n")
	text = strings.ReplaceAll(text, root, "ROOT")
	text = regexp.MustCompile(`\((\d+(\.\d+)?(ms|s|m\d+s)|0s)\)`).ReplaceAllString(text, "(T)")
	return strings.TrimRight(text, "\n")
}

// onTerminal runs gpuenv with its standard output on a pseudo-terminal
// of the given width and returns what the terminal received and how long
// the command took.
func onTerminal(t *testing.T, width int, env []string, args ...string) (int, string, time.Duration) {
	t.Helper()
	tty, term := openPTY(t)
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: uint16(width)}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(term) // ends with EIO once tty is closed
		got <- b
	}()
	var stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), args, strings.NewReader(""), tty, &stderr, env)
	took := time.Since(start)
	tty.Close()
	out := <-got
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	return code, string(out), took
}

// withFakeTools runs gpuenv's commands as applytest's fakes, in-process,
// with env added to theirs.
func withFakeTools(t *testing.T, env ...string) {
	old := hostOptions
	hostOptions = append(slices.Clone(hostOptions), host.WithRunner(&applytest.Runner{Env: env}))
	t.Cleanup(func() { hostOptions = old })
}

// terminalEnv is this process's environment as a terminal user's, with
// nothing that turns colour off, and more.
func terminalEnv(more ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "NO_COLOR" && k != "TERM" {
			env = append(env, kv)
		}
	}
	return append(append(env, "TERM=xterm-256color"), more...)
}

// liveDraw is one drawing of the live line.
var liveDraw = regexp.MustCompile("\r {6}([^\r\n\x1b]*)\x1b\\[K")

// On a terminal, an apply whose package manager takes its time shows
// under the running operation one line of its progress — the phase, the
// package and its place among the transaction's, the percentage, the
// bytes downloaded — redrawn in place at most five times a second, and
// erased when the operation ends: what stays on the screen is what the
// same apply writes to a file. The same holds for the rollback, whose
// operation lines are longer than the terminal is wide. With NO_COLOR
// or TERM=dumb there is no such line and no escape sequence at all.
func TestLiveLineOnTerminal(t *testing.T) {
	const width = 120
	// The fake host's plan is made by hand, with no spec to plan again.
	savedHooks.acceptUnplanned = true
	t.Cleanup(func() { savedHooks.acceptUnplanned = false })
	newHost := func() (*applytest.Fixture, string) {
		f, err := buildFakeHost(applytest.TempDir(t))
		if err != nil {
			t.Fatal(err)
		}
		return f, filepath.Join(f.Dir, "plan.saved")
	}
	// ref is applied and rolled back with the output in a file, at no
	// pace; f on a terminal, its package manager slow.
	ref, refPlan := newHost()
	f, plan := newHost()
	for _, args := range [][]string{{"apply", "--auto-approve"}, {"rollback", "--auto-approve"}} {
		withFakeTools(t, ref.Env...)
		refArgs := append([]string{"--root", ref.Root}, args...)
		if args[0] == "apply" {
			refArgs = append(refArgs, refPlan)
		}
		var file bytes.Buffer
		if code := run(context.Background(), refArgs, strings.NewReader(""), &file, io.Discard, terminalEnv()); code != 0 {
			t.Fatalf("%s to a file: exit %d\n%s", args[0], code, file.String())
		}
		if strings.Contains(file.String(), "\x1b") {
			t.Fatalf("%s to a file wrote escape sequences:\n%q", args[0], file.String())
		}

		withFakeTools(t, append(f.Env, applytest.EnvPace+"=60ms")...)
		fArgs := append([]string{"--root", f.Root}, args...)
		if args[0] == "apply" {
			fArgs = append(fArgs, plan)
		}
		code, out, took := onTerminal(t, width, terminalEnv(), fArgs...)
		if code != 0 {
			t.Fatalf("%s on a terminal: exit %d\n%q", args[0], code, out)
		}
		draws := liveDraw.FindAllStringSubmatch(out, -1)
		if len(draws) < 3 {
			t.Fatalf("%s: %d drawings of the live line in %s, want several:\n%q", args[0], len(draws), took, out)
		}
		t.Logf("%s: %d drawings of the live line in %s (%.1f a second)", args[0], len(draws), took.Round(10*time.Millisecond), float64(len(draws))/took.Seconds())
		if limit := int(5*took.Seconds()) + 1; len(draws) > limit {
			t.Errorf("%s: %d drawings of the live line in %s: more than 5 a second", args[0], len(draws), took)
		}
		if !strings.Contains(out, "\x1b[K\r      ") {
			t.Errorf("%s: the live line is never redrawn in place:\n%q", args[0], out)
		}
		var texts []string
		for _, d := range draws {
			texts = append(texts, d[1])
		}
		all := strings.Join(texts, "\n")
		// The apply's transaction counts its packages from its dry run;
		// the undo's, installing the saved package files, does not.
		wants := []string{
			`(?m)^downloading file [1-4] of 4 · \d+% · \d+ B`,
			`(?m)^(unpacking|configuring) (libnvidia-ml1|nvidia-smi|cuda-toolkit-12-4|cuda-cudart-12-4) \([1-4] of 4\) · \d+%$`,
		}
		if args[0] == "rollback" {
			wants = []string{`(?m)^(unpacking|configuring) (libnvidia-ml1|nvidia-smi) · \d+%$`}
		}
		for _, want := range wants {
			if !regexp.MustCompile(want).MatchString(all) {
				t.Errorf("%s: no drawing of the live line matches %s; drawn:\n%s", args[0], want, all)
			}
		}
		from := map[string]string{"apply": "Applying generation", "rollback": "Rolling back"}[args[0]]
		got := normalized(terminalLines(out, width), from, f.Root)
		want := normalized(strings.Split(file.String(), "\n"), from, ref.Root)
		if got != want {
			t.Errorf("the terminal shows, once the %s is done:\n%s\n\nwhat the %s writes to a file:\n%s", args[0], got, args[0], want)
		}
	}

	// Two more hosts applied at the same slow pace, one with NO_COLOR,
	// the other with TERM=dumb: nothing drawn.
	for _, env := range []string{"NO_COLOR=1", "TERM=dumb"} {
		h, plan := newHost()
		withFakeTools(t, append(h.Env, applytest.EnvPace+"=40ms")...)
		code, out, _ := onTerminal(t, width, terminalEnv(env), "--root", h.Root, "apply", "--auto-approve", plan)
		if code != 0 || !strings.Contains(out, "Apply complete") {
			t.Fatalf("%s apply: exit %d\n%q", env, code, out)
		}
		if strings.Contains(out, "\x1b") || strings.Contains(out, "\r      ") {
			t.Errorf("%s apply drew on the terminal:\n%q", env, out)
		}
	}
}

// The live line's words for each phase, with what the phase has to show.
func TestProgressText(t *testing.T) {
	pct := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		p    apply.Progress
		want string
	}{
		{apply.Progress{Phase: apply.PhaseDownloading, Index: 3, Count: 7, Percent: pct(41.2), Bytes: 612_345_678, Rate: 48_100_000}, "downloading file 3 of 7 · 41% · 612.3 MB at 48.1 MB/s"},
		{apply.Progress{Phase: apply.PhaseDownloading, Index: 1, Count: 1, Percent: pct(0)}, "downloading file 1 of 1 · 0%"},
		{apply.Progress{Phase: apply.PhaseUnpacking, Package: "cuda-nvcc-12-4", Index: 23, Count: 71, Percent: pct(56.04)}, "unpacking cuda-nvcc-12-4 (23 of 71) · 56%"},
		{apply.Progress{Phase: apply.PhaseConfiguring, Package: "other", Index: 3, Percent: pct(97)}, "configuring other · 97%"},
		{apply.Progress{Phase: apply.PhaseKernelModule, Package: "nvidia-kernel-dkms", Index: 4, Count: 7, Percent: pct(62.5), Seconds: 133.4, Line: "Building initial module for 6.1.0-28-amd64"}, "building the kernel module (nvidia-kernel-dkms) · 62% · 2m13s · Building initial module for 6.1.0-28-amd64"},
		{apply.Progress{Phase: apply.PhaseInitramfs, Seconds: 12.2, Line: "update-initramfs: Generating /boot/initrd.img-6.1.0-28-amd64"}, "rebuilding the initramfs · 12s · update-initramfs: Generating /boot/initrd.img-6.1.0-28-amd64"},
		{apply.Progress{Phase: apply.PhaseInstalling, Seconds: 45, Line: "Collecting torch==2.5.1\x1b[31m (\x07)\x1b[0m"}, "installing · 45s · Collecting torch==2.5.1 ( )"},
		{apply.Progress{Phase: apply.PhaseRunning, Seconds: 0.4}, "running · 0s"},
	} {
		if got := progressText(&tc.p); got != tc.want {
			t.Errorf("%+v:\n got %s\nwant %s", tc.p, got, tc.want)
		}
	}
	if got := fitWidth("      downloading file 3 of 7 · 41%", 20); got != "      downloading f…" {
		t.Errorf("fitWidth: %q", got)
	}
}

// Progress that comes sooner than liveRedraw after a drawing is drawn
// when its time comes, the newest of it, unless the text has gone on by
// then; the text always finds the line erased.
func TestLiveLineDrawsWhatCameTooSoon(t *testing.T) {
	var out syncBuffer
	l := newLiveLine(&out, func() int { return 80 })
	pct := 50.0
	send := func(pkg string) {
		l.progress(apply.RunEvent{Type: apply.RunProgress, Progress: &apply.Progress{Phase: apply.PhaseUnpacking, Package: pkg, Percent: &pct}})
	}
	fmt.Fprint(l, "[1/1] packages: apt: installing a, b, c, d …")
	send("a")
	send("b")
	send("c")
	if got := out.String(); !strings.HasSuffix(got, "unpacking a · 50%\x1b[K") {
		t.Fatalf("the first progress is not drawn at once, or a later one too soon:\n%q", got)
	}
	time.Sleep(liveRedraw + 100*time.Millisecond)
	if got := out.String(); strings.Contains(got, "unpacking b") || !strings.HasSuffix(got, "unpacking c · 50%\x1b[K") {
		t.Fatalf("want the newest progress drawn once its time came, and only it:\n%q", got)
	}
	send("d")
	fmt.Fprint(l, " done (1s)\n")
	time.Sleep(liveRedraw + 100*time.Millisecond)
	got := out.String()
	if strings.Contains(got, "unpacking d") {
		t.Errorf("progress drawn after the text went on:\n%q", got)
	}
	// The row the live line was on is the cursor's now, blank.
	if lines := terminalLines(got, 80); !slices.Equal(lines, []string{"[1/1] packages: apt: installing a, b, c, d … done (1s)", ""}) {
		t.Errorf("the terminal shows %q", lines)
	}
}

// syncBuffer is a bytes.Buffer that a timer's goroutine may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
