package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/export"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
)

// slurmHealthName is the name under which gpuenv runs as Slurm's health
// check: slurmd starts HealthCheckProgram and Prolog with no arguments, so
// a link of that name to gpuenv is how slurm.conf names the check.
const slurmHealthName = "gpuenv-slurm-health"

// slurmOptions are slurm-health's flags.
type slurmOptions struct {
	node     string
	scontrol string
	timeout  time.Duration
}

func newSlurmHealthCmd(g *globalOptions) *cobra.Command {
	var o slurmOptions
	cmd := &cobra.Command{
		Use:   "slurm-health",
		Short: "Drain this Slurm node when doctor finds problems, resume it when they are gone",
		Long: `Slurm-health runs doctor's checks on the host (--root) and tells Slurm: a node
with problems is drained (scontrol update State=DRAIN) with a reason that
starts "gpuenv:" and names the first problem; a healthy node that gpuenv
drained is resumed. A node drained by anyone else (its reason does not start
"gpuenv:") is never resumed and never given gpuenv's reason. Warnings alone
keep a node in service.

It is meant as slurm.conf's HealthCheckProgram and Prolog, which slurmd runs
as root with no arguments and kills after 60 seconds: link
` + slurmHealthName + ` to gpuenv and name the link there. Run under that
name, gpuenv runs slurm-health with its defaults. Doctor gets the time
--timeout leaves after scontrol's share; a doctor that has not finished by
then drains the node too, since a GPU driver that hangs its callers is the
problem that most needs a drain. As a Prolog, a nonzero exit makes Slurm
requeue the job; Slurm keeps gpuenv's reason on a node gpuenv has drained.

The node is --node, else $SLURMD_NODENAME (slurmd sets it), else the short
host name. Doctor judges the node's configuration, not slurm-health's own
environment, which in a Prolog is the job's.

Exit status: 0 healthy, 2 problems found (the node is drained unless an
administrator drained it first), 1 could not run or could not reach Slurm.`,
		Example: `  ln -s /usr/bin/gpuenv /usr/local/sbin/` + slurmHealthName + `
  # slurm.conf:
  HealthCheckProgram=/usr/local/sbin/` + slurmHealthName + `
  HealthCheckInterval=300
  Prolog=/usr/local/sbin/` + slurmHealthName + `
  sudo gpuenv slurm-health --node gpu07 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSlurmHealth(cmd.Context(), g, &o)
		},
	}
	cmd.Flags().StringVar(&o.node, "node", "", "the Slurm node name (default $SLURMD_NODENAME, else the short host name)")
	cmd.Flags().StringVar(&o.scontrol, "scontrol", "scontrol", "the scontrol `PROGRAM` to run, found in PATH (or /usr/bin, for slurmd's bare environment) when it has no slash")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 45*time.Second, "the most the whole check may take; Slurm kills a health check or Prolog after 60s")
	addJSONFlag(cmd, g)
	return cmd
}

// scontrolShare is the time kept from --timeout for scontrol: one call to
// read the node and one to change it, each bounded by half of it.
const scontrolShare = 10 * time.Second

// slurmResult is what slurm-health did, as --json prints it.
type slurmResult struct {
	FormatVersion string               `json:"format_version"`
	Node          string               `json:"node"`
	Healthy       bool                 `json:"healthy"`
	TimedOut      bool                 `json:"timed_out,omitempty"`
	Problems      int                  `json:"problems"`
	State         string               `json:"state_before"`
	Reason        string               `json:"reason_before,omitempty"`
	Decision      export.SlurmDecision `json:"decision"`
	// Checks are the checks that found a problem.
	Checks []doctor.Check `json:"problem_checks,omitempty"`
	Took   float64        `json:"took_seconds"`
}

// slurmError is scontrol failing: what it was asked and what it said.
type slurmError struct {
	args   []string
	output string
	err    error
}

func (e *slurmError) Error() string {
	out := strings.TrimSpace(e.output)
	if out != "" {
		out = ": " + out
	}
	return fmt.Sprintf("scontrol %s: %v%s", strings.Join(e.args, " "), e.err, out)
}

func runSlurmHealth(ctx context.Context, g *globalOptions, o *slurmOptions) error {
	start := time.Now()
	if o.timeout <= scontrolShare {
		return fmt.Errorf("--timeout %s must be longer than the %s kept for scontrol", o.timeout, scontrolShare)
	}
	node, err := slurmNodeName(g, o.node)
	if err != nil {
		return err
	}
	scontrol, err := findScontrol(g, o.scontrol)
	if err != nil {
		return err
	}
	h, err := openHost(g)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	// Doctor runs while scontrol is asked about the node. A doctor stuck
	// in a driver call cannot be interrupted from Go; its goroutine is
	// left behind and ends with the process.
	type done struct {
		r   *doctor.Report
		err error
	}
	ch := make(chan done, 1)
	dctx, dcancel := context.WithTimeout(ctx, o.timeout-scontrolShare)
	defer dcancel()
	go func() {
		r, err := slurmDoctor(dctx, g, h)
		ch <- done{r, err}
	}()
	out, err := runScontrol(ctx, scontrol, export.ScontrolShow(node))
	if err != nil {
		return err
	}
	n, err := export.ParseSlurmNode(out)
	if err != nil {
		return err
	}

	res := &slurmResult{FormatVersion: slurmFormatVersion, Node: node, State: n.State, Reason: n.Reason}
	var reason string
	select {
	case d := <-ch:
		if d.err != nil {
			return d.err
		}
		res.Healthy, res.Problems = d.r.Healthy, d.r.Counts.Problems
		for _, c := range d.r.Checks {
			if c.Status == doctor.Problem {
				res.Checks = append(res.Checks, c)
			}
		}
		reason = export.SlurmReason(d.r)
	case <-dctx.Done():
		res.TimedOut = true
		reason = export.CleanReason(fmt.Sprintf("%s doctor did not finish within %s (a GPU driver call may hang)", export.SlurmReasonPrefix, (o.timeout - scontrolShare).Round(time.Second)))
	}
	res.Decision = export.DecideSlurm(n, res.Healthy, reason)
	switch res.Decision.Action {
	case export.SlurmDrain:
		_, err = runScontrol(ctx, scontrol, export.ScontrolDrain(node, res.Decision.Reason))
	case export.SlurmResume:
		_, err = runScontrol(ctx, scontrol, export.ScontrolResume(node))
	}
	if err != nil {
		return err
	}
	res.Took = time.Since(start).Seconds()
	if err := showSlurmResult(g, res); err != nil {
		return err
	}
	if !res.Healthy {
		return &exitCodeError{code: exitChanges}
	}
	return nil
}

// nodeDoctor runs doctor's checks on the node as a whole. The variables
// of slurm-health's own environment are not judged: in a Prolog they are
// the job's (Slurm gives it the CUDA_VISIBLE_DEVICES of its allocation),
// and a node is not unhealthy because one job sees some of its GPUs.
// slurmDoctor is the doctor slurm-health runs: nodeDoctor, or in tests
// one that never finishes, as one stuck in a driver call does.
var slurmDoctor = nodeDoctor

func nodeDoctor(ctx context.Context, g *globalOptions, h *host.Host) (*doctor.Report, error) {
	obs := providers.Observe(ctx, h, providers.ObserveOptions{})
	attachVerified(g, h, obs)
	u, err := invokingUser(g, h)
	if err != nil {
		return nil, err
	}
	return doctor.Run(doctor.Input{Obs: obs, User: u}), nil
}

func showSlurmResult(g *globalOptions, res *slurmResult) error {
	if g.JSON {
		return writeJSON(g, res)
	}
	p := &printer{w: g.Stdout}
	verdict := "healthy"
	switch {
	case res.TimedOut:
		verdict = "doctor timed out"
	case !res.Healthy:
		verdict = countWord(res.Problems, "problem")
	}
	p.printf("Node %s (%s): %s\n", res.Node, res.State, verdict)
	for _, c := range res.Checks {
		p.printfEscaped("  %s %s\n", markStyle(c.Status, g.Color()), esc(c.Summary))
	}
	switch d := res.Decision; d.Action {
	case export.SlurmDrain:
		p.printf("Drained: %s (%s)\n", d.Reason, d.Why)
	case export.SlurmResume:
		p.printf("Resumed: %s\n", d.Why)
	default:
		p.printf("Left as it is: %s\n", d.Why)
	}
	return p.err
}

// slurmNodeName is the node to check: --node, else slurmd's
// SLURMD_NODENAME, else the host name up to its first dot, as Slurm
// names nodes by default.
func slurmNodeName(g *globalOptions, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if n := g.Getenv("SLURMD_NODENAME"); n != "" {
		return n, nil
	}
	hn, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("the node name: %w (give it with --node)", err)
	}
	short, _, _ := strings.Cut(hn, ".")
	return short, nil
}

// findScontrol finds scontrol: slurmd runs its health check with an
// environment that may have no PATH.
func findScontrol(g *globalOptions, name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(g.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/bin or /usr/local/bin: install Slurm's client commands or give --scontrol", name)
}

// maxScontrolOutput bounds what slurm-health reads of scontrol's answer:
// a node's description is a few hundred bytes.
const maxScontrolOutput = 1 << 20

// runScontrol runs scontrol with args, within half of scontrolShare. Its
// answer is read up to maxScontrolOutput, and only the end of what it
// printed is quoted in an error: a broken or hostile scontrol may print
// without end.
func runScontrol(ctx context.Context, scontrol string, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, scontrolShare/2)
	defer cancel()
	cmd := exec.CommandContext(ctx, scontrol, args...)
	out := &childproc.Head{Max: maxScontrolOutput}
	var said childproc.Tail
	cmd.Stdout, cmd.Stderr = io.MultiWriter(out, &said), &said
	// A child that keeps the output open, or that scontrol left behind,
	// must not keep slurm-health past its timeout.
	childproc.Group(cmd, time.Second)
	err := cmd.Run()
	childproc.KillGroup(cmd)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		err = fmt.Errorf("no answer within %s", scontrolShare/2)
	case err == nil && out.Truncated():
		err = fmt.Errorf("it printed %d bytes, more than the %d a node's description takes", out.Len(), maxScontrolOutput)
	}
	if err != nil {
		return "", &slurmError{args: args, output: said.Text(0), err: err}
	}
	return string(out.Bytes()), nil
}
