package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML is the part of the NVIDIA Management Library that gpuenv uses.
//
// Init comes first. When it fails, no other method may be called until an
// Init succeeds: with the real library a call after a failed Init can kill
// the process ("symbol lookup error"), so the implementation returned by
// NewNVML refuses such calls itself and answers with Init's error. After a
// successful Init, the caller calls Shutdown once it is done.
//
// Values a device does not support (NVML's NOT_SUPPORTED) are left at their
// zero value, not reported as errors: a GeForce card has no MIG mode, and
// that is a fact, not a failure.
type NVML interface {
	// Init loads and starts the library. A failure is an *NVMLError whose
	// Class says why.
	Init() error
	// Shutdown releases what Init acquired.
	Shutdown() error
	// System reports the driver-wide versions.
	System() (NVMLSystem, error)
	// Devices reports every device NVML enumerates, in index order.
	Devices() ([]NVMLDevice, error)
}

// NVMLClass is why NVML could not start, in the words the observation
// document uses.
type NVMLClass string

// The classes of Init failure gpuenv tells apart, because each asks the
// user for something different.
const (
	NVMLLibraryNotFound       NVMLClass = "library_not_found"
	NVMLDriverNotLoaded       NVMLClass = "driver_not_loaded"
	NVMLDriverLibraryMismatch NVMLClass = "driver_library_mismatch"
	NVMLNoPermission          NVMLClass = "no_permission"
	NVMLOther                 NVMLClass = "other"
)

// NVMLError is a failed NVML call.
type NVMLError struct {
	Op    string    // the call, "init" or "device 3 name"
	Code  int       // NVML's return code
	Class NVMLClass // set for Init failures
}

func (e *NVMLError) Error() string {
	if e.Op == "init" {
		switch e.Class {
		case NVMLLibraryNotFound:
			return "NVML library libnvidia-ml.so.1 not found: the NVIDIA driver's user-space libraries are not installed"
		case NVMLDriverNotLoaded:
			return "NVML reports the NVIDIA kernel driver is not loaded: the nvidia module is not running"
		case NVMLDriverLibraryMismatch:
			return "NVML reports a driver/library version mismatch: the loaded nvidia module and the installed libnvidia-ml differ (an upgrade without reboot); reboot or reload the module"
		case NVMLNoPermission:
			return "NVML has no permission to open the NVIDIA devices (/dev/nvidia*)"
		}
		return fmt.Sprintf("NVML could not start: %s", ReturnName(e.Code))
	}
	return fmt.Sprintf("NVML %s: %s", e.Op, ReturnName(e.Code))
}

// ErrNVMLNotStarted is returned by calls made before Init succeeded.
var ErrNVMLNotStarted = errors.New("NVML is not initialised")

// ClassifyInit maps an Init return code to its class.
func ClassifyInit(code int) NVMLClass {
	switch nvml.Return(code) {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return NVMLLibraryNotFound
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return NVMLDriverNotLoaded
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return NVMLDriverLibraryMismatch
	case nvml.ERROR_NO_PERMISSION:
		return NVMLNoPermission
	}
	return NVMLOther
}

// returnNames are NVML's return codes as nvml.h names them. gpuenv names
// codes itself because Return.Error asks the loaded library, which must not
// be touched after a failed Init.
var returnNames = map[nvml.Return]string{
	nvml.SUCCESS:                         "SUCCESS",
	nvml.ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED",
	nvml.ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION",
	nvml.ERROR_ALREADY_INITIALIZED:       "ERROR_ALREADY_INITIALIZED",
	nvml.ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	nvml.ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_INSUFFICIENT_POWER:        "ERROR_INSUFFICIENT_POWER",
	nvml.ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_TIMEOUT:                   "ERROR_TIMEOUT",
	nvml.ERROR_IRQ_ISSUE:                 "ERROR_IRQ_ISSUE",
	nvml.ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_CORRUPTED_INFOROM:         "ERROR_CORRUPTED_INFOROM",
	nvml.ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	nvml.ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	nvml.ERROR_OPERATING_SYSTEM:          "ERROR_OPERATING_SYSTEM",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH:   "ERROR_LIB_RM_VERSION_MISMATCH",
	nvml.ERROR_IN_USE:                    "ERROR_IN_USE",
	nvml.ERROR_MEMORY:                    "ERROR_MEMORY",
	nvml.ERROR_NO_DATA:                   "ERROR_NO_DATA",
	nvml.ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	nvml.ERROR_DEPRECATED:                "ERROR_DEPRECATED",
	nvml.ERROR_NOT_READY:                 "ERROR_NOT_READY",
	nvml.ERROR_GPU_NOT_FOUND:             "ERROR_GPU_NOT_FOUND",
	nvml.ERROR_INVALID_STATE:             "ERROR_INVALID_STATE",
	nvml.ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
}

// ReturnName is an NVML return code's name from nvml.h, or its number.
func ReturnName(code int) string {
	if n, ok := returnNames[nvml.Return(code)]; ok {
		return n
	}
	return fmt.Sprintf("NVML return code %d", code)
}

// NVMLSystem is what NVML says about the driver as a whole.
type NVMLSystem struct {
	DriverVersion string // "550.54.15"
	// CUDADriverVersion is the CUDA driver API version as NVML encodes it
	// (12040 for 12.4): the newest CUDA the driver runs, not a toolkit.
	CUDADriverVersion int
	NVMLVersion       string // "12.550.54.15"
	// Errors are queries that failed for a reason other than "not
	// supported", as "what: code".
	Errors []string
}

// NVMLDevice is one device as NVML reports it. Modes are words ("enabled",
// "disabled", "default", "exclusive_process", "prohibited") or "" when the
// device does not support the query.
type NVMLDevice struct {
	Index             int
	Name              string
	UUID              string
	PCIBusID          string // "0000:17:00.0", as sysfs spells it
	MemoryTotal       uint64
	MemoryUsed        uint64
	ComputeCapability string // "9.0"
	PersistenceMode   string
	ComputeMode       string
	MIGMode           string
	// MIGPending is the MIG mode NVML moves to at the next activation
	// (a GPU reset): MIGMode's word, "" when MIG is not supported.
	MIGPending   string
	MIGDevices   int
	GPUInstances []NVMLGPUInstance
	Processes    []NVMLProcess
	Errors       []string
}

// NVMLGPUInstance is a MIG GPU instance: NVML's ids and where its memory
// slices lie.
type NVMLGPUInstance struct {
	ID        uint32
	ProfileID int
	Start     uint32
	Size      uint32
	Compute   []NVMLComputeInstance
}

// NVMLComputeInstance is a compute instance of a GPU instance, with the
// UUID of the MIG device it is ("MIG-…") and the processes on it.
type NVMLComputeInstance struct {
	ID        uint32
	ProfileID int
	Slices    int
	UUID      string
	// Index is the MIG device's slot in nvmlDeviceGetMigDeviceHandleByIndex,
	// -1 when NVML did not list it there.
	Index     int
	Processes []NVMLProcess
}

// NVMLProcess is a compute process on a device.
type NVMLProcess struct {
	PID        uint32
	UsedMemory uint64
	Name       string
}

// NewNVML puts gpuenv's NVML interface in front of lib: the real library
// (nvml.New()) or go-nvml's mock.
func NewNVML(lib nvml.Interface) NVML {
	return &nvmlLib{lib: lib}
}

type nvmlState int

const (
	nvmlNew nvmlState = iota
	nvmlStarted
	nvmlFailed
	nvmlStopped
)

// nvmlLib adapts nvml.Interface and guards it: once Init has failed it
// never calls the library again.
type nvmlLib struct {
	lib     nvml.Interface
	state   nvmlState
	initErr error
}

var _ NVML = (*nvmlLib)(nil)

func (n *nvmlLib) Init() error {
	if n.state == nvmlStarted {
		return nil
	}
	// Init itself may be tried again after a failure (apply observes
	// again once it has loaded the driver): it only loads the library and
	// asks it to start, which is what a failed Init may be followed by.
	if ret := n.lib.Init(); ret != nvml.SUCCESS {
		n.state = nvmlFailed
		n.initErr = &NVMLError{Op: "init", Code: int(ret), Class: ClassifyInit(int(ret))}
		return n.initErr
	}
	n.state = nvmlStarted
	return nil
}

func (n *nvmlLib) Shutdown() error {
	if n.state != nvmlStarted {
		// Nothing to release; after a failed Init the library must not
		// be called at all.
		return nil
	}
	n.state = nvmlStopped
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return &NVMLError{Op: "shutdown", Code: int(ret)}
	}
	return nil
}

func (n *nvmlLib) ready() error {
	switch n.state {
	case nvmlStarted:
		return nil
	case nvmlFailed:
		return n.initErr
	}
	return ErrNVMLNotStarted
}

// query records a failed query in errs unless the device merely does not
// support it, and says whether the value may be used.
func query(errs *[]string, what string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED:
		return false
	}
	*errs = append(*errs, what+": "+ReturnName(int(ret)))
	return false
}

func (n *nvmlLib) System() (NVMLSystem, error) {
	var s NVMLSystem
	if err := n.ready(); err != nil {
		return s, err
	}
	if v, ret := n.lib.SystemGetDriverVersion(); query(&s.Errors, "driver version", ret) {
		s.DriverVersion = v
	}
	if v, ret := n.lib.SystemGetCudaDriverVersion(); query(&s.Errors, "CUDA driver version", ret) {
		s.CUDADriverVersion = v
	}
	if v, ret := n.lib.SystemGetNVMLVersion(); query(&s.Errors, "NVML version", ret) {
		s.NVMLVersion = v
	}
	return s, nil
}

func (n *nvmlLib) Devices() ([]NVMLDevice, error) {
	if err := n.ready(); err != nil {
		return nil, err
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, &NVMLError{Op: "device count", Code: int(ret)}
	}
	devs := make([]NVMLDevice, 0, count)
	for i := 0; i < count; i++ {
		d := NVMLDevice{Index: i}
		h, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			// A lost or inaccessible GPU still counts: say so on its
			// index rather than drop it.
			d.Errors = append(d.Errors, "handle: "+ReturnName(int(ret)))
			devs = append(devs, d)
			continue
		}
		n.device(h, &d)
		devs = append(devs, d)
	}
	return devs, nil
}

func (n *nvmlLib) device(h nvml.Device, d *NVMLDevice) {
	e := &d.Errors
	if v, ret := h.GetName(); query(e, "name", ret) {
		d.Name = v
	}
	if v, ret := h.GetUUID(); query(e, "UUID", ret) {
		d.UUID = v
	}
	if v, ret := h.GetPciInfo(); query(e, "PCI info", ret) {
		d.PCIBusID = busID(v)
	}
	if v, ret := h.GetMemoryInfo(); query(e, "memory", ret) {
		d.MemoryTotal, d.MemoryUsed = v.Total, v.Used
	}
	if major, minor, ret := h.GetCudaComputeCapability(); query(e, "compute capability", ret) {
		d.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if v, ret := h.GetPersistenceMode(); query(e, "persistence mode", ret) {
		d.PersistenceMode = enabled(v == nvml.FEATURE_ENABLED)
	}
	if v, ret := h.GetComputeMode(); query(e, "compute mode", ret) {
		d.ComputeMode = computeMode(v)
	}
	var procs []nvml.ProcessInfo
	if v, ret := h.GetComputeRunningProcesses(); query(e, "compute processes", ret) {
		procs = v
		for _, p := range procs {
			d.Processes = append(d.Processes, n.process(p))
		}
	}
	if cur, pending, ret := h.GetMigMode(); query(e, "MIG mode", ret) {
		d.MIGMode = enabled(cur == nvml.DEVICE_MIG_ENABLE)
		d.MIGPending = enabled(pending == nvml.DEVICE_MIG_ENABLE)
		if cur == nvml.DEVICE_MIG_ENABLE {
			d.GPUInstances, d.MIGDevices = n.gpuInstances(h, e, procs)
		}
	}
}

func (n *nvmlLib) process(p nvml.ProcessInfo) NVMLProcess {
	np := NVMLProcess{PID: p.Pid, UsedMemory: p.UsedGpuMemory}
	if name, ret := n.lib.SystemGetProcessName(int(p.Pid)); ret == nvml.SUCCESS {
		np.Name = name
	}
	return np
}

// gpuInstances reads the GPU instances of a device in MIG mode, profile
// by profile, each with its compute instances, the UUIDs of the MIG
// devices they are, and the processes NVML places on them (a process
// of a MIG device carries its GPU and compute instance ids).
func (n *nvmlLib) gpuInstances(h nvml.Device, e *[]string, procs []nvml.ProcessInfo) ([]NVMLGPUInstance, int) {
	type key struct{ gi, ci uint32 }
	type slot struct {
		uuid  string
		index int
	}
	uuids := map[key]slot{}
	count := 0
	if max, ret := h.GetMaxMigDeviceCount(); query(e, "MIG device count", ret) {
		// Slots up to the maximum that hold no MIG device answer
		// NOT_FOUND.
		for i := 0; i < max; i++ {
			m, ret := h.GetMigDeviceHandleByIndex(i)
			if ret != nvml.SUCCESS {
				continue
			}
			count++
			gi, r1 := m.GetGpuInstanceId()
			ci, r2 := m.GetComputeInstanceId()
			u, r3 := m.GetUUID()
			if query(e, "MIG device GPU instance id", r1) && query(e, "MIG device compute instance id", r2) && query(e, "MIG device UUID", r3) {
				uuids[key{uint32(gi), uint32(ci)}] = slot{u, i}
			}
		}
	}
	var out []NVMLGPUInstance
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := h.GetGpuInstanceProfileInfo(id)
		if ret != nvml.SUCCESS {
			// Profiles the GPU does not have answer NOT_SUPPORTED or
			// INVALID_ARGUMENT: not a failure.
			continue
		}
		gis, ret := h.GetGpuInstances(&info)
		if !query(e, fmt.Sprintf("GPU instances of profile %d", id), ret) {
			continue
		}
		for _, g := range gis {
			gi, ret := g.GetInfo()
			if !query(e, "GPU instance info", ret) {
				continue
			}
			ng := NVMLGPUInstance{ID: gi.Id, ProfileID: int(gi.ProfileId), Start: gi.Placement.Start, Size: gi.Placement.Size}
			for cid := 0; cid < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; cid++ {
				cinfo, ret := g.GetComputeInstanceProfileInfo(cid, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
				if ret != nvml.SUCCESS {
					continue
				}
				cis, ret := g.GetComputeInstances(&cinfo)
				if !query(e, "compute instances", ret) {
					continue
				}
				for _, c := range cis {
					ci, ret := c.GetInfo()
					if !query(e, "compute instance info", ret) {
						continue
					}
					nc := NVMLComputeInstance{ID: ci.Id, ProfileID: int(ci.ProfileId), Slices: int(cinfo.SliceCount), Index: -1}
					if sl, ok := uuids[key{gi.Id, ci.Id}]; ok {
						nc.UUID, nc.Index = sl.uuid, sl.index
					}
					for _, p := range procs {
						if p.GpuInstanceId == gi.Id && p.ComputeInstanceId == ci.Id {
							nc.Processes = append(nc.Processes, n.process(p))
						}
					}
					ng.Compute = append(ng.Compute, nc)
				}
			}
			slices.SortFunc(ng.Compute, func(a, b NVMLComputeInstance) int { return int(a.ID) - int(b.ID) })
			out = append(out, ng)
		}
	}
	slices.SortFunc(out, func(a, b NVMLGPUInstance) int {
		if a.Start != b.Start {
			return int(a.Start) - int(b.Start)
		}
		return a.ProfileID - b.ProfileID
	})
	return out, count
}

func enabled(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

func computeMode(m nvml.ComputeMode) string {
	switch m {
	case nvml.COMPUTEMODE_DEFAULT:
		return "default"
	case nvml.COMPUTEMODE_EXCLUSIVE_THREAD:
		return "exclusive_thread"
	case nvml.COMPUTEMODE_PROHIBITED:
		return "prohibited"
	case nvml.COMPUTEMODE_EXCLUSIVE_PROCESS:
		return "exclusive_process"
	}
	return fmt.Sprintf("mode_%d", m)
}

// busID spells NVML's bus id as sysfs does: NVML pads the domain to eight
// digits ("00000000:17:00.0") and writes hex in upper case.
func busID(p nvml.PciInfo) string {
	var b strings.Builder
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	s := strings.ToLower(b.String())
	if s == "" {
		return fmt.Sprintf("%04x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
	}
	if dom, rest, ok := strings.Cut(s, ":"); ok && len(dom) > 4 && strings.Trim(dom[:len(dom)-4], "0") == "" {
		s = dom[len(dom)-4:] + ":" + rest
	}
	return s
}

// WithNVML makes the host use n for NVML whatever its root. Test entry
// points hand in go-nvml's mock this way; a real root other than "/" has
// no NVML of its own.
func WithNVML(n NVML) Option { return func(h *Host) { h.nvml = n } }

// NVML is the host's NVML: the one given with WithNVML, else the real
// library on a live root (loaded only when Init is called), else nil: a
// root other than "/" is not the machine this process could ask.
func (h *Host) NVML() NVML {
	if h.nvml != nil {
		return h.nvml
	}
	if !h.Live() {
		return nil
	}
	h.nvml = NewNVML(nvml.New())
	return h.nvml
}
