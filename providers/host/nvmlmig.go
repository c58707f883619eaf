package host

// MIG changes for apply: the mode, and GPU instances each with its
// compute instances, named by their profile and placement, which is what
// identifies an instance across a reboot (NVML's instance ids are given
// out again in creation order).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// MIGInstance is a GPU instance at a placement with its compute
// instances, each given by its number of compute slices.
type MIGInstance struct {
	ProfileID int
	Start     uint32
	Size      uint32
	Compute   []int
}

// computeProfiles are NVML's compute instance profile ids by the number
// of compute slices (nvml.h NVML_COMPUTE_INSTANCE_PROFILE_*).
var computeProfiles = map[int]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// MIGMode reads the current and pending MIG mode ("enabled",
// "disabled").
func (s *DeviceSettings) MIGMode(uuid string) (current, pending string, err error) {
	d, err := s.device(uuid)
	if err != nil {
		return "", "", err
	}
	cur, pend, ret := d.GetMigMode()
	if ret != nvml.SUCCESS {
		return "", "", fmt.Errorf("GPU %s MIG mode: %s", uuid, ReturnName(int(ret)))
	}
	return enabled(cur == nvml.DEVICE_MIG_ENABLE), enabled(pend == nvml.DEVICE_MIG_ENABLE), nil
}

// SetMIGMode asks for a MIG mode. NVML activates it at once by resetting
// the GPU when it can; activated tells whether it did. When the GPU is in
// use, or the platform cannot reset it, the mode stays pending until a
// GPU reset or a reboot: that is not an error.
func (s *DeviceSettings) SetMIGMode(uuid, mode string) (activated bool, err error) {
	d, err := s.device(uuid)
	if err != nil {
		return false, err
	}
	m := nvml.DEVICE_MIG_DISABLE
	switch mode {
	case "enabled":
		m = nvml.DEVICE_MIG_ENABLE
	case "disabled":
	default:
		return false, fmt.Errorf("MIG mode %q: want enabled or disabled", mode)
	}
	ret, activation := d.SetMigMode(m)
	if ret != nvml.SUCCESS {
		return false, fmt.Errorf("setting MIG mode of GPU %s to %s: %s", uuid, mode, ReturnName(int(ret)))
	}
	return activation == nvml.SUCCESS, nil
}

// gpuInstanceAt finds the GPU instance of a profile at a placement.
func gpuInstanceAt(d nvml.Device, profileID int, start uint32) (nvml.GpuInstance, nvml.GpuInstanceInfo, nvml.GpuInstanceProfileInfo, error) {
	info, ret := d.GetGpuInstanceProfileInfo(profileID)
	if ret != nvml.SUCCESS {
		return nil, nvml.GpuInstanceInfo{}, info, fmt.Errorf("GPU instance profile %d: %s", profileID, ReturnName(int(ret)))
	}
	gis, ret := d.GetGpuInstances(&info)
	if ret != nvml.SUCCESS {
		return nil, nvml.GpuInstanceInfo{}, info, fmt.Errorf("GPU instances of profile %d: %s", profileID, ReturnName(int(ret)))
	}
	for _, g := range gis {
		gi, ret := g.GetInfo()
		if ret == nvml.SUCCESS && gi.Placement.Start == start {
			return g, gi, info, nil
		}
	}
	return nil, nvml.GpuInstanceInfo{}, info, nil
}

func computeInstances(g nvml.GpuInstance) ([]nvml.ComputeInstance, []int, error) {
	var cis []nvml.ComputeInstance
	var counts []int
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := g.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			continue
		}
		got, ret := g.GetComputeInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, nil, fmt.Errorf("compute instances of profile %d: %s", id, ReturnName(int(ret)))
		}
		for _, c := range got {
			cis = append(cis, c)
			counts = append(counts, int(info.SliceCount))
		}
	}
	return cis, counts, nil
}

// GPUInstance reads the GPU instance of a profile at a placement: nil
// when there is none.
func (s *DeviceSettings) GPUInstance(uuid string, profileID int, start uint32) (*MIGInstance, error) {
	d, err := s.device(uuid)
	if err != nil {
		return nil, err
	}
	g, gi, _, err := gpuInstanceAt(d, profileID, start)
	if err != nil || g == nil {
		return nil, err
	}
	_, sl, err := computeInstances(g)
	if err != nil {
		return nil, err
	}
	slices.Sort(sl)
	return &MIGInstance{ProfileID: profileID, Start: start, Size: gi.Placement.Size, Compute: sl}, nil
}

// CreateGPUInstance creates a GPU instance at its placement and then its
// compute instances. It completes an instance a crash left half made:
// an instance already at the placement keeps the compute instances it
// has, and gains those it lacks.
func (s *DeviceSettings) CreateGPUInstance(uuid string, in MIGInstance) error {
	d, err := s.device(uuid)
	if err != nil {
		return err
	}
	g, _, info, err := gpuInstanceAt(d, in.ProfileID, in.Start)
	if err != nil {
		return fmt.Errorf("GPU %s: %w", uuid, err)
	}
	if g == nil {
		var ret nvml.Return
		g, ret = d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: in.Start, Size: in.Size})
		if ret != nvml.SUCCESS {
			return fmt.Errorf("creating GPU instance of profile %d at memory slice %d of GPU %s: %s", in.ProfileID, in.Start, uuid, ReturnName(int(ret)))
		}
	}
	_, have, err := computeInstances(g)
	if err != nil {
		return fmt.Errorf("GPU %s: %w", uuid, err)
	}
	for _, n := range in.Compute {
		if i := slices.Index(have, n); i >= 0 {
			have = slices.Delete(have, i, i+1)
			continue
		}
		id, ok := computeProfiles[n]
		if !ok {
			return fmt.Errorf("no compute instance profile of %d slices", n)
		}
		cinfo, ret := g.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("compute instance profile of %d slices on GPU %s: %s", n, uuid, ReturnName(int(ret)))
		}
		if _, ret := g.CreateComputeInstance(&cinfo); ret != nvml.SUCCESS {
			return fmt.Errorf("creating a compute instance of %d slices at memory slice %d of GPU %s: %s", n, in.Start, uuid, ReturnName(int(ret)))
		}
	}
	return nil
}

// InUseError is an instance that processes hold.
type InUseError struct {
	What string
	PIDs []uint32
}

func (e *InUseError) Error() string {
	p := make([]string, len(e.PIDs))
	for i, pid := range e.PIDs {
		p[i] = fmt.Sprint(pid)
	}
	return fmt.Sprintf("%s is in use by pid %s: stop them first", e.What, strings.Join(p, ", "))
}

// DestroyGPUInstance destroys the GPU instance of a profile at a
// placement, its compute instances first. It refuses, changing nothing,
// while processes run on it (*InUseError). An instance already gone is
// not an error.
func (s *DeviceSettings) DestroyGPUInstance(uuid string, profileID int, start uint32) error {
	d, err := s.device(uuid)
	if err != nil {
		return err
	}
	g, gi, _, err := gpuInstanceAt(d, profileID, start)
	if err != nil {
		return fmt.Errorf("GPU %s: %w", uuid, err)
	}
	if g == nil {
		return nil
	}
	procs, ret := d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return fmt.Errorf("processes of GPU %s: %s", uuid, ReturnName(int(ret)))
	}
	var held []uint32
	for _, p := range procs {
		if p.GpuInstanceId == gi.Id {
			held = append(held, p.Pid)
		}
	}
	if len(held) > 0 {
		return &InUseError{What: fmt.Sprintf("the GPU instance of profile %d at memory slice %d of GPU %s", profileID, start, uuid), PIDs: held}
	}
	cis, _, err := computeInstances(g)
	if err != nil {
		return fmt.Errorf("GPU %s: %w", uuid, err)
	}
	for _, c := range cis {
		if ret := c.Destroy(); ret != nvml.SUCCESS {
			return fmt.Errorf("destroying a compute instance at memory slice %d of GPU %s: %s", start, uuid, ReturnName(int(ret)))
		}
	}
	if ret := g.Destroy(); ret != nvml.SUCCESS {
		return fmt.Errorf("destroying the GPU instance at memory slice %d of GPU %s: %s", start, uuid, ReturnName(int(ret)))
	}
	return nil
}
