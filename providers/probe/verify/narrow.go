package verify

import (
	"context"
	"strings"
)

// Kind is the class of a workload's error, told from the framework's own
// words: the failures the troubleshooting guide names.
type Kind string

// The kinds.
const (
	KindOutOfMemory    Kind = "out_of_memory"
	KindWrongDevice    Kind = "wrong_device"     // "Expected all tensors to be on the same device"
	KindDeviceAssert   Kind = "device_assert"    // a device-side assert triggered
	KindIllegalAddress Kind = "illegal_address"  // an illegal memory access
	KindECC            Kind = "ecc"              // an uncorrectable ECC error
	KindBusy           Kind = "busy"             // the GPU is busy or unavailable (compute mode)
	KindNoKernel       Kind = "no_kernel_image"  // the build has no code for this GPU
	KindCuDNN          Kind = "cudnn"            // a cuDNN status error
	KindNonFinite      Kind = "non_finite"       // the loss became NaN or infinite
	KindNoLearning     Kind = "loss_not_falling" // the loss did not fall
	KindCUDA           Kind = "cuda"             // another CUDA error
	KindCrash          Kind = "crash"            // the interpreter died
	KindOther          Kind = "other"
)

// classify tells an error's kind from its text, the interpreter's stderr
// and the exception's type.
func classify(text, stderr, errType string) Kind {
	t := strings.ToLower(text + "\n" + stderr)
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(t, x) {
				return true
			}
		}
		return false
	}
	switch {
	case errType == "OutOfMemoryError" || has("out of memory", "resource_exhausted", "resourceexhaustederror", "cuda_error_out_of_memory"):
		return KindOutOfMemory
	case has("expected all tensors to be on the same device") || strings.HasPrefix(text, "RuntimeError: not on "):
		return KindWrongDevice
	case has("device-side assert"):
		return KindDeviceAssert
	case has("illegal memory access", "illegal address"):
		return KindIllegalAddress
	case has("uncorrectable ecc"):
		return KindECC
	case has("busy or unavailable", "cuda_error_device_unavailable"):
		return KindBusy
	case has("no kernel image", "cuda_error_no_binary_for_gpu"):
		return KindNoKernel
	case has("cudnn_status", "cudnn error", "could not create cudnn", "dnn library"):
		return KindCuDNN
	case errType == "FloatingPointError":
		return KindNonFinite
	case errType == "ArithmeticError":
		return KindNoLearning
	case has("cuda", "cublas", "cufft", "curand", "cusolver", "cusparse", "nccl"):
		return KindCUDA
	case strings.Contains(text, "killed by signal"), strings.Contains(text, "before printing a result"):
		return KindCrash
	}
	return KindOther
}

// Layer is what a failure follows: the part of the stack it comes from.
type Layer string

// The layers, from the bottom.
const (
	LayerDriver  Layer = "driver"       // the driver: the framework-free check fails too
	LayerDevice  Layer = "device"       // the GPU itself: memory, ECC, compute mode, a fault
	LayerRuntime Layer = "cuda_runtime" // the framework's CUDA runtime and kernels
	LayerCuDNN   Layer = "cudnn"        // cuDNN: the step passes with it off
	LayerAMP     Layer = "amp"          // mixed precision: the step passes without it
)

// Rerun is one repetition of a failed workload with one thing changed.
type Rerun struct {
	// Change is what was changed: "CUDA_LAUNCH_BLOCKING=1", "cuDNN off",
	// "mixed precision off", "cuDNN and mixed precision off".
	Change  string  `json:"change"`
	Outcome Outcome `json:"outcome"`
	Phase   string  `json:"phase,omitempty"`
	Kind    Kind    `json:"kind,omitempty"`
	// Error is the framework's error in that run. With synchronous
	// launches it names the operation that failed, not a later one.
	Error string `json:"error,omitempty"`
}

// Narrowing is which layer a failure follows, and the runs that told.
type Narrowing struct {
	Layer  Layer   `json:"layer"`
	Reason string  `json:"reason"`
	Reruns []Rerun `json:"reruns,omitempty"`
}

// driverState is what the framework-free check found on one GPU.
type driverState struct {
	// checked says whether the check ran there; fault is its failure,
	// "" when every step passed.
	checked bool
	fault   string
}

// narrow tells which layer the failure of first (job j) follows. A failure
// on the GPU is run again with synchronous launches, without cuDNN,
// without mixed precision, and, when neither alone helps, without both.
// Runs on the CPU, timeouts (which a rerun would repeat, at length) and
// workloads that could not start are not narrowed.
func (l *Launcher) narrow(ctx context.Context, j Job, first Result, drv driverState) *Narrowing {
	if j.Config.Device == CPU || first.OK() {
		return nil
	}
	switch {
	case first.Outcome == TimedOut || first.Outcome == NotStarted:
		return nil
	case drv.fault != "":
		return &Narrowing{Layer: LayerDriver, Reason: "the framework-free check fails on this GPU too: " + drv.fault}
	case first.Outcome == NotOnGPU && drv.checked:
		return &Narrowing{Layer: LayerRuntime, Reason: "the framework-free check runs a kernel on this GPU, but the framework finds no GPU: the framework's own CUDA is at fault (a CPU-only build, one for a CUDA newer than the driver, or libraries it cannot load)"}
	case first.Outcome == NotOnGPU:
		return nil
	case first.Kind == KindOutOfMemory:
		return &Narrowing{Layer: LayerDevice, Reason: "the GPU ran out of memory"}
	}
	n := &Narrowing{}
	rerun := func(change string, cfg Config, env ...string) Result {
		k := j
		k.Config = cfg
		k.Env = append(append([]string(nil), j.Env...), env...)
		r := l.Run(ctx, k)
		n.Reruns = append(n.Reruns, Rerun{Change: change, Outcome: r.Outcome, Phase: r.Phase, Kind: r.Kind, Error: r.Error})
		return r
	}
	ok := func(r *Result) bool { return r != nil && r.OK() }
	sync := rerun("CUDA_LAUNCH_BLOCKING=1", j.Config, "CUDA_LAUNCH_BLOCKING=1")
	var noCuDNN, noAMP, neither *Result
	if j.Config.CuDNN {
		c := j.Config
		c.CuDNN = false
		r := rerun("cuDNN off", c)
		noCuDNN = &r
	}
	if j.Config.AMP {
		c := j.Config
		c.AMP = false
		r := rerun("mixed precision off", c)
		noAMP = &r
	}
	if noCuDNN != nil && noAMP != nil && !ok(noCuDNN) && !ok(noAMP) {
		c := j.Config
		c.CuDNN, c.AMP = false, false
		r := rerun("cuDNN and mixed precision off", c)
		neither = &r
	}
	device := func(k Kind) bool {
		return k == KindDeviceAssert || k == KindIllegalAddress || k == KindECC || k == KindBusy
	}
	switch {
	case ok(noCuDNN) && ok(noAMP):
		n.Layer, n.Reason = LayerCuDNN, "it trains with cuDNN off, and also without mixed precision: cuDNN's float16 kernels for this GPU"
	case ok(noCuDNN):
		n.Layer, n.Reason = LayerCuDNN, "it trains with cuDNN off"
	case ok(noAMP):
		n.Layer, n.Reason = LayerAMP, "it trains without mixed precision"
	case ok(neither):
		n.Layer, n.Reason = LayerCuDNN, "it trains only with both cuDNN and mixed precision off: cuDNN's float16 kernels for this GPU"
	case device(first.Kind) || device(sync.Kind):
		n.Layer, n.Reason = LayerDevice, deviceReason(first.Kind, sync.Kind)
	case ok(&sync):
		n.Layer, n.Reason = LayerRuntime, "it trains with synchronous launches (CUDA_LAUNCH_BLOCKING=1): a race between kernels, in the framework's CUDA runtime or its kernels"
	case drv.checked:
		n.Layer, n.Reason = LayerRuntime, "it fails without cuDNN and without mixed precision too, while the framework-free check runs a kernel on this GPU: the framework's CUDA runtime or its kernels for this GPU"
	default:
		n.Layer, n.Reason = LayerRuntime, "it fails without cuDNN and without mixed precision too: the framework's CUDA runtime or its kernels, or the driver (the framework-free check did not run)"
	}
	return n
}

func deviceReason(kinds ...Kind) string {
	for _, k := range kinds {
		switch k {
		case KindBusy:
			return "the GPU is busy or unavailable: another process holds it in exclusive-process mode, or its compute mode is prohibited"
		case KindECC:
			return "the GPU reports an uncorrectable ECC error: it needs a reset (nvidia-smi -r) or service"
		case KindIllegalAddress:
			return "a kernel faulted on the GPU (an illegal memory access), with every option: a fault of the GPU or of the driver; dmesg shows its Xid"
		case KindDeviceAssert:
			return "a device-side assert fired, with every option: the synchronous run's error names the kernel"
		}
	}
	return ""
}
