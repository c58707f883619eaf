package spec

import (
	"slices"
	"testing"
)

// Team blocks load in the order written, each with its group, its
// devices as written and where each entry is, and absent teams without
// devices; the host-wide block keeps its own list.
func TestTeamsLoad(t *testing.T) {
	s := mustLoad(t, `
environment {
  cuda_visible_devices = ["0"]
}

team "vision" {
  cuda_visible_devices = ["4", "5"]
}

team "ml-infer" {
  cuda_visible_devices = ["MIG-`+uuidA+`", "GPU-`+uuidA+`"]
}

team "old" {
  absent = true
}
`)
	if len(s.Teams) != 3 {
		t.Fatalf("%d teams, want 3", len(s.Teams))
	}
	v, m, old := s.Team("vision"), s.Team("ml-infer"), s.Team("old")
	if v == nil || m == nil || old == nil || s.Team("nlp") != nil {
		t.Fatalf("Team lookups: %v %v %v %v", v, m, old, s.Team("nlp"))
	}
	if !slices.Equal(v.CUDAVisibleDevices.Value, []string{"4", "5"}) || v.CUDAVisibleDevices.Range.Start.Line != 7 {
		t.Errorf("vision: %+v", v.CUDAVisibleDevices)
	}
	if len(v.DeviceRanges) != 2 || v.DeviceRanges[1].Start.Column != 32 {
		t.Errorf("vision's entries are at %v", v.DeviceRanges)
	}
	if m.CUDAVisibleDevices.Value[0] != "MIG-"+uuidA || m.GroupRange.Start.Column != 6 {
		t.Errorf("ml-infer: %+v at %v", m.CUDAVisibleDevices, m.GroupRange)
	}
	if !old.IsAbsent() || old.CUDAVisibleDevices.Set {
		t.Errorf("old: %+v", old)
	}
	if !slices.Equal(s.Environment.CUDAVisibleDevices.Value, []string{"0"}) {
		t.Errorf("host-wide: %v", s.Environment.CUDAVisibleDevices.Value)
	}
}
