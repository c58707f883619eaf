package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/internal/safefile"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/export"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
	"github.com/gpuenv/gpuenv/spec"
)

// healthFiles are doctor's flags that write its findings for fleet tools.
type healthFiles struct {
	prometheus string
	nfd        string
	nfdExpiry  time.Duration
}

func (f *healthFiles) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.prometheus, "prometheus", "", "also write the findings, the drift timer's last result and the last generation as node_exporter textfile metrics to `FILE` (on this machine; name it *.prom in the collector's directory)")
	cmd.Flags().StringVar(&f.nfd, "nfd", "", "also write the findings as Node Feature Discovery labels to `FILE` (on this machine, in nfd-worker's features.d)")
	cmd.Flags().DurationVar(&f.nfdExpiry, "nfd-expiry", time.Hour, "how long the --nfd labels stay after this run: rewrite the file more often than this")
}

func (f *healthFiles) validate() error {
	if f.nfdExpiry <= 0 {
		return fmt.Errorf("--nfd-expiry %s must be positive", f.nfdExpiry)
	}
	for _, p := range []struct{ flag, name string }{{"--prometheus", f.prometheus}, {"--nfd", f.nfd}} {
		if p.name == "" {
			continue
		}
		if strings.HasPrefix(filepath.Base(p.name), ".") {
			// Both readers skip dot files, as gpuenv's own temporary
			// files rely on.
			return fmt.Errorf("%s %s: the collector ignores files whose name starts with a dot", p.flag, p.name)
		}
		if fi, err := os.Stat(filepath.Dir(p.name)); err != nil {
			return fmt.Errorf("%s %s: %w", p.flag, p.name, err)
		} else if !fi.IsDir() {
			return fmt.Errorf("%s %s: %s is not a directory", p.flag, p.name, filepath.Dir(p.name))
		}
	}
	return nil
}

func (f *healthFiles) wanted() bool { return f.prometheus != "" || f.nfd != "" }

// write writes the files asked for from one doctor run. Each is replaced
// by a rename, so a collector never reads half of one.
func (f *healthFiles) write(g *globalOptions, h *host.Host, r *doctor.Report, obs *facts.Observation, start time.Time) error {
	if !f.wanted() {
		return nil
	}
	s := healthSnapshot(g, h, r, obs, start)
	if f.prometheus != "" {
		var b bytes.Buffer
		if err := export.WritePrometheus(&b, s); err != nil {
			return err
		}
		// World-readable: node_exporter runs as its own user.
		if err := safefile.WriteFile(f.prometheus, b.Bytes(), 0o644, safefile.Options{}); err != nil {
			return fmt.Errorf("writing --prometheus %s: %w", f.prometheus, err)
		}
	}
	if f.nfd != "" {
		data, err := export.NFDFile(s.NFDLabels(), s.Time.Add(f.nfdExpiry))
		if err != nil {
			return fmt.Errorf("--nfd %s: %w", f.nfd, err)
		}
		if err := safefile.WriteFile(f.nfd, data, 0o644, safefile.Options{}); err != nil {
			return fmt.Errorf("writing --nfd %s: %w", f.nfd, err)
		}
	}
	return nil
}

// healthSnapshot gathers doctor's report with the state directory's drift
// record and status. Neither stops the report: what cannot be read is
// reported as missing, with a warning on stderr.
func healthSnapshot(g *globalOptions, h *host.Host, r *doctor.Report, obs *facts.Observation, start time.Time) *export.Snapshot {
	s := &export.Snapshot{Report: r, Obs: obs, Time: start, Took: time.Since(start)}
	data, err := apply.ReadDrift(h, g.stateDir())
	if err == nil && data != nil {
		s.Drift, err = export.ReadDrift(bytes.NewReader(data))
	}
	if err != nil {
		s.DriftErr = err
		fmt.Fprintf(g.Stderr, "Warning: the drift record is not reported: %v\n", err)
	}
	st, err := apply.ReadStatus(h, g.stateDir())
	if err != nil {
		fmt.Fprintf(g.Stderr, "Warning: the last generation is not reported: %v\n", err)
	} else if st.Generation > 0 {
		s.Status = &st
	}
	return s
}

// recordDrift writes the drift record of one plan run: its outcome from
// the plan (nil when none could be made), the diagnostics and the exit
// status runPlan ended with (err). It returns err unchanged when the
// record is written, and an error saying so, with exit status 1, when it
// is not: a drift timer that cannot record must fail where systemd shows
// it.
func recordDrift(g *globalOptions, specPath string, s *spec.Spec, p *plan.Plan, diags hcl.Diagnostics, err error) error {
	rec := &export.DriftRecord{FormatVersion: export.DriftFormatVersion, Time: time.Now().UTC(), Spec: specPath, SpecDigest: planner.SpecDigest(s)}
	var ec *exitCodeError
	switch {
	case err == nil:
		rec.Outcome = export.NoChanges
	case errors.As(err, &ec) && ec.code == exitChanges:
		rec.Outcome, rec.ExitCode = export.Changes, exitChanges
	case errors.As(err, &ec):
		rec.Outcome, rec.ExitCode = export.Error, ec.code
		rec.Error = spec.ErrorsText(diags)
	default:
		rec.Outcome, rec.ExitCode, rec.Error = export.Error, exitError, err.Error()
	}
	if p != nil && rec.Outcome != export.Error {
		if !p.Empty() {
			// Without --detailed-exitcode plan exits 0 with changes;
			// the record says what the host is, not how plan exited.
			rec.Outcome = export.Changes
		}
		rec.Add, rec.Change, rec.Remove, rec.NeedsReboot = p.Summary.Add, p.Summary.Change, p.Summary.Remove, p.NeedsReboot
	}
	if rec.Outcome == export.Error && rec.Error == "" {
		rec.Error = "plan failed without a diagnostic"
	}
	data, encErr := rec.Encode()
	if encErr == nil {
		h, hostErr := openHost(g)
		if hostErr != nil {
			encErr = hostErr
		} else {
			encErr = apply.WriteDrift(h, g.stateDir(), data)
		}
	}
	switch {
	case encErr == nil:
		return err
	case err != nil && !errors.As(err, &ec):
		return fmt.Errorf("%w; recording drift: %v", err, encErr)
	}
	return fmt.Errorf("recording drift: %w", encErr)
}

// attachVerified puts the last verify's record into obs, for doctor to
// re-admit the GPUs it passed on after their Xids. A record gpuenv may
// not read (a user other than root, a state directory of 0700) is as
// none: nothing is re-admitted, which is the safe side.
func attachVerified(g *globalOptions, h *host.Host, obs *facts.Observation) {
	data, err := apply.ReadVerified(h, g.stateDir())
	if errors.Is(err, fs.ErrPermission) {
		return
	}
	if err == nil && data != nil {
		obs.Health.Verified, err = export.ReadVerified(data)
	}
	if err != nil {
		fmt.Fprintf(g.Stderr, "Warning: the verify record is not used: %v\n", err)
	}
}

// recordVerified keeps what the framework-free check c found on each GPU
// (see verify.Record). A record that cannot be written is a warning: the
// check itself stands.
func recordVerified(g *globalOptions, h *host.Host, obs *facts.Observation, c *cudacheck.Report) {
	if obs.Health.BootID == "" {
		return
	}
	var prev *facts.VerifyRecord
	if data, err := apply.ReadVerified(h, g.stateDir()); err == nil && data != nil {
		prev, _ = export.ReadVerified(data)
	}
	data, err := json.MarshalIndent(verify.Record(obs, c, prev, time.Now()), "", "  ")
	if err == nil {
		err = apply.WriteVerified(h, g.stateDir(), append(data, '\n'))
	}
	if err != nil {
		fmt.Fprintf(g.Stderr, "Warning: the verify record was not kept (GPUs failed by an Xid stay failed): %v\n", err)
	}
}
