package export

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// snapshot is a host with eight GPUs, one check per verdict in three
// groups, a drift record and an applied generation.
func snapshot() *Snapshot {
	obs := &facts.Observation{}
	obs.NVML.DriverVersion, obs.NVML.CUDADriverVersion = "550.54.15", "12.4"
	obs.Driver.ModuleVersion, obs.Driver.LibraryVersion = "550.54.15", "550.54.15"
	obs.PCI = make([]facts.PCIDevice, 8)
	for i := range obs.PCI {
		obs.PCI[i].Address = fmt.Sprintf("0000:%02x:00.0", 0x18+i)
		obs.Health.GPUs = append(obs.Health.GPUs, facts.GPUHealth{PCIAddress: obs.PCI[i].Address})
	}
	obs.CUDA.Toolkits = []facts.Toolkit{{Path: "/usr/local/cuda-11.8", Version: "11.8.0"}, {Path: "/usr/local/cuda-12.4", Version: "12.4.1"}, {Path: "/usr/lib/nvidia-cuda-toolkit", Version: "12.4.1"}}
	r := &doctor.Report{Checks: []doctor.Check{
		{ID: "pci.gpus", Group: doctor.GroupPCI, Status: doctor.OK, Summary: "8 GPUs"},
		{ID: "kernel.module", Group: doctor.GroupKernel, Status: doctor.OK},
		{ID: "kernel.nouveau", Group: doctor.GroupKernel, Status: doctor.Warning},
		{ID: "env.visible", Group: doctor.GroupEnv, Status: doctor.Skipped},
		{ID: "env.order", Group: doctor.GroupEnv, Status: doctor.Problem, Summary: "GPUs are chosen by index"},
		{ID: "env.path", Group: doctor.GroupEnv, Status: doctor.OK},
	}, Counts: doctor.Counts{OK: 3, Warnings: 1, Problems: 1, Skipped: 1}}
	return &Snapshot{
		Report: r, Obs: obs,
		Time: time.Date(2026, 12, 1, 10, 0, 0, 500e6, time.UTC), Took: 1500 * time.Millisecond,
		Drift:  &DriftRecord{FormatVersion: DriftFormatVersion, Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Outcome: Changes, ExitCode: 2, Add: 2, Change: 1, NeedsReboot: true},
		Status: &plan.ApplyStatus{Generation: 7, Kind: plan.KindApply, Status: plan.StatusApplied, Started: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
	}
}

var (
	metricName  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName   = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	sampleValue = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
)

// parseExposition reads the text format strictly enough to catch what
// node_exporter refuses: a family's HELP and TYPE before its samples and
// its samples together, names and label names of the allowed characters,
// label values with only the three escapes. It returns each sample as
// `name{label=value,…}` (values unescaped) → value.
func parseExposition(t *testing.T, text string) map[string]string {
	t.Helper()
	samples := map[string]string{}
	done := map[string]bool{}
	current := ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) {
			t.Fatalf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if done[name] || name == current {
				fail("family %s seen before", name)
			}
			if current != "" {
				done[current] = true
			}
			current = name
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if rest != current+" gauge" {
				fail("TYPE does not follow its HELP as a gauge")
			}
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if name != current || !metricName.MatchString(name) {
			fail("sample of %q outside its family %q", name, current)
		}
		key := name
		if strings.HasPrefix(rest, "{") {
			var labels []string
			rest = rest[1:]
			for !strings.HasPrefix(rest, "}") {
				ln, after, ok := strings.Cut(rest, `="`)
				if !ok || !labelName.MatchString(ln) {
					fail("bad label name at %q", rest)
				}
				var val strings.Builder
				j := 0
				for ; j < len(after) && after[j] != '"'; j++ {
					if after[j] == '\n' {
						fail("raw line feed in a label value")
					}
					if after[j] != '\\' {
						val.WriteByte(after[j])
						continue
					}
					j++
					switch after[j] {
					case '\\':
						val.WriteByte('\\')
					case '"':
						val.WriteByte('"')
					case 'n':
						val.WriteByte('\n')
					default:
						fail("escape \\%c is not in the format", after[j])
					}
				}
				labels = append(labels, ln+"="+val.String())
				rest = strings.TrimPrefix(after[j+1:], ",")
			}
			rest = rest[1:]
			key += "{" + strings.Join(labels, ",") + "}"
		}
		value, ok := strings.CutPrefix(rest, " ")
		if !ok || !sampleValue.MatchString(value) {
			fail("bad value %q", rest)
		}
		if _, dup := samples[key]; dup {
			fail("duplicate series")
		}
		samples[key] = value
	}
	return samples
}

func TestPrometheus(t *testing.T) {
	var b bytes.Buffer
	if err := WritePrometheus(&b, snapshot()); err != nil {
		t.Fatal(err)
	}
	got := parseExposition(t, b.String())
	for key, want := range map[string]string{
		"gpuenv_doctor_healthy": "0",
		"gpuenv_doctor_group_status{group=gpu-on-the-pci-bus,name=GPU on the PCI bus,number=1}": "0",
		"gpuenv_doctor_group_status{group=kernel-module,name=Kernel module,number=2}":           "1",
		// A skipped check does not hide the problem beside it.
		"gpuenv_doctor_group_status{group=environment,name=Environment,number=8}": "2",
		"gpuenv_doctor_checks{status=ok}":                                         "3",
		"gpuenv_doctor_checks{status=problem}":                                    "1",
		"gpuenv_doctor_checks{status=skipped}":                                    "1",
		"gpuenv_doctor_duration_seconds":                                          "1.5",
		"gpuenv_doctor_timestamp_seconds":                                         "1796119200.5",
		// Toolkits newest first, each once.
		"gpuenv_driver_info{driver=550.54.15,module=550.54.15,library=550.54.15,cuda_driver=12.4,cuda_toolkits=12.4.1,11.8.0}": "1",
		"gpuenv_gpus":                                                       "8",
		"gpuenv_drift_record_present":                                       "1",
		"gpuenv_drift_record_error":                                         "0",
		"gpuenv_drift_outcome{outcome=no-changes}":                          "0",
		"gpuenv_drift_outcome{outcome=changes}":                             "1",
		"gpuenv_drift_outcome{outcome=error}":                               "0",
		"gpuenv_drift_timestamp_seconds":                                    "1796115600",
		"gpuenv_drift_changes{action=add}":                                  "2",
		"gpuenv_drift_changes{action=change}":                               "1",
		"gpuenv_drift_changes{action=remove}":                               "0",
		"gpuenv_drift_needs_reboot":                                         "1",
		"gpuenv_generation{kind=apply,status=applied}":                      "7",
		"gpuenv_generation_timestamp_seconds":                               "1796025600",
		"gpuenv_generation_unfinished":                                      "0",
		"gpuenv_gpus_healthy":                                               "8",
		"gpuenv_gpus_unhealthy":                                             "0",
		"gpuenv_gpu_health{gpu=,UUID=,pci_bus_id=0000:1f:00.0,model_name=}": "0",
	} {
		if got[key] != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
	// 25 of the host, 2 GPU counts, and health, missing_from_bus and
	// xid_errors of each of the 8 GPUs.
	if len(got) != 25+2+3*8 {
		t.Errorf("%d series, want %d:\n%s", len(got), 25+2+3*8, b.String())
	}
}

// With no drift record and nothing applied, the metrics say so instead
// of leaving the series out, so that an alert can tell "never ran" from
// "exporter down".
func TestPrometheusNothingYet(t *testing.T) {
	s := snapshot()
	s.Drift, s.DriftErr, s.Status = nil, errors.New("unreadable"), nil
	var b bytes.Buffer
	if err := WritePrometheus(&b, s); err != nil {
		t.Fatal(err)
	}
	got := parseExposition(t, b.String())
	if got["gpuenv_drift_record_present"] != "0" || got["gpuenv_drift_record_error"] != "1" || got["gpuenv_generation"] != "0" || got["gpuenv_generation_unfinished"] != "0" {
		t.Errorf("missing state not reported:\n%s", b.String())
	}
	for key := range got {
		if strings.HasPrefix(key, "gpuenv_drift_outcome") || strings.HasPrefix(key, "gpuenv_generation_timestamp") {
			t.Errorf("%s written without a record", key)
		}
	}
}

// Label values come from the host's files: every character that means
// something to the format is escaped, and bytes that are not UTF-8 are
// replaced, so that one odd value cannot make the collector drop the file.
func TestPrometheusEscapes(t *testing.T) {
	s := snapshot()
	s.Obs.Driver.ModuleVersion = "550 \"open\"\\\nx\xff"
	s.Obs.CUDA.Toolkits = nil
	var b bytes.Buffer
	if err := WritePrometheus(&b, s); err != nil {
		t.Fatal(err)
	}
	got := parseExposition(t, b.String())
	key := "gpuenv_driver_info{driver=550.54.15,module=550 \"open\"\\\nx\uFFFD,library=550.54.15,cuda_driver=12.4,cuda_toolkits=}"
	if got[key] != "1" {
		t.Errorf("escaped info series not found in:\n%s", b.String())
	}
}

func TestNFD(t *testing.T) {
	s := snapshot()
	expiry := time.Date(2026, 12, 1, 11, 0, 0, 0, time.FixedZone("CET", 3600))
	data, err := NFDFile(s.NFDLabels(), expiry)
	if err != nil {
		t.Fatal(err)
	}
	want := `# +expiry-time=2026-12-01T10:00:00Z
# Written by gpuenv doctor --nfd; rewritten whole at each run.
feature.node.kubernetes.io/gpuenv-healthy=false
feature.node.kubernetes.io/gpuenv-problems=1
feature.node.kubernetes.io/gpuenv-warnings=1
feature.node.kubernetes.io/gpuenv-gpus=8
feature.node.kubernetes.io/gpuenv-gpus-healthy=8
feature.node.kubernetes.io/gpuenv-gpus-unhealthy=0
feature.node.kubernetes.io/gpuenv-driver=550.54.15
feature.node.kubernetes.io/gpuenv-cuda-driver=12.4
feature.node.kubernetes.io/gpuenv-cuda-toolkit=12.4.1
feature.node.kubernetes.io/gpuenv-drift=changes
feature.node.kubernetes.io/gpuenv-generation=7
feature.node.kubernetes.io/gpuenv-check.gpu-on-the-pci-bus=ok
feature.node.kubernetes.io/gpuenv-check.kernel-module=warning
feature.node.kubernetes.io/gpuenv-check.environment=problem
`
	if string(data) != want {
		t.Errorf("feature file:\n%s\nwant:\n%s", data, want)
	}

	// A version that is no label value is cleaned, or left out when
	// nothing of it is left; never written as NFD would refuse it.
	s.Obs.NVML.DriverVersion, s.Obs.Driver.ModuleVersion, s.Obs.Driver.LibraryVersion = "", "", ""
	s.Obs.NVML.CUDADriverVersion = "12.4 (beta)"
	s.Obs.CUDA.Toolkits = []facts.Toolkit{{Version: "---"}}
	data, err = NFDFile(s.NFDLabels(), expiry)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("\nfeature.node.kubernetes.io/gpuenv-cuda-driver=12.4__beta\n")) ||
		bytes.Contains(data, []byte("gpuenv-driver=")) || bytes.Contains(data, []byte("gpuenv-cuda-toolkit=")) {
		t.Errorf("versions not cleaned or left out:\n%s", data)
	}
}

func TestNFDRefuses(t *testing.T) {
	expiry := time.Now()
	for _, tc := range []struct {
		labels []Label
		err    string
	}{
		{[]Label{{"feature.node.kubernetes.io/gpuenv-x", "a b"}}, `label feature.node.kubernetes.io/gpuenv-x: label value "a b": ' ' is not allowed`},
		{[]Label{{"feature.node.kubernetes.io/gpuenv-x", "-a"}}, "must begin and end with a letter or digit"},
		{[]Label{{"feature.node.kubernetes.io/gpuenv-x", strings.Repeat("a", 64)}}, "must be 1 to 63 characters"},
		{[]Label{{"Feature.Node/x", "a"}}, `the prefix "Feature.Node" is not a DNS subdomain`},
		{[]Label{{"example.com/" + strings.Repeat("n", 64), "a"}}, "must be 1 to 63 characters"},
		{[]Label{{"/x", "a"}}, "the prefix must be a DNS subdomain"},
	} {
		if _, err := NFDFile(tc.labels, expiry); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want %q", tc.labels, err, tc.err)
		}
	}
	// NFD reads 64 kB of a file: a longer one would be cut in the middle
	// of the labels.
	var many []Label
	for i := range 2000 {
		many = append(many, Label{"feature.node.kubernetes.io/gpuenv-check.n" + strconv.Itoa(i), "problem"})
	}
	if _, err := NFDFile(many, expiry); err == nil || !strings.Contains(err.Error(), "nfd-worker reads at most 64000") {
		t.Errorf("oversized file: %v", err)
	}
	if err := ValidLabelValue(""); err != nil {
		t.Errorf("the empty value is a valid label value: %v", err)
	}
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"550.54.15":                    "550.54.15",
		"12.4 (beta)":                  "12.4__beta",
		"_x_":                          "x",
		"ünïcode":                      "n__code",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
		"":                             "",
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
		if err := ValidLabelValue(LabelValue(in)); err != nil {
			t.Errorf("LabelValue(%q) is not valid: %v", in, err)
		}
	}
}

func TestDriftRoundTrip(t *testing.T) {
	rec := snapshot().Drift
	data, err := rec.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadDrift(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if *back != *rec {
		t.Errorf("read back %+v, want %+v", back, rec)
	}
	for in, want := range map[string]string{
		`{"format_version": "2.0", "outcome": "changes"}`: `drift record format 2.0 is not known to this gpuenv (it reads 3.x and 1.x, writes 3.0)`,
		`{"format_version": "1.3", "outcome": "drifted"}`: `unknown outcome "drifted"`,
		`{"format_version": "1.0", "outcome": "changes"`:  "reading the drift record: unexpected EOF",
		`{"outcome": "changes"}`:                          `format version ""`,
	} {
		if _, err := ReadDrift(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadDrift(%s): %v, want %q", in, err, want)
		}
	}
}
