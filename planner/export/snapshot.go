package export

import (
	"slices"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Snapshot is everything the health formats report on one host, gathered
// by one doctor run.
type Snapshot struct {
	Report *doctor.Report
	Obs    *facts.Observation
	// Time is when doctor ran; Took is how long it took.
	Time time.Time
	Took time.Duration
	// Drift is the drift timer's last record; nil when there is none or
	// it could not be read (DriftErr then says why).
	Drift    *DriftRecord
	DriftErr error
	// Status is the state directory's status file; nil when nothing was
	// ever applied or it could not be read.
	Status *plan.ApplyStatus
}

// GroupVerdict is one check group's worst verdict.
type GroupVerdict struct {
	Group doctor.Group
	// Slug names the group in labels: its name in lower case with every
	// run of other characters made one dash ("gpu-on-the-pci-bus").
	Slug   string
	Status doctor.Status
}

// Groups are the report's groups in order, each with the worst verdict of
// its checks. A group whose checks were all skipped is OK: nothing in it
// stands in the way.
func (s *Snapshot) Groups() []GroupVerdict {
	var out []GroupVerdict
	for _, c := range s.Report.Checks {
		i := slices.IndexFunc(out, func(g GroupVerdict) bool { return g.Group == c.Group })
		if i < 0 {
			out = append(out, GroupVerdict{Group: c.Group, Slug: slug(c.Group.Name), Status: doctor.OK})
			i = len(out) - 1
		}
		if severity(c.Status) > severity(out[i].Status) {
			out[i].Status = c.Status
		}
	}
	return out
}

// severity orders verdicts for the metric and for worst-of: 0 ok (and
// skipped), 1 warning, 2 problem.
func severity(s doctor.Status) int {
	switch s {
	case doctor.Warning:
		return 1
	case doctor.Problem:
		return 2
	}
	return 0
}

func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

// Versions are the driver and CUDA versions doctor saw, "" where unknown.
type Versions struct {
	// Driver is the driver programs get: NVML's, else the loaded
	// module's, else the library's (doctor.DriverVersion).
	Driver  string
	Module  string
	Library string
	// CUDADriver is the CUDA version the driver supports, from NVML.
	CUDADriver string
	// Toolkits are the installed CUDA toolkits' versions, newest first.
	Toolkits []string
	GPUs     int
}

// Versions reads the versions out of the observation.
func (s *Snapshot) Versions() Versions {
	obs := s.Obs
	v := Versions{
		Module:     obs.Driver.ModuleVersion,
		Library:    obs.Driver.LibraryVersion,
		CUDADriver: obs.NVML.CUDADriverVersion,
		GPUs:       max(len(obs.PCI), len(obs.NVML.Devices)),
	}
	if d, from := doctor.DriverVersion(obs); from != "" {
		v.Driver = d.String()
	}
	for _, t := range obs.CUDA.Toolkits {
		if t.Version != "" && !slices.Contains(v.Toolkits, t.Version) {
			v.Toolkits = append(v.Toolkits, t.Version)
		}
	}
	slices.SortFunc(v.Toolkits, func(a, b string) int {
		va, erra := version.Parse(a)
		vb, errb := version.Parse(b)
		if erra != nil || errb != nil {
			return strings.Compare(b, a)
		}
		return vb.Compare(va)
	})
	return v
}
