package hosttest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MIG is the part of a mock GPU's MIG behaviour that go-nvml's server
// mock leaves out and gpuenv depends on, made to behave as NVML's
// documentation says the real library does: a mode set while the GPU is
// busy stays pending until a reset (nvmlDeviceSetMigMode's activation
// status ERROR_IN_USE); instances are created only in MIG mode and only
// where their placement is free (ERROR_INSUFFICIENT_RESOURCES); a GPU
// instance that still has compute instances is not destroyed
// (ERROR_IN_USE); the MIG devices enumerate with fixed UUIDs.
type MIG struct {
	dev *server.Device
	mu  sync.Mutex
	// Pending is the mode the GPU takes at its next Reset.
	Pending int
	// Busy makes a mode change stay pending, as on a GPU a process
	// uses.
	Busy bool
	// Fail, when set, answers the next operation named by its key
	// ("create_gpu_instance", "create_compute_instance",
	// "destroy_gpu_instance", "destroy_compute_instance", "set_mig_mode")
	// with its code instead of carrying it out, once.
	Fail map[string]nvml.Return
}

// MIGUUID is the fixed UUID the mock gives the MIG device of compute
// instance ci of GPU instance gi on GPU index.
func MIGUUID(index int, gi, ci uint32) string {
	return fmt.Sprintf("MIG-%08d-0000-0000-%04d-%012d", index, gi, ci)
}

var migs sync.Map // *server.Device → *MIG

// MIGOf returns the MIG control of a device made complete by Complete.
func MIGOf(dev *server.Device) *MIG {
	m, _ := migs.Load(dev)
	return m.(*MIG)
}

func (m *MIG) fail(op string) nvml.Return {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.Fail[op]; ok {
		delete(m.Fail, op)
		return r
	}
	return nvml.SUCCESS
}

// Reset is a GPU reset: the pending mode becomes the current one, and
// leaving MIG mode destroys every instance.
func (m *MIG) Reset() {
	m.dev.Lock()
	defer m.dev.Unlock()
	m.dev.MigMode = m.Pending
	if m.Pending != nvml.DEVICE_MIG_ENABLE {
		clear(m.dev.GpuInstances)
	}
}

// Reboot is what a reboot does to the GPU: a reset, and every instance
// gone (MIG layouts do not survive a reboot).
func (m *MIG) Reboot() {
	m.Reset()
	m.dev.Lock()
	clear(m.dev.GpuInstances)
	m.dev.Unlock()
}

// completeMIG installs the MIG behaviour on dev.
func completeMIG(dev *server.Device) {
	m := &MIG{dev: dev, Pending: dev.MigMode}
	migs.Store(dev, m)
	dev.GetMigModeFunc = func() (int, int, nvml.Return) {
		dev.RLock()
		defer dev.RUnlock()
		return dev.MigMode, m.Pending, nvml.SUCCESS
	}
	dev.SetMigModeFunc = func(mode int) (nvml.Return, nvml.Return) {
		if r := m.fail("set_mig_mode"); r != nvml.SUCCESS {
			return r, r
		}
		m.Pending = mode
		if m.Busy {
			return nvml.SUCCESS, nvml.ERROR_IN_USE
		}
		m.Reset()
		return nvml.SUCCESS, nvml.SUCCESS
	}
	create := dev.CreateGpuInstanceWithPlacementFunc
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		if r := m.fail("create_gpu_instance"); r != nvml.SUCCESS {
			return nil, r
		}
		dev.RLock()
		mode := dev.MigMode
		var used uint32
		for gi := range dev.GpuInstances {
			used |= ((1 << gi.Info.Placement.Size) - 1) << gi.Info.Placement.Start
		}
		dev.RUnlock()
		if mode != nvml.DEVICE_MIG_ENABLE {
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		ok := false
		for _, q := range dev.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
			ok = ok || q == *p
		}
		if !ok {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if used&(((1<<p.Size)-1)<<p.Start) != 0 {
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		g, ret := create(info, p)
		if ret == nvml.SUCCESS {
			completeGI(m, g.(*server.GpuInstance))
		}
		return g, ret
	}
	dev.CreateGpuInstanceFunc = nil // gpuenv places every instance itself
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		type pair struct{ gi, ci uint32 }
		var all []pair
		dev.RLock()
		for gi := range dev.GpuInstances {
			gi.RLock()
			for ci := range gi.ComputeInstances {
				all = append(all, pair{gi.Info.Id, ci.Info.Id})
			}
			gi.RUnlock()
		}
		dev.RUnlock()
		slices.SortFunc(all, func(a, b pair) int {
			if a.gi != b.gi {
				return int(a.gi) - int(b.gi)
			}
			return int(a.ci) - int(b.ci)
		})
		if i < 0 || i >= len(all) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		p := all[i]
		return &mock.Device{
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return int(p.gi), nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return int(p.ci), nvml.SUCCESS },
			GetUUIDFunc:              func() (string, nvml.Return) { return MIGUUID(dev.Index, p.gi, p.ci), nvml.SUCCESS },
		}, nvml.SUCCESS
	}
}

func completeGI(m *MIG, gi *server.GpuInstance) {
	destroy := gi.DestroyFunc
	gi.DestroyFunc = func() nvml.Return {
		if r := m.fail("destroy_gpu_instance"); r != nvml.SUCCESS {
			return r
		}
		gi.RLock()
		n := len(gi.ComputeInstances)
		gi.RUnlock()
		if n > 0 {
			return nvml.ERROR_IN_USE
		}
		return destroy()
	}
	createCI := gi.CreateComputeInstanceFunc
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		if r := m.fail("create_compute_instance"); r != nvml.SUCCESS {
			return nil, r
		}
		c, ret := createCI(info)
		if ret == nvml.SUCCESS {
			ci := c.(*server.ComputeInstance)
			destroyCI := ci.DestroyFunc
			ci.DestroyFunc = func() nvml.Return {
				if r := m.fail("destroy_compute_instance"); r != nvml.SUCCESS {
					return r
				}
				return destroyCI()
			}
		}
		return c, ret
	}
}

// MIGGPUState is a mock GPU's MIG mode and instances, as a test keeps
// them across processes: the GPU outlives a process killed mid-apply.
type MIGGPUState struct {
	Mode      int                `json:"mode"`
	Pending   int                `json:"pending"`
	Instances []MIGInstanceState `json:"instances,omitempty"`
}

// MIGInstanceState is a GPU instance by profile and placement, with its
// compute instances' slices.
type MIGInstanceState struct {
	ProfileID int    `json:"profile_id"`
	Start     uint32 `json:"start"`
	Size      uint32 `json:"size"`
	Compute   []int  `json:"compute"`
}

// MIGSnapshot reads every GPU's MIG state, instances in placement order.
func MIGSnapshot(s *server.Server) []MIGGPUState {
	out := make([]MIGGPUState, len(s.Devices))
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		m := MIGOf(dev)
		dev.RLock()
		st := MIGGPUState{Mode: dev.MigMode, Pending: m.Pending}
		for gi := range dev.GpuInstances {
			in := MIGInstanceState{ProfileID: int(gi.Info.ProfileId), Start: gi.Info.Placement.Start, Size: gi.Info.Placement.Size}
			gi.RLock()
			for ci := range gi.ComputeInstances {
				p := gi.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)]
				in.Compute = append(in.Compute, int(p.SliceCount))
			}
			gi.RUnlock()
			slices.Sort(in.Compute)
			st.Instances = append(st.Instances, in)
		}
		dev.RUnlock()
		slices.SortFunc(st.Instances, func(a, b MIGInstanceState) int { return int(a.Start) - int(b.Start) })
		out[i] = st
	}
	return out
}

// LoadMIGState gives the GPUs of s the states st, as a fresh process
// finds the GPUs another left.
func LoadMIGState(s *server.Server, st []MIGGPUState) error {
	for i, g := range st {
		dev := s.Devices[i].(*server.Device)
		m := MIGOf(dev)
		dev.Lock()
		dev.MigMode = g.Mode
		clear(dev.GpuInstances)
		dev.Unlock()
		m.Pending = g.Pending
		for _, in := range g.Instances {
			info := dev.Config.MIGProfiles.GpuInstanceProfiles[in.ProfileID]
			gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: in.Start, Size: in.Size})
			if ret != nvml.SUCCESS {
				return fmt.Errorf("GPU %d: instance %+v: %v", i, in, ret)
			}
			for _, n := range in.Compute {
				found := false
				for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
					p, ok := dev.Config.MIGProfiles.ComputeInstanceProfiles[in.ProfileID][id]
					if !ok || int(p.SliceCount) != n {
						continue
					}
					cinfo, _ := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
					if _, ret := gi.CreateComputeInstance(&cinfo); ret != nvml.SUCCESS {
						return fmt.Errorf("GPU %d: compute instance of %d slices: %v", i, n, ret)
					}
					found = true
					break
				}
				if !found {
					return fmt.Errorf("GPU %d: no compute profile of %d slices", i, n)
				}
			}
		}
	}
	return nil
}
