package compat

import (
	"slices"
	"strings"
	"testing"

	nvmlgpus "github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// TestMIGTableMatchesNVMLMock: the profile ids, instance counts and
// placements of the cited table are the ones go-nvml's mock of each GPU
// reports through NVML's calls, so that plans made from the table are
// the layouts NVML accepts.
func TestMIGTableMatchesNVMLMock(t *testing.T) {
	for _, c := range []struct {
		cfg   nvmlgpus.Config
		model string
		// placements is false for the mocks whose placements are
		// simplified (H100 and H200: a 3g of three memory slices, a 7g
		// of seven), unlike the eight-slice layout of the guide's H100
		// figure; the H200's own are not published (UnsourcedPlacements).
		placements bool
	}{
		{nvmlgpus.A100_SXM4_40GB, "A100 40GB", true},
		{nvmlgpus.A100_SXM4_80GB, "A100 80GB", true},
		{nvmlgpus.A30_PCIE_24GB, "A30 24GB", true},
		{nvmlgpus.H100_SXM5_80GB, "H100 80GB", false},
		{nvmlgpus.H200_SXM5_141GB, "H200 141GB", false},
	} {
		m, ok := MIGModelOf(c.cfg.Name, c.cfg.MemoryMB<<20)
		if !ok || m.Model != c.model {
			t.Errorf("%s: model %q (found %v), want %q", c.cfg.Name, m.Model, ok, c.model)
			continue
		}
		for _, p := range m.Profiles {
			info, ok := c.cfg.MIGProfiles.GpuInstanceProfiles[p.ID]
			if !ok {
				t.Errorf("%s %s: the mock has no profile %d", c.model, p.Name, p.ID)
				continue
			}
			if int(info.SliceCount) != p.Slices || int(info.InstanceCount) != p.Instances {
				t.Errorf("%s %s: slices %d instances %d, the mock says %d and %d", c.model, p.Name, p.Slices, p.Instances, info.SliceCount, info.InstanceCount)
			}
			if !c.placements {
				continue
			}
			var starts []int
			for _, pl := range c.cfg.MIGProfiles.GpuInstancePlacements[p.ID] {
				starts = append(starts, int(pl.Start))
				if int(pl.Size) != p.Size {
					t.Errorf("%s %s: size %d, the mock says %d", c.model, p.Name, p.Size, pl.Size)
				}
			}
			if !slices.Equal(starts, p.Starts) {
				t.Errorf("%s %s: starts %v, the mock says %v", c.model, p.Name, p.Starts, starts)
			}
		}
	}
}

func TestMIGModelOf(t *testing.T) {
	for _, c := range []struct {
		name string
		gib  uint64
		want string
	}{
		{"NVIDIA A100-SXM4-80GB", 80, "A100 80GB"},
		{"NVIDIA A100 80GB PCIe", 80, "A100 80GB"},
		{"NVIDIA A100-PCIE-40GB", 40, "A100 40GB"},
		{"NVIDIA H100 NVL", 94, "H100 94GB (NVL)"},
		{"NVIDIA H100 80GB HBM3", 80, "H100 80GB"},
		{"NVIDIA H200", 141, "H200 141GB"},
		{"NVIDIA A30", 24, "A30 24GB"},
		{"NVIDIA GeForce RTX 4090", 24, ""},
		{"NVIDIA L40S", 45, ""},
	} {
		m, ok := MIGModelOf(c.name, c.gib<<30)
		if got := map[bool]string{true: m.Model}[ok]; got != c.want {
			t.Errorf("%s %dGiB: %q, want %q", c.name, c.gib, got, c.want)
		}
	}
}

func TestMIGPlace(t *testing.T) {
	a100, _ := MIGModelOf("NVIDIA A100-SXM4-40GB", 40<<30)
	for _, c := range []struct {
		keep    []Placed
		want    []string
		placed  []Placed
		errWord string
	}{
		{want: []string{"1g.5gb", "3g.20gb", "2g.10gb", "1g.5gb"}, placed: []Placed{{"1g.5gb", 2}, {"3g.20gb", 4}, {"2g.10gb", 0}, {"1g.5gb", 3}}},
		{want: slices.Repeat([]string{"1g.5gb"}, 7), placed: []Placed{{"1g.5gb", 0}, {"1g.5gb", 1}, {"1g.5gb", 2}, {"1g.5gb", 3}, {"1g.5gb", 4}, {"1g.5gb", 5}, {"1g.5gb", 6}}},
		{want: []string{"4g.20gb", "3g.20gb"}, placed: []Placed{{"4g.20gb", 0}, {"3g.20gb", 4}}},
		// Around a 3g kept at 0, a second 3g goes to 4.
		{keep: []Placed{{"3g.20gb", 0}}, want: []string{"3g.20gb"}, placed: []Placed{{"3g.20gb", 4}}},
		// A kept 1g at 5 leaves no room for a 3g at 4: refused.
		{keep: []Placed{{"1g.5gb", 5}, {"3g.20gb", 0}}, want: []string{"3g.20gb"}, errWord: "no room for 3g.20gb"},
		{want: slices.Repeat([]string{"1g.5gb"}, 8), errWord: "at most 7"},
		{want: []string{"7g.40gb", "1g.5gb"}, errWord: "compute slices"},
		{want: []string{"2g.20gb"}, errWord: `"2g.20gb" is not one of`},
		{want: []string{"4g.20gb", "2g.10gb", "1g.10gb"}, placed: []Placed{{"4g.20gb", 0}, {"2g.10gb", 4}, {"1g.10gb", 6}}},
		{keep: []Placed{{"1g.5gb", 1}}, want: []string{"4g.20gb"}, errWord: "no room for 4g.20gb"},
	} {
		got, err := a100.Place(c.keep, c.want)
		if c.errWord != "" {
			if err == nil || !strings.Contains(err.Error(), c.errWord) {
				t.Errorf("%v around %v: error %v, want one saying %q", c.want, c.keep, err, c.errWord)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.placed) {
			t.Errorf("%v around %v: %v, %v; want %v", c.want, c.keep, got, err, c.placed)
		}
	}
}
