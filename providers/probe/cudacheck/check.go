// Package cudacheck checks a GPU without any framework, through the CUDA
// driver API alone, as the GPU Operator's validator does with vectorAdd:
// it loads the driver's libcuda.so.1 with dlopen, starts CUDA, and on each
// device creates a context, allocates, copies two vectors in, JIT-compiles
// a kernel from PTX built into gpuenv, launches it, copies the sum back and
// compares it with the sum computed here.
//
// The check runs in a child process (Child), which a parent (Run) starts
// under the credentials of the user being verified: a driver that crashes
// takes only the child down, and the parent still reports every GPU. The
// child writes one JSON line before each step and one per device after,
// so that the parent knows where a crash happened.
package cudacheck

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Library is the driver library the check loads. The loader finds it as
// it does for every CUDA program: LD_LIBRARY_PATH, then ld.so.cache.
const Library = "libcuda.so.1"

// vectorAddPTX is the kernel, written by hand for the oldest architecture
// and PTX ISA version that a driver gpuenv supports still runs. Its
// ".target sm_30" is Kepler, whose last driver branch is R470; the PTX ISA
// notes of .target say sm_30 was introduced in PTX ISA 3.0, which came
// with CUDA 4.1 (the PTX ISA's release history). Every later driver
// JIT-compiles PTX written for an older target (PTX is forward
// compatible; only the "a"/"f" architecture-specific targets are not), and
// accepts every older ISA version, so the one kernel runs on Kepler through
// Blackwell. It uses nothing newer than ISA 3.0: cvta.to.global came in
// 2.0, .visible in 1.0.
//
//go:embed vector_add.ptx
var vectorAddPTX string

// kernelName is the .entry in vectorAddPTX.
const kernelName = "vector_add"

// Elements is how many floats the kernel adds; blockSize threads a block.
const (
	Elements  = 1 << 16
	blockSize = 256
)

// Step is one stage of the check, in the order they run.
type Step string

// The steps. Load, init, version and count concern the driver; the others
// are done on each device.
const (
	StepLoad    Step = "load"     // dlopen libcuda.so.1
	StepInit    Step = "init"     // cuInit
	StepVersion Step = "version"  // cuDriverGetVersion
	StepCount   Step = "count"    // cuDeviceGetCount
	StepDevice  Step = "device"   // cuDeviceGet, name, capability, memory
	StepContext Step = "context"  // cuCtxCreate
	StepAlloc   Step = "alloc"    // cuMemAlloc
	StepCopyIn  Step = "copy_in"  // cuMemcpyHtoD
	StepModule  Step = "module"   // cuModuleLoadDataEx: the PTX JIT
	StepLaunch  Step = "launch"   // cuLaunchKernel, cuCtxSynchronize
	StepCopyOut Step = "copy_out" // cuMemcpyDtoH
	StepCompare Step = "compare"  // the sums against the host's
	// StepExit is the child's end, after its last device: a driver can
	// crash as the process unloads it.
	StepExit Step = "exit"
)

// DeviceSteps are the steps done on each device, in order.
var DeviceSteps = []Step{StepDevice, StepContext, StepAlloc, StepCopyIn, StepModule, StepLaunch, StepCopyOut, StepCompare}

// Failure is a step that did not succeed.
type Failure struct {
	Step Step `json:"step"`
	// Code and Name are the CUresult and its name (CUDA_ERROR_NO_DEVICE);
	// Code is 0 for a failure that is not the driver's error.
	Code int    `json:"code,omitempty"`
	Name string `json:"name,omitempty"`
	// Message is the driver's description of the error, or what went
	// wrong in words.
	Message string `json:"message"`
	// Log is the PTX JIT compiler's error log.
	Log string `json:"log,omitempty"`
}

func (f *Failure) String() string {
	s := string(f.Step) + ": "
	if f.Name != "" {
		s += f.Name
		if f.Message != "" {
			s += " (" + f.Message + ")"
		}
		return s
	}
	return s + f.Message
}

// Device is one GPU's check.
type Device struct {
	// Ordinal is the device's CUDA ordinal: its place among the devices
	// CUDA_VISIBLE_DEVICES shows, numbered as CUDA_DEVICE_ORDER says.
	Ordinal    int    `json:"ordinal"`
	Name       string `json:"name,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	Capability string `json:"compute_capability,omitempty"`
	// TotalMemory and FreeMemory are the device's, FreeMemory as the new
	// context saw it.
	TotalMemory uint64 `json:"memory_total_bytes,omitempty"`
	FreeMemory  uint64 `json:"memory_free_bytes,omitempty"`
	// Passed lists the steps that succeeded.
	Passed []Step `json:"passed"`
	// KernelSeconds is the launch until the kernel finished, JIT not
	// included.
	KernelSeconds float64 `json:"kernel_seconds,omitempty"`
	// Failure is the step that failed. Crashed is set instead when the
	// child process died in Step; TimedOut when it was killed there.
	Failure  *Failure `json:"failure,omitempty"`
	Crashed  string   `json:"crashed,omitempty"`
	TimedOut bool     `json:"timed_out,omitempty"`
	// Bandwidth is what copies to and from the device carried, measured
	// once every step passed; nil otherwise.
	Bandwidth *Bandwidth `json:"bandwidth,omitempty"`
}

// OK reports whether every step passed on the device.
func (d Device) OK() bool {
	return d.Failure == nil && d.Crashed == "" && !d.TimedOut && len(d.Passed) == len(DeviceSteps)
}

// line is one line the child writes: the step it is about to do, what the
// driver said about itself, a device's result, or the failure that ended
// the check before any device.
type line struct {
	Begin   Step     `json:"begin,omitempty"`
	Ordinal *int     `json:"ordinal,omitempty"`
	Driver  *driverV `json:"driver,omitempty"`
	// Known is what the device said about itself, before the steps that
	// may crash: the parent names a device that crashed with it.
	Known   *Device  `json:"known,omitempty"`
	Device  *Device  `json:"device,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Pair is the devices of a peer step Begin names; Peer a pair's
	// copy, PeersSkipped why no pair was copied.
	Pair         *[2]int   `json:"pair,omitempty"`
	Peer         *PeerCopy `json:"peer,omitempty"`
	PeersSkipped string    `json:"peers_skipped,omitempty"`
}

type driverV struct {
	Version int `json:"version"`
	Count   int `json:"count"`
}

// Child runs the check on the devices from ordinal from on, writing its
// lines to w, and returns the process's exit status: 0 when it got to the
// end (whatever the devices did), 1 when the driver could not be used.
func Child(w io.Writer, from int) int {
	enc := json.NewEncoder(w)
	emit := func(l line) { _ = enc.Encode(l) }
	begin := func(s Step, ordinal *int) { emit(line{Begin: s, Ordinal: ordinal}) }

	dieOfFaults()
	begin(StepLoad, nil)
	d, f := open(Library)
	if f != nil {
		emit(line{Failure: f})
		return 1
	}
	begin(StepInit, nil)
	if r := d.init(); r != 0 {
		emit(line{Failure: d.fail(StepInit, r)})
		return 1
	}
	begin(StepVersion, nil)
	v, r := d.version()
	if r != 0 {
		emit(line{Failure: d.fail(StepVersion, r)})
		return 1
	}
	begin(StepCount, nil)
	n, r := d.count()
	if r != 0 {
		emit(line{Failure: d.fail(StepCount, r)})
		return 1
	}
	emit(line{Driver: &driverV{Version: v, Count: n}})
	var passed []int
	for i := from; i < n; i++ {
		dev := checkDevice(d, i, func(s Step) { begin(s, &i) }, func(k Device) { emit(line{Known: &k}) })
		emit(line{Device: &dev})
		if dev.OK() {
			passed = append(passed, i)
		}
	}
	// Pairs are copied by a child that checked every device: after a
	// crash the driver's state is not to be trusted with more.
	if from == 0 {
		why := measurePeers(d, passed, func(a, b int) { emit(line{Begin: StepPeer, Pair: &[2]int{a, b}}) }, func(p PeerCopy) { emit(line{Peer: &p}) })
		if why != "" {
			emit(line{PeersSkipped: why})
		}
	}
	return 0
}

// checkDevice runs the device steps on ordinal i, calling begin before
// each, and known with what the device said about itself.
func checkDevice(d *driver, i int, begin func(Step), known func(Device)) Device {
	out := Device{Ordinal: i, Passed: []Step{}}
	pass := func(s Step) { out.Passed = append(out.Passed, s) }

	begin(StepDevice)
	dev, r := d.device(i)
	if r != 0 {
		out.Failure = d.fail(StepDevice, r)
		return out
	}
	if out.Name, r = d.name(dev); r != 0 {
		out.Failure = d.fail(StepDevice, r)
		return out
	}
	major, r1 := d.attribute(dev, attrComputeCapabilityMajor)
	minor, r2 := d.attribute(dev, attrComputeCapabilityMinor)
	if r1 == 0 && r2 == 0 {
		out.Capability = fmt.Sprintf("%d.%d", major, minor)
	}
	out.TotalMemory, _ = d.totalMemory(dev)
	out.UUID = d.uuid(dev)
	pass(StepDevice)
	known(out)

	begin(StepContext)
	ctx, r := d.createContext(dev)
	if r != 0 {
		out.Failure = d.fail(StepContext, r)
		return out
	}
	defer d.destroyContext(ctx)
	out.FreeMemory, _, _ = d.memInfo()
	pass(StepContext)

	begin(StepAlloc)
	a, b, sum := make([]float32, Elements), make([]float32, Elements), make([]float32, Elements)
	for k := range a {
		// Exact in float32 (3k < 2^24), so the comparison is exact too;
		// a kernel that read the wrong element gets a wrong sum.
		a[k], b[k] = float32(k), float32(2*k)
	}
	var bufs [3]devPtr
	for k := range bufs {
		p, r := d.alloc(4 * Elements)
		if r != 0 {
			out.Failure = d.fail(StepAlloc, r)
			for _, q := range bufs[:k] {
				d.free(q)
			}
			return out
		}
		bufs[k] = p
	}
	defer func() {
		for _, p := range bufs {
			d.free(p)
		}
	}()
	pass(StepAlloc)

	begin(StepCopyIn)
	if r := d.copyIn(bufs[0], a); r != 0 {
		out.Failure = d.fail(StepCopyIn, r)
		return out
	}
	if r := d.copyIn(bufs[1], b); r != 0 {
		out.Failure = d.fail(StepCopyIn, r)
		return out
	}
	pass(StepCopyIn)

	begin(StepModule)
	mod, fn, log, r := d.loadModule(vectorAddPTX, kernelName)
	if r != 0 {
		out.Failure = d.fail(StepModule, r)
		out.Failure.Log = trimLog(log)
		return out
	}
	defer d.unload(mod)
	pass(StepModule)

	begin(StepLaunch)
	start := time.Now()
	if r := d.launchAdd(fn, bufs[0], bufs[1], bufs[2], Elements, blockSize); r != 0 {
		out.Failure = d.fail(StepLaunch, r)
		return out
	}
	// Launch errors of a kernel that faulted arrive here, asynchronously.
	if r := d.synchronize(); r != 0 {
		out.Failure = d.fail(StepLaunch, r)
		return out
	}
	out.KernelSeconds = time.Since(start).Seconds()
	pass(StepLaunch)

	begin(StepCopyOut)
	if r := d.copyOut(sum, bufs[2]); r != 0 {
		out.Failure = d.fail(StepCopyOut, r)
		return out
	}
	pass(StepCopyOut)

	begin(StepCompare)
	wrong, first := 0, -1
	for k := range sum {
		if sum[k] != a[k]+b[k] {
			if first < 0 {
				first = k
			}
			wrong++
		}
	}
	if wrong > 0 {
		out.Failure = &Failure{Step: StepCompare, Message: fmt.Sprintf("%d of %d sums are wrong; the first, element %d, is %g where %g was expected", wrong, Elements, first, sum[first], a[first]+b[first])}
		return out
	}
	pass(StepCompare)
	out.Bandwidth = measureBandwidth(d)
	return out
}

// trimLog keeps the JIT log short enough for a report.
func trimLog(s string) string {
	const keep = 2000
	if len(s) > keep {
		return s[:keep] + "…"
	}
	return s
}
