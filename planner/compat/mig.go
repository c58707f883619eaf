package compat

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// MIG profiles of the GPUs that have them. Each model's table below
// cites where its profile names, instance counts and placements come
// from. The NVML profile ids (nvml.h NVML_GPU_INSTANCE_PROFILE_*) are
// nvml.h's; TestMIGTableMatchesNVMLMock holds the ids and counts to
// go-nvml's mocks (pkg/nvml/mock/gpus, v0.13.4-1) and, where the mock's
// placements are the published ones (A30, A100), the placements too.
// NVIDIA's MIG user guide publishes placements only as figures
// ("Supported MIG Profiles", docs.nvidia.com/datacenter/tesla/
// mig-user-guide/supported-mig-profiles.html).

// NVML GPU instance profile ids (nvml.h NVML_GPU_INSTANCE_PROFILE_*).
const (
	MIGProfile1Slice     = 0 // 1g
	MIGProfile2Slice     = 1 // 2g
	MIGProfile3Slice     = 2 // 3g
	MIGProfile4Slice     = 3 // 4g
	MIGProfile7Slice     = 4 // 7g
	MIGProfile1SliceRev1 = 7 // 1g+me: with the media engines
	MIGProfile2SliceRev1 = 8 // 2g+me
	MIGProfile1SliceRev2 = 9 // 1g with twice the memory (1g.10gb on a 40GB A100)
)

// MIGProfile is one GPU instance profile of a GPU model.
type MIGProfile struct {
	// Name is the profile as nvidia-smi and the guide write it: "1g.10gb".
	Name string
	// ID is NVML's GPU instance profile id.
	ID int
	// Slices is the number of compute slices ("1g" is 1).
	Slices int
	// Instances is how many the GPU holds at most.
	Instances int
	// Size is the number of memory slices an instance takes, Starts the
	// memory slices it may start at: its possible placements.
	Size   int
	Starts []int
}

// MIGModel is a GPU model with MIG and its profiles.
type MIGModel struct {
	// Model names it for people: "A100 80GB".
	Model string
	// Family is the word of NVML's device name that tells the model
	// together with the memory ("A100" in "NVIDIA A100-SXM4-80GB").
	Family string
	// MinMemoryGiB and MaxMemoryGiB bound the memory NVML reports.
	MinMemoryGiB, MaxMemoryGiB uint64
	// MemorySlices is the number of memory slices placements count in.
	MemorySlices int
	Profiles     []MIGProfile
	// UnsourcedPlacements, where no NVIDIA source gives the model's
	// placements, names the model whose placements the table assumes in
	// their place; "" where they are sourced.
	UnsourcedPlacements string
}

func starts(from, step, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i*step
	}
	return out
}

// ga100Layout are the profiles of a GPU of seven compute slices over
// eight memory slices, with their placements: mem names each profile's
// memory, smallest first (1g, 1g with two memory slices, 2g, 3g, 4g, 7g).
// The A100's placements are those of the guide's "Profiles on A100"
// figure (section "A100 MIG Profiles"), which go-nvml's A100 mocks
// report; the H100 80GB's are those of the guide's H100 figure (section
// "H100 MIG Profiles"), as NVIDIA's own transcription of it gives them
// (NVIDIA/k8s-test-infra, deployments/nvml-mock/helm/nvml-mock/profiles/
// mig/h100.yaml, commit d0b95acf9702ff245e939e5613c76618ac369e62: "NVIDIA
// publishes the slice placements below only as diagrams, so they are
// transcribed from the layout those diagrams show"). They are the same:
// a 1g at any of memory slices 0-6, a 1g of two memory slices or a 2g at
// an even slice, a 3g (four memory slices) at 0 or 4, a 4g at 0, a 7g
// over all eight.
func ga100Layout(mem [6]string) []MIGProfile {
	return []MIGProfile{
		{Name: "1g." + mem[0], ID: MIGProfile1Slice, Slices: 1, Instances: 7, Size: 1, Starts: starts(0, 1, 7)},
		{Name: "1g." + mem[0] + "+me", ID: MIGProfile1SliceRev1, Slices: 1, Instances: 1, Size: 1, Starts: starts(0, 1, 7)},
		{Name: "1g." + mem[1], ID: MIGProfile1SliceRev2, Slices: 1, Instances: 4, Size: 2, Starts: starts(0, 2, 4)},
		{Name: "2g." + mem[2], ID: MIGProfile2Slice, Slices: 2, Instances: 3, Size: 2, Starts: starts(0, 2, 3)},
		{Name: "3g." + mem[3], ID: MIGProfile3Slice, Slices: 3, Instances: 2, Size: 4, Starts: starts(0, 4, 2)},
		{Name: "4g." + mem[4], ID: MIGProfile4Slice, Slices: 4, Instances: 1, Size: 4, Starts: []int{0}},
		{Name: "7g." + mem[5], ID: MIGProfile7Slice, Slices: 7, Instances: 1, Size: 8, Starts: []int{0}},
	}
}

var migModels = []MIGModel{
	// The guide's "A30 MIG Profiles" table (A30-24GB): 1g.6gb ×4,
	// 1g.6gb+me ×1, 2g.12gb ×2, 2g.12gb+me ×1, 4g.24gb ×1; placements of
	// its "Profiles on A30" figure, as go-nvml's A30 mock reports them.
	{Model: "A30 24GB", Family: "A30", MinMemoryGiB: 20, MaxMemoryGiB: 28, MemorySlices: 4, Profiles: []MIGProfile{
		{Name: "1g.6gb", ID: MIGProfile1Slice, Slices: 1, Instances: 4, Size: 1, Starts: starts(0, 1, 4)},
		{Name: "1g.6gb+me", ID: MIGProfile1SliceRev1, Slices: 1, Instances: 1, Size: 1, Starts: starts(0, 1, 4)},
		{Name: "2g.12gb", ID: MIGProfile2Slice, Slices: 2, Instances: 2, Size: 2, Starts: starts(0, 2, 2)},
		{Name: "2g.12gb+me", ID: MIGProfile2SliceRev1, Slices: 2, Instances: 1, Size: 2, Starts: starts(0, 2, 2)},
		{Name: "4g.24gb", ID: MIGProfile4Slice, Slices: 4, Instances: 1, Size: 4, Starts: []int{0}},
	}},
	// The guide's "A100 MIG Profiles" table (A100-SXM4-40GB): 1g.5gb ×7,
	// 1g.5gb+me ×1, 1g.10gb ×4, 2g.10gb ×3, 3g.20gb ×2, 4g.20gb ×1,
	// 7g.40gb ×1.
	{Model: "A100 40GB", Family: "A100", MinMemoryGiB: 36, MaxMemoryGiB: 44, MemorySlices: 8,
		Profiles: ga100Layout([6]string{"5gb", "10gb", "10gb", "20gb", "20gb", "40gb"})},
	// The same table's note: on the A100-SXM4-80GB the names follow the
	// memory, 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb,
	// 7g.80gb, with the 40GB product's counts.
	{Model: "A100 80GB", Family: "A100", MinMemoryGiB: 76, MaxMemoryGiB: 84, MemorySlices: 8,
		Profiles: ga100Layout([6]string{"10gb", "20gb", "20gb", "40gb", "40gb", "80gb"})},
	// The guide's "H100 MIG Profiles" table (H100 80GB, PCIe and SXM5),
	// as NVIDIA's transcription of it (see ga100Layout) and the GPU
	// Operator's default configuration for H100-80GB (NVIDIA/gpu-operator
	// assets/state-mig-manager/0400_configmap.yaml, commit
	// 0b0b6b154bdd7ed54102f3efe0239108b0c4a433) give
	// it: 1g.10gb ×7, 1g.10gb+me ×1, 1g.20gb ×4, 2g.20gb ×3, 3g.40gb ×2,
	// 4g.40gb ×1, 7g.80gb ×1; placements of the guide's H100 figure (see
	// ga100Layout).
	{Model: "H100 80GB", Family: "H100", MinMemoryGiB: 76, MaxMemoryGiB: 84, MemorySlices: 8,
		Profiles: ga100Layout([6]string{"10gb", "20gb", "20gb", "40gb", "40gb", "80gb"})},
	// H100 NVL and SXM5 94GB. Names and counts: nvidia-smi mig -lgip of
	// an H100 NVL (NVIDIA/gpu-operator#900 and NVIDIA/mig-parted#101:
	// 1g.12gb ×7, 1g.12gb+me ×1, 1g.24gb ×4, 2g.24gb ×3, 3g.47gb, with the
	// GPU Operator's default MIG configuration, assets/state-mig-manager/
	// 0400_configmap.yaml, for 3g.47gb ×2, 4g.47gb ×1, 7g.94gb ×1).
	// Placements: NOT SOURCED. Neither the guide nor any NVIDIA source
	// gpuenv found gives this model's; gpuenv assumes the H100 80GB's, the
	// same GH100 die with seven compute slices, and the plan says so
	// (UnsourcedPlacements).
	{Model: "H100 94GB (NVL)", Family: "H100", MinMemoryGiB: 90, MaxMemoryGiB: 98, MemorySlices: 8,
		Profiles:            ga100Layout([6]string{"12gb", "24gb", "24gb", "47gb", "47gb", "94gb"}),
		UnsourcedPlacements: "H100 80GB"},
	// H200 141GB (SXM5, and the H200 NVL), which the guide lists under
	// "Supported GPUs" and gives a section of "Supported MIG Profiles".
	// Names and counts: the GPU Operator's default MIG configuration for
	// H200-141GB (assets/state-mig-manager/0400_configmap.yaml,
	// NVIDIA/gpu-operator commit 0b0b6b154bdd7ed54102f3efe0239108b0c4a433):
	// 1g.18gb ×7, 1g.18gb+me ×1, 1g.35gb ×4, 2g.35gb ×3, 3g.71gb ×2,
	// 4g.71gb ×1, 7g.141gb ×1.
	// Placements: NOT SOURCED, as for the H100 94GB; gpuenv assumes the
	// H100 80GB's.
	{Model: "H200 141GB", Family: "H200", MinMemoryGiB: 135, MaxMemoryGiB: 145, MemorySlices: 8,
		Profiles:            ga100Layout([6]string{"18gb", "35gb", "35gb", "71gb", "71gb", "141gb"}),
		UnsourcedPlacements: "H100 80GB"},
}

// MIGModels returns the table, for tests and documentation.
func MIGModels() []MIGModel { return slices.Clone(migModels) }

// MIGModelOf finds the model of a GPU from NVML's name for it and its
// total memory in bytes.
func MIGModelOf(name string, memoryBytes uint64) (MIGModel, bool) {
	gib := memoryBytes >> 30
	words := strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '-' })
	for _, m := range migModels {
		if slices.Contains(words, m.Family) && gib >= m.MinMemoryGiB && gib <= m.MaxMemoryGiB {
			return m, true
		}
	}
	return MIGModel{}, false
}

// Profile returns the profile named name.
func (m MIGModel) Profile(name string) (MIGProfile, bool) {
	for _, p := range m.Profiles {
		if p.Name == name {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// ProfileByID returns the profile with NVML's id.
func (m MIGModel) ProfileByID(id int) (MIGProfile, bool) {
	for _, p := range m.Profiles {
		if p.ID == id {
			return p, true
		}
	}
	return MIGProfile{}, false
}

// Names lists the model's profile names.
func (m MIGModel) Names() []string {
	out := make([]string, len(m.Profiles))
	for i, p := range m.Profiles {
		out[i] = p.Name
	}
	return out
}

// computeSizes are the compute instance sizes, in compute slices, a GPU
// instance of each size offers: NVML's compute instance profiles as
// nvidia-smi mig -lcip lists them, and as go-nvml's A100 mock
// (pkg/nvml/mock/gpus, a100_ComputeInstanceProfiles) carries them.
var computeSizes = map[int][]int{1: {1}, 2: {1, 2}, 3: {1, 2, 3}, 4: {1, 2, 4}, 7: {1, 2, 3, 4, 7}}

// ComputeSizes lists the sizes of compute instance the profile offers.
func (p MIGProfile) ComputeSizes() []int { return slices.Clone(computeSizes[p.Slices]) }

// ComputeProfileName names a compute instance of slices compute slices
// in a GPU instance of profile gi as nvidia-smi does: "1c.3g.40gb", or
// the GPU instance's own name when it has all of its slices.
func ComputeProfileName(gi MIGProfile, slices int) string {
	if slices == gi.Slices {
		return gi.Name
	}
	return fmt.Sprintf("%dc.%s", slices, gi.Name)
}

// Placed is a GPU instance at a placement: a profile and the memory slice
// it starts at.
type Placed struct {
	Profile string
	Start   int
}

// Place finds a placement for each of the profiles named in want, around
// the instances in keep (which stay where they are). It returns the
// placements of want, in want's order; an error names the first profile
// that cannot be placed, or one over its instance limit. The search
// tries larger profiles first, and each profile's starts in NVML's
// order, so the same layout always gets the same placements.
func (m MIGModel) Place(keep []Placed, want []string) ([]Placed, error) {
	var used uint32
	count := map[int]int{}
	for _, k := range keep {
		p, ok := m.Profile(k.Profile)
		if !ok {
			return nil, fmt.Errorf("profile %q is not one of the %s's", k.Profile, m.Model)
		}
		used |= mask(k.Start, p.Size)
		count[p.ID]++
	}
	profiles := make([]MIGProfile, len(want))
	for i, name := range want {
		p, ok := m.Profile(name)
		if !ok {
			return nil, fmt.Errorf("profile %q is not one of the %s's (%s)", name, m.Model, strings.Join(m.Names(), ", "))
		}
		profiles[i] = p
		count[p.ID]++
		if count[p.ID] > p.Instances {
			return nil, fmt.Errorf("the %s holds at most %d instance(s) of profile %s", m.Model, p.Instances, name)
		}
	}
	order := make([]int, len(want))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := profiles[b].Size - profiles[a].Size; d != 0 {
			return d
		}
		return profiles[b].Slices - profiles[a].Slices
	})
	maxSlices := 7
	if m.MemorySlices == 4 {
		maxSlices = 4
	}
	total := 0
	for _, k := range keep {
		p, _ := m.Profile(k.Profile)
		total += p.Slices
	}
	for _, p := range profiles {
		total += p.Slices
		if total > maxSlices {
			return nil, fmt.Errorf("%s does not fit: with it the layout takes %d compute slices and the %s has %d", p.Name, total, m.Model, maxSlices)
		}
	}
	out := make([]Placed, len(want))
	deepest := 0
	var try func(k int, used uint32) bool
	try = func(k int, used uint32) bool {
		deepest = max(deepest, k)
		if k == len(order) {
			return true
		}
		i := order[k]
		p := profiles[i]
		for _, s := range p.Starts {
			b := mask(s, p.Size)
			if used&b != 0 {
				continue
			}
			out[i] = Placed{Profile: p.Name, Start: s}
			if try(k+1, used|b) {
				return true
			}
		}
		return false
	}
	if !try(0, used) {
		free := m.MemorySlices - bits.OnesCount32(used)
		return nil, fmt.Errorf("the %s has no room for %s in the layout %s: no placement of its memory slices fits every instance (%d of %d memory slices free around the instances kept)", m.Model, profiles[order[deepest]].Name, strings.Join(want, ", "), free, m.MemorySlices)
	}
	return out, nil
}

func mask(start, size int) uint32 { return ((1 << size) - 1) << start }
