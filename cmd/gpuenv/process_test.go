package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// BenchmarkProcess runs gpuenv as whole processes, side by side with the
// start-up of an empty Go program (and an empty one linked with cgo, as
// gpuenv is for go-nvml). A small launcher program starts them and times
// each from fork to exit, so that what the test binary itself costs to
// fork does not count; it runs every command once per round, in turn, so
// that a change in the machine's load falls on all of them alike. Reported
// per command: the median wall time (<name>-ms), its ratio to the empty
// cgo program's (<name>-x), and its peak resident memory (<name>-maxrss-MB;
// for the empty programs this is the launcher's, which they inherit).
// "floor-deps" is the empty cgo program linking every package of other
// modules that gpuenv links: what start-up costs before any code of
// gpuenv's runs.
//
//	go test ./cmd/gpuenv -run XXX -bench Process -benchtime 200x
//
// "observe" and "plan-fresh" run against this machine's own root; plan-fresh
// reads this machine's package lists (or the stanza cache, run as root). The fixture cases run on the working DGX fixture, where plan
// starts no process.
func BenchmarkProcess(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries")
	}
	dir := b.TempDir()
	empty := buildProgram(b, dir, "empty", "package main\n\nfunc main() {}\n")
	emptyCgo := buildProgram(b, dir, "empty-cgo", "package main\n\nimport \"C\"\n\nfunc main() {}\n")
	// The floor: an empty cgo program that links every package gpuenv
	// links from other modules, so that their initialisation (which no
	// code of gpuenv's can make lazy) is measured apart from gpuenv's own.
	floor := buildProgram(b, dir, "floor-deps", floorSource(b))
	launcher := buildProgram(b, dir, "launcher", launcherSource)
	gpuenv := filepath.Join(dir, "gpuenv")
	if out, err := exec.Command("go", "build", "-o", gpuenv, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	root := hosttest.Build(b, "ubuntu2204-working")
	converged, err := filepath.Abs("testdata/plan/ubuntu2204-working/converged.hcl")
	if err != nil {
		b.Fatal(err)
	}
	distro, err := filepath.Abs("../../examples/debian12-distro")
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
	}{
		{"empty-cgo", []string{emptyCgo}}, // the base of the ratios: first
		{"empty", []string{empty}},
		{"floor-deps", []string{floor}},
		{"version", []string{gpuenv, "version"}},
		{"observe", []string{gpuenv, "observe", "--json"}},
		{"observe-fixture", []string{gpuenv, "--root", root, "observe", "--json"}},
		{"plan-converged", []string{gpuenv, "--root", root, "plan", converged}},
		{"plan-fresh", []string{gpuenv, "plan", distro}},
	}
	// The launcher reads one command a line, fields separated by NUL.
	var cmds strings.Builder
	for _, c := range cases {
		cmds.WriteString(strings.Join(c.argv, "\x00") + "\n")
	}
	b.ResetTimer()
	cmd := exec.Command(launcher, strconv.Itoa(b.N))
	cmd.Stdin = strings.NewReader(cmds.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("launcher: %v", err)
	}
	// One line per command: max RSS in KiB, then each round's nanoseconds.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		b.Fatalf("launcher printed %d lines for %d commands", len(lines), len(cases))
	}
	var base time.Duration
	for i, c := range cases {
		f := strings.Fields(lines[i])
		rss, _ := strconv.ParseInt(f[0], 10, 64)
		var ds []time.Duration
		for _, s := range f[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			ds = append(ds, time.Duration(n))
		}
		m := median(ds)
		if c.name == "empty-cgo" {
			base = m
		}
		b.ReportMetric(float64(m)/float64(time.Millisecond), c.name+"-ms")
		b.ReportMetric(float64(m)/float64(base), c.name+"-x")
		b.ReportMetric(float64(rss)/1024, c.name+"-maxrss-MB")
	}
}

// floorSource is a cgo program importing, for their initialisation only,
// the packages of other modules that gpuenv links (internal packages come
// with the packages that import them).
func floorSource(tb testing.TB) string {
	tb.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		tb.Fatalf("go list: %v", err)
	}
	var src strings.Builder
	src.WriteString("package main\n\nimport \"C\"\n\nimport (\n")
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/gpuenv/") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			continue
		}
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	return src.String()
}

// launcherSource runs each command of its standard input (argv fields
// separated by NUL, one command a line) once per round for os.Args[1]
// rounds, with all output discarded, and prints per command its largest
// max RSS (KiB) and each run's wall time (ns). A command that fails stops
// it.
const launcherSource = `package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	rounds, _ := strconv.Atoi(os.Args[1])
	var cmds [][]string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmds = append(cmds, strings.Split(sc.Text(), "\x00"))
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{null.Fd(), null.Fd(), null.Fd()}}
	times := make([][]int64, len(cmds))
	rss := make([]int64, len(cmds))
	for r := 0; r < rounds; r++ {
		for i, argv := range cmds {
			start := time.Now()
			pid, err := syscall.ForkExec(argv[0], argv, attr)
			if err != nil {
				fmt.Fprintln(os.Stderr, argv, err)
				os.Exit(1)
			}
			var ws syscall.WaitStatus
			var ru syscall.Rusage
			syscall.Wait4(pid, &ws, 0, &ru)
			times[i] = append(times[i], int64(time.Since(start)))
			if ws.ExitStatus() != 0 {
				fmt.Fprintln(os.Stderr, argv, "exited", ws.ExitStatus())
				os.Exit(1)
			}
			rss[i] = max(rss[i], ru.Maxrss)
		}
	}
	for i := range cmds {
		fmt.Print(rss[i])
		for _, t := range times[i] {
			fmt.Print(" ", t)
		}
		fmt.Println()
	}
}
`

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// buildProgram builds a one-file Go program into dir.
func buildProgram(tb testing.TB, dir, name, src string) string {
	tb.Helper()
	file := filepath.Join(dir, name+".go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, file).CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	return bin
}
