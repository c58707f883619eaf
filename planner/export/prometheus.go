package export

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// Prometheus's text exposition format, as node_exporter's textfile
// collector reads it (https://prometheus.io/docs/instrumenting/exposition_formats/,
// "Text-based format"): per metric family a "# HELP" and a "# TYPE" line,
// then its samples, all together; label values in double quotes with
// backslash, double quote and line feed escaped. Every gpuenv metric is a
// gauge: each file is a snapshot, rewritten whole by the next doctor run.
//
// The check groups' health is one series per group whose value orders the
// verdicts (0 ok, 1 warning, 2 problem), so that one alert rule,
// gpuenv_doctor_group_status == 2, covers every group and max() over a
// fleet is meaningful. The drift outcome is one series per outcome with 1
// on the one that happened (the state-set idiom), so that an alert needs
// no knowledge of numeric codes and an absent record is its own metric.

// metric is one family being written.
type metric struct {
	name, help string
	samples    []sample
}

type sample struct {
	labels []string // name, value, name, value …
	value  float64
}

func (m *metric) add(v float64, labels ...string) {
	m.samples = append(m.samples, sample{labels: labels, value: v})
}

// metrics are the families WritePrometheus writes for s, in order.
func (s *Snapshot) metrics() []*metric {
	var out []*metric
	family := func(name, help string) *metric {
		m := &metric{name: "gpuenv_" + name, help: help}
		out = append(out, m)
		return m
	}
	r := s.Report

	family("doctor_healthy", "1 when gpuenv doctor found no problem (warnings alone keep a host healthy), else 0.").
		add(boolValue(r.Healthy))
	groups := family("doctor_group_status", "Worst verdict of each of gpuenv doctor's check groups: 0 ok (or nothing to check), 1 warning, 2 problem.")
	for _, g := range s.Groups() {
		groups.add(float64(severity(g.Status)), "group", g.Slug, "name", g.Group.Name, "number", strconv.Itoa(g.Group.Number))
	}
	checks := family("doctor_checks", "gpuenv doctor's checks by verdict.")
	for _, c := range []struct {
		status doctor.Status
		n      int
	}{{doctor.OK, r.Counts.OK}, {doctor.Warning, r.Counts.Warnings}, {doctor.Problem, r.Counts.Problems}, {doctor.Skipped, r.Counts.Skipped}} {
		checks.add(float64(c.n), "status", string(c.status))
	}
	family("doctor_duration_seconds", "How long gpuenv doctor took to observe the host and check it.").
		add(s.Took.Seconds())
	family("doctor_timestamp_seconds", "When gpuenv doctor wrote this file, in seconds since the Unix epoch.").
		add(unixSeconds(s.Time))

	v := s.Versions()
	family("driver_info", "The NVIDIA driver and CUDA versions gpuenv doctor saw, as labels (empty when unknown); the value is always 1.").
		add(1, "driver", v.Driver, "module", v.Module, "library", v.Library, "cuda_driver", v.CUDADriver, "cuda_toolkits", strings.Join(v.Toolkits, ","))
	family("gpus", "NVIDIA GPUs on the PCI bus (or NVML's count when it sees more).").
		add(float64(v.GPUs))

	d := s.Drift
	family("drift_record_present", "1 when the drift timer's record (plan --record-drift) was read, 0 when there is none yet or it cannot be read.").
		add(boolValue(d != nil))
	family("drift_record_error", "1 when the drift record exists but cannot be read or trusted (doctor says why on stderr).").
		add(boolValue(s.DriftErr != nil))
	if d != nil {
		outcome := family("drift_outcome", "The outcome of the drift timer's last plan: 1 on the outcome that happened, 0 on the others.")
		for _, o := range Outcomes {
			outcome.add(boolValue(d.Outcome == o), "outcome", string(o))
		}
		family("drift_timestamp_seconds", "When the drift timer's last plan ran, in seconds since the Unix epoch.").
			add(unixSeconds(d.Time))
		changes := family("drift_changes", "Changes the drift timer's last plan found, by action.")
		changes.add(float64(d.Add), "action", "add")
		changes.add(float64(d.Change), "action", "change")
		changes.add(float64(d.Remove), "action", "remove")
		family("drift_needs_reboot", "1 when the changes the drift timer's last plan found need a reboot.").
			add(boolValue(d.NeedsReboot))
	}

	st := s.Status
	gen := family("generation", "The newest generation (apply or rollback) in gpuenv's state directory, with its kind and status; 0 when nothing was ever applied.")
	if st == nil || st.Generation == 0 {
		gen.add(0)
	} else {
		gen.add(float64(st.Generation), "kind", string(st.Kind), "status", string(st.Status))
		family("generation_timestamp_seconds", "When the newest generation started, in seconds since the Unix epoch.").
			add(unixSeconds(st.Started))
	}
	unfinished := false
	if st != nil {
		unfinished = st.Unfinished
	}
	family("generation_unfinished", "1 when a generation is unfinished and the host may be between two states (gpuenv rollback finishes it).").
		add(boolValue(unfinished))
	healthy, unhealthy := s.GPUCounts()
	family("gpus_healthy", "GPUs gpuenv doctor's GPU state checks find no problem with.").add(float64(healthy))
	family("gpus_unhealthy", "GPUs gpuenv doctor's GPU state checks find a problem with.").add(float64(unhealthy))
	return append(out, s.gpuMetrics()...)
}

// WritePrometheus writes s's metrics in the text exposition format.
func WritePrometheus(w io.Writer, s *Snapshot) error {
	bw := bufio.NewWriter(w)
	for _, m := range s.metrics() {
		bw.WriteString("# HELP " + m.name + " " + escapeHelp(m.help) + "\n")
		bw.WriteString("# TYPE " + m.name + " gauge\n")
		for _, smp := range m.samples {
			bw.WriteString(m.name)
			if len(smp.labels) > 0 {
				bw.WriteByte('{')
				for i := 0; i+1 < len(smp.labels); i += 2 {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(smp.labels[i] + `="` + escapeLabel(smp.labels[i+1]) + `"`)
				}
				bw.WriteByte('}')
			}
			bw.WriteString(" " + strconv.FormatFloat(smp.value, 'f', -1, 64) + "\n")
		}
	}
	return bw.Flush()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// escapeLabel escapes a label value; bytes that are not UTF-8 (a path
// read from a broken file system) become U+FFFD, since the format is UTF-8
// and a parser refuses the whole file for one bad byte.
func escapeLabel(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return labelEscaper.Replace(s)
}

func escapeHelp(s string) string { return helpEscaper.Replace(s) }

// unixSeconds is t as the format writes times; 0 for no time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMilli()) / 1000
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
