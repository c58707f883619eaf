package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/groups"
	"github.com/gpuenv/gpuenv/providers/host"
)

func newDoctorCmd(g *globalOptions) *cobra.Command {
	var pythons, programs []string
	var pid int
	var files healthFiles
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Find out why programs cannot use the GPU, and what fixes it",
		Long: `Doctor observes the host (--root) and checks it the way a GPU expert would, in
order: an NVIDIA GPU on the PCI bus and the kernel driver bound to it; the
nvidia module (nouveau, the initramfs, Secure Boot, DKMS builds for each
kernel); NVML; the device nodes (nvidia-uvm included) and whether the
invoking user (SUDO_USER under sudo) may open them; the CUDA toolkit and
whether the driver runs it; cuDNN; each framework in each Python
environment; CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER; and the GPUs'
state (memory in use, compute mode, MIG). First it says where programs run
(a host, a container given the GPUs or not, a user namespace, a Slurm job,
WSL), and for each framework, the toolkit and each --program it follows
the dynamic loader: which file each library resolves to, in ld.so's
order, and what it shadows.

Each check prints ✓ ok, ! warning, ✗ problem or - skipped, and for warnings
and problems the observed facts it judged from and the fix: a spec change for
gpuenv, or a command. It needs no spec and changes nothing.

--prometheus FILE writes the verdicts, the driver and CUDA versions, the
drift timer's last result (plan --record-drift) and the last generation as
node_exporter textfile metrics; --nfd FILE writes them as Node Feature
Discovery labels that expire after --nfd-expiry. Both replace FILE by a
rename, so a collector never reads half of it.

Exit status: 0 healthy (warnings alone do not fail), 2 problems found, 1
doctor could not run.`,
		Example: `  gpuenv doctor
  sudo gpuenv doctor --python /opt/venv/bin/python
  gpuenv doctor --program /usr/local/bin/trtexec
  gpuenv doctor --json | jq '.checks[] | select(.status == "problem")'
  gpuenv doctor --prometheus /var/lib/prometheus/node-exporter/gpuenv.prom >/dev/null`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			if err := files.validate(); err != nil {
				return err
			}
			v := newDoctorView(g)
			h, err := openHost(g)
			if err != nil {
				return err
			}
			if err := checkPrograms(h, "--python", pythons); err != nil {
				return err
			}
			if err := checkPrograms(h, "--program", programs); err != nil {
				return err
			}
			if pid < 0 {
				return fmt.Errorf("--pid %d: a process id is a positive number", pid)
			}
			r, obs, err := runDoctorPID(cmd.Context(), g, h, pythons, programs, pid)
			if err != nil {
				return err
			}
			if err := files.write(g, h, r, obs, start); err != nil {
				return err
			}
			if err := v.Report(r); err != nil {
				return err
			}
			if !r.Healthy {
				return &exitCodeError{code: exitChanges}
			}
			return nil
		},
	}
	repeatable(cmd.Flags(), &pythons, "python", "also check the Python environment of `INTERPRETER`, a path inside the root (repeatable)")
	repeatable(cmd.Flags(), &programs, "program", "also follow the loader for the native `PROGRAM`, a path inside the root (repeatable)")
	cmd.Flags().IntVar(&pid, "pid", 0, "judge the environment of the running process `PID` (its /proc/PID/environ inside the root) instead of doctor's own: a job's LD_LIBRARY_PATH and CUDA_VISIBLE_DEVICES")
	files.register(cmd)
	addJSONFlag(cmd, g)
	return cmd
}

// runDoctor observes h and runs doctor's checks for the invoking user.
func runDoctor(ctx context.Context, g *globalOptions, h *host.Host, pythons, programs []string) (*doctor.Report, *facts.Observation, error) {
	return runDoctorPID(ctx, g, h, pythons, programs, 0)
}

// runDoctorPID is runDoctor for the environment of process pid (none
// when 0): its variables stand for doctor's own session, which is then
// not the one programs run in.
func runDoctorPID(ctx context.Context, g *globalOptions, h *host.Host, pythons, programs []string, pid int) (*doctor.Report, *facts.Observation, error) {
	opts := providers.ObserveOptions{Pythons: pythons, Programs: programs, PID: pid}
	if h.Live() && pid == 0 {
		opts.Session = sessionVariables(g)
	}
	home, err := invokingHome(g, h)
	if err != nil {
		return nil, nil, err
	}
	opts.Home = home
	obs := providers.Observe(ctx, h, opts)
	if p := obs.Session.Process; p != nil && p.Error != "" {
		return nil, nil, fmt.Errorf("--pid %d: %s", pid, p.Error)
	}
	attachVerified(g, h, obs)
	r, err := doctorReportPID(g, h, obs, pid)
	return r, obs, err
}

func doctorReport(g *globalOptions, h *host.Host, obs *facts.Observation) (*doctor.Report, error) {
	return doctorReportPID(g, h, obs, 0)
}

func doctorReportPID(g *globalOptions, h *host.Host, obs *facts.Observation, pid int) (*doctor.Report, error) {
	u, err := invokingUser(g, h)
	if err != nil {
		return nil, err
	}
	in := doctor.Input{Obs: obs, User: u}
	if h.Live() && pid == 0 {
		in.Session = sessionVariables(g)
	}
	return doctor.Run(in), nil
}

// invokingHome is the home directory of the invoking user (invokingUser)
// in the root's /etc/passwd, whose shell start-up files doctor reads;
// "" when the root does not know the user.
func invokingHome(g *globalOptions, h *host.Host) (string, error) {
	u, err := invokingAccount(g, h)
	if err != nil || u == nil {
		return "", err
	}
	return u.Home, nil
}

// sessionVariables are the variables of doctor's own environment that a
// GPU program started from the same shell would see.
func sessionVariables(g *globalOptions) []facts.Assignment {
	var out []facts.Assignment
	for _, name := range []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PATH", "LD_LIBRARY_PATH"} {
		for _, kv := range g.Env {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				out = append(out, facts.Assignment{Name: name, Value: v})
			}
		}
	}
	return out
}

// invokingUser is the person whose programs must reach the GPU: SUDO_USER
// when gpuenv runs under sudo, else the user running it, looked up in the
// root's /etc/passwd (the root's users, not this machine's, own its
// device nodes). It is nil when the root does not know the user.
func invokingUser(g *globalOptions, h *host.Host) (*doctor.User, error) {
	u, err := invokingAccount(g, h)
	if err != nil || u == nil {
		return nil, err
	}
	return &doctor.User{Name: u.Name, UID: u.UID, GID: u.GID}, nil
}

// invokingAccount is invokingUser's entry in the root's /etc/passwd.
func invokingAccount(g *globalOptions, h *host.Host) (*groups.User, error) {
	data, err := h.ReadFile(groups.PasswdPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", groups.PasswdPath, err)
	}
	users, _ := groups.ParsePasswd(data)
	name := g.Getenv("SUDO_USER")
	uid := uint32(os.Getuid())
	for _, u := range users {
		if name != "" && u.Name == name || name == "" && u.UID == uid {
			return &u, nil
		}
	}
	return nil, nil
}

// doctorView shows doctor's report, for a person or as JSON; the flags
// choose one, once, in newDoctorView.
type doctorView interface {
	// Report shows r and returns the first write error.
	Report(r *doctor.Report) error
}

// newDoctorView chooses doctor's view from the flags: the report as JSON
// with --json, else the checks for a person.
func newDoctorView(g *globalOptions) doctorView {
	if g.JSON {
		return &doctorJSON{g: g}
	}
	return &doctorHuman{w: g.Stdout, root: g.Root, color: g.Color()}
}

// doctorJSON prints the report as a JSON document.
type doctorJSON struct {
	g *globalOptions
}

var _ doctorView = (*doctorJSON)(nil)

func (v *doctorJSON) Report(r *doctor.Report) error {
	return writeJSON(v.g, r)
}

// doctorHuman prints the report for a person.
type doctorHuman struct {
	w io.Writer
	// root is --root as the user wrote it.
	root string
	// color marks ✗ red and ! yellow, on a terminal.
	color bool
}

var _ doctorView = (*doctorHuman)(nil)

// Report prints the groups in order, one line per check, and for warnings
// and problems the evidence and the fix.
func (v *doctorHuman) Report(r *doctor.Report) error {
	p := &printer{w: v.w}
	who := "unknown user"
	if r.User != nil {
		who = "user " + r.User.Name
	}
	p.printf("Checking %s for %s\n", v.root, who)
	group := -1
	for _, c := range r.Checks {
		if c.Group.Number != group {
			group = c.Group.Number
			p.printf("\n%d. %s\n", c.Group.Number, c.Group.Name)
		}
		writeCheck(p, c, v.color)
	}
	p.printf("\n%s\n", countsText(r.Counts))
	return p.err
}

func writeCheck(p *printer, c doctor.Check, color bool) {
	p.printfEscaped("  %s %s\n", markStyle(c.Status, color), esc(c.Summary))
	if c.Status != doctor.Warning && c.Status != doctor.Problem {
		return
	}
	for _, e := range c.Evidence {
		p.printf("      seen: %s\n", e)
	}
	if f := c.Fix; f != nil {
		if f.Text != "" {
			p.printf("      fix: %s\n", f.Text)
		}
		for _, line := range strings.Split(f.Spec, "\n") {
			if f.Spec != "" {
				p.printf("        %s\n", strings.TrimRight(line, " "))
			}
		}
		for _, cmd := range f.Commands {
			p.printf("        $ %s\n", cmd)
		}
	}
}

func countsText(c doctor.Counts) string {
	var parts []string
	parts = append(parts, countWord(c.Problems, "problem"), countWord(c.Warnings, "warning"), fmt.Sprintf("%d ok", c.OK))
	if c.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", c.Skipped))
	}
	s := strings.Join(parts, ", ") + "."
	if c.Problems == 0 {
		s = "Healthy: " + s
	}
	return s
}

func countWord(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// printer keeps the first write error, so that a view can print line
// after line and check once.
type printer struct {
	w   io.Writer
	err error
}

// printf writes format with args escaped (esc): the format is gpuenv's
// own, the arguments the host's or a document's values.
func (p *printer) printf(format string, args ...any) {
	p.printfEscaped(format, escArgs(args)...)
}

// printfEscaped is printf for arguments already escaped, or styled with
// the terminal's colours around escaped text.
func (p *printer) printfEscaped(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
