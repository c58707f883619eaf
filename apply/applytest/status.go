package applytest

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvPace, when set to a duration ("40ms"), is how long the fakes take
// over each step they report on their progress descriptor (a chunk of a
// download, a package's unpacking, a line of a kernel module's build), so
// that a test sees an operation in progress the way a person watching a
// large install does. Unset, they take no time.
const EnvPace = "GPUENV_FAKE_PACE"

// pace is the time each reported step takes.
func (c *Call) pace() time.Duration {
	d, err := time.ParseDuration(c.Env(EnvPace))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// step waits out one step.
func (c *Call) step() {
	if d := c.pace(); d > 0 {
		time.Sleep(d)
	}
}

// progressFd writes machine-readable progress lines, in a real tool's
// format, to the descriptor the command was given; with none given it
// writes nothing, as the tools do.
type progressFd struct{ w io.Writer }

func (p progressFd) printf(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format, args...)
	}
}

// aptStatusFd is the descriptor `-o APT::Status-Fd=N` names in apt's
// arguments.
func (c *Call) aptStatusFd() progressFd {
	for i := 0; i+1 < len(c.Args); i++ {
		if c.Args[i] != "-o" {
			continue
		}
		if v, ok := strings.CutPrefix(c.Args[i+1], "APT::Status-Fd="); ok {
			return c.progressFd(v)
		}
	}
	return progressFd{}
}

func (c *Call) progressFd(v string) progressFd {
	n, err := strconv.Atoi(v)
	if err != nil {
		return progressFd{}
	}
	if f := c.fd(n); f != nil {
		return progressFd{f}
	}
	return progressFd{}
}

// cutDpkgStatusFd takes dpkg's --status-fd N (or --status-fd=N) out of
// its arguments.
func (c *Call) cutDpkgStatusFd(args []string) (progressFd, []string) {
	var rest []string
	fd := progressFd{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return fd, append(rest, args[i:]...)
		case a == "--status-fd" && i+1 < len(args):
			fd = c.progressFd(args[i+1])
			i++
		case strings.HasPrefix(a, "--status-fd="):
			fd = c.progressFd(strings.TrimPrefix(a, "--status-fd="))
		default:
			rest = append(rest, a)
		}
	}
	return fd, rest
}

// The lines below are apt's and dpkg's own formats: apt's in its
// doc/progress-reporting.md and apt-pkg/install-progress.cc
// (GetProgressFdString: "%s:%s:%.4f:%s", the percentage with four
// decimals in the C locale) and apt-pkg/acquire.cc (dlstatus), dpkg's in
// dpkg(1), --status-fd.

func (p progressFd) dlstatus(i, total int, percent float64) {
	p.printf("dlstatus:%d:%.4f:Retrieving file %d of %d\n", i, percent, i, total)
}

func (p progressFd) pmstatus(pkg string, percent float64, msg string) {
	p.printf("pmstatus:%s:%.4f:%s\n", pkg, percent, msg)
}

func (p progressFd) processing(stage, pkg string) {
	p.printf("processing: %s: %s\n", stage, pkg)
}

func (p progressFd) status(pkg, state string) {
	p.printf("status: %s: %s\n", pkg, state)
}

// aptSteps counts the pmstatus lines of an apt transaction, as apt
// counts its steps to give a percentage: the unpacking and the
// configuring of each package installed, the removal of each removed,
// and the triggers.
type aptSteps struct {
	c           *Call
	out         progressFd
	done, total int
}

// report says that the step msg of pkg begins, after the previous one
// took its time.
func (s *aptSteps) report(pkg, msg string) {
	s.c.step()
	s.out.pmstatus(pkg, float64(s.done)/float64(max(s.total, 1))*100, msg)
	s.done++
}

// download fetches the package files of the transaction into apt's
// cache, /var/cache/apt/archives, through its partial/ directory in
// chunks, reporting each chunk as apt does (the percentage weighs bytes
// 0.8 and files 0.2, as apt-pkg/acquire.cc computes it), and returns the
// files to remove once they are installed: the fake keeps no package
// cache, as an image configured with APT::Keep-Downloaded-Packages
// "false" does.
func (c *Call) download(out progressFd, debs []*debFile) ([]string, error) {
	const chunks = 4
	var total int
	for _, d := range debs {
		total += len(d.data)
	}
	var got int
	var files []string
	for i, d := range debs {
		fn := Deb{Name: d.control.get("Package"), Version: d.control.get("Version"), Arch: d.control.get("Architecture")}.FileName()
		partial := "/var/cache/apt/archives/partial/" + fn
		fmt.Fprintf(c.Stdout, "Get:%d fake %s %s [%d B]\n", i+1, d.control.get("Package"), d.control.get("Version"), len(d.data))
		for k := 1; k <= chunks; k++ {
			c.step()
			part := d.data[:len(d.data)*k/chunks]
			if err := c.writeFile(partial, part, 0o644); err != nil {
				return files, err
			}
			bytes := got + len(part)
			items := i
			if k == chunks {
				items++
			}
			out.dlstatus(i+1, len(debs), 0.8*float64(bytes)/float64(max(total, 1))*100+0.2*float64(items)/float64(len(debs))*100)
		}
		got += len(d.data)
		final := "/var/cache/apt/archives/" + fn
		if err := os.Rename(c.path(partial), c.path(final)); err != nil {
			return files, err
		}
		files = append(files, final)
	}
	return files, nil
}

// fail reports dpkg's error on pkg, as apt passes it on.
func (s *aptSteps) fail(pkg, msg string) {
	s.out.printf("pmerror:%s:%.4f:%s\n", pkg, float64(s.done)/float64(max(s.total, 1))*100, msg)
}

// buildModule is what a DKMS package's postinst prints while it builds
// its kernel module, a line per step: the longest step of a driver
// install, with no percentage of its own.
func (c *Call) buildModule(pkg, version string) {
	for _, l := range []string{
		"Loading new " + strings.TrimSuffix(pkg, "-dkms") + "-" + version + " DKMS files...",
		"Building for 6.1.0-28-amd64",
		"Building initial module for 6.1.0-28-amd64",
		"Done.",
	} {
		c.step()
		fmt.Fprintln(c.Stdout, l)
	}
}
