package cudacheck

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The driver API's types as cuda.h declares them, so that gpuenv builds
// without the toolkit's headers. CUdeviceptr is 64 bits wide: the _v2
// entry points, which every driver since CUDA 3.2 exports, take it so.
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

typedef struct {
	void *lib;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDriverGetVersion)(int *);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
	CUresult (*cuDeviceGetUuid)(unsigned char *, CUdevice);
	CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
	CUresult (*cuCtxDestroy)(CUcontext);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int, int *, void **);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
		unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuGetErrorString)(CUresult, const char **);
	CUresult (*cuMemAllocHost)(void **, size_t);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned int);
	CUresult (*cuMemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
} gpuenv_cu;

// gpuenv_cu_open loads lib and resolves every entry point the check
// calls. It returns NULL with *missing naming the first symbol the library
// lacks (an old driver), or NULL with *missing NULL and *failure the
// loader's message (the caller frees it) when dlopen failed. dlerror's text
// is copied here: it lives in the calling thread, and the Go scheduler may
// run a later cgo call on another.
static gpuenv_cu *gpuenv_cu_open(const char *lib, const char **missing, char **failure) {
	*missing = NULL;
	*failure = NULL;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		if (e != NULL) {
			*failure = strdup(e);
		}
		return NULL;
	}
	gpuenv_cu *c = calloc(1, sizeof(gpuenv_cu));
	c->lib = h;
#define SYM(field, name) \
	if ((*(void **)(&c->field) = dlsym(h, name)) == NULL) { *missing = name; goto fail; }
	SYM(cuInit, "cuInit");
	SYM(cuDriverGetVersion, "cuDriverGetVersion");
	SYM(cuDeviceGetCount, "cuDeviceGetCount");
	SYM(cuDeviceGet, "cuDeviceGet");
	SYM(cuDeviceGetName, "cuDeviceGetName");
	SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
	SYM(cuCtxCreate, "cuCtxCreate_v2");
	SYM(cuCtxDestroy, "cuCtxDestroy_v2");
	SYM(cuCtxSynchronize, "cuCtxSynchronize");
	SYM(cuMemGetInfo, "cuMemGetInfo_v2");
	SYM(cuMemAlloc, "cuMemAlloc_v2");
	SYM(cuMemFree, "cuMemFree_v2");
	SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
	SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx");
	SYM(cuModuleGetFunction, "cuModuleGetFunction");
	SYM(cuModuleUnload, "cuModuleUnload");
	SYM(cuLaunchKernel, "cuLaunchKernel");
	SYM(cuGetErrorName, "cuGetErrorName");
	SYM(cuGetErrorString, "cuGetErrorString");
#undef SYM
	// Drivers before CUDA 9.2 have no UUIDs to give.
	*(void **)(&c->cuDeviceGetUuid) = dlsym(h, "cuDeviceGetUuid");
	// Page-locked host memory, for the copy bandwidth: without it the
	// copies are measured from pageable memory.
	*(void **)(&c->cuMemAllocHost) = dlsym(h, "cuMemAllocHost_v2");
	*(void **)(&c->cuMemFreeHost) = dlsym(h, "cuMemFreeHost");
	// Peer-to-peer copies between GPUs (CUDA 4.0): without them the
	// check measures no pair.
	*(void **)(&c->cuDeviceCanAccessPeer) = dlsym(h, "cuDeviceCanAccessPeer");
	*(void **)(&c->cuCtxSetCurrent) = dlsym(h, "cuCtxSetCurrent");
	*(void **)(&c->cuCtxEnablePeerAccess) = dlsym(h, "cuCtxEnablePeerAccess");
	*(void **)(&c->cuMemcpyPeer) = dlsym(h, "cuMemcpyPeer");
	return c;
fail:
	dlclose(h);
	free(c);
	return NULL;
}

// gpuenv_die_of_faults gives the signals of a fault back to the kernel, so
// that a driver that faults kills the process with the signal, as it kills
// any program using it, instead of the Go runtime turning it into an exit
// status.
static void gpuenv_die_of_faults(void) {
	int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		signal(sigs[i], SIG_DFL);
	}
}

static CUresult gpuenv_cuInit(gpuenv_cu *c) { return c->cuInit(0); }
static CUresult gpuenv_cuDriverGetVersion(gpuenv_cu *c, int *v) { return c->cuDriverGetVersion(v); }
static CUresult gpuenv_cuDeviceGetCount(gpuenv_cu *c, int *n) { return c->cuDeviceGetCount(n); }
static CUresult gpuenv_cuDeviceGet(gpuenv_cu *c, CUdevice *d, int i) { return c->cuDeviceGet(d, i); }
static CUresult gpuenv_cuDeviceGetName(gpuenv_cu *c, char *s, int n, CUdevice d) { return c->cuDeviceGetName(s, n, d); }
static CUresult gpuenv_cuDeviceGetAttribute(gpuenv_cu *c, int *v, int a, CUdevice d) { return c->cuDeviceGetAttribute(v, a, d); }
static CUresult gpuenv_cuDeviceTotalMem(gpuenv_cu *c, size_t *b, CUdevice d) { return c->cuDeviceTotalMem(b, d); }
static int gpuenv_has_uuid(gpuenv_cu *c) { return c->cuDeviceGetUuid != NULL; }
static CUresult gpuenv_cuDeviceGetUuid(gpuenv_cu *c, unsigned char *u, CUdevice d) { return c->cuDeviceGetUuid(u, d); }
static CUresult gpuenv_cuCtxCreate(gpuenv_cu *c, CUcontext *ctx, CUdevice d) { return c->cuCtxCreate(ctx, 0, d); }
static CUresult gpuenv_cuCtxDestroy(gpuenv_cu *c, CUcontext ctx) { return c->cuCtxDestroy(ctx); }
static CUresult gpuenv_cuCtxSynchronize(gpuenv_cu *c) { return c->cuCtxSynchronize(); }
static CUresult gpuenv_cuMemGetInfo(gpuenv_cu *c, size_t *f, size_t *t) { return c->cuMemGetInfo(f, t); }
static CUresult gpuenv_cuMemAlloc(gpuenv_cu *c, CUdeviceptr *p, size_t n) { return c->cuMemAlloc(p, n); }
static CUresult gpuenv_cuMemFree(gpuenv_cu *c, CUdeviceptr p) { return c->cuMemFree(p); }
static CUresult gpuenv_cuMemcpyHtoD(gpuenv_cu *c, CUdeviceptr d, const void *h, size_t n) { return c->cuMemcpyHtoD(d, h, n); }
static CUresult gpuenv_cuMemcpyDtoH(gpuenv_cu *c, void *h, CUdeviceptr d, size_t n) { return c->cuMemcpyDtoH(h, d, n); }
static int gpuenv_has_pinned(gpuenv_cu *c) { return c->cuMemAllocHost != NULL && c->cuMemFreeHost != NULL; }
static CUresult gpuenv_cuMemAllocHost(gpuenv_cu *c, void **p, size_t n) { return c->cuMemAllocHost(p, n); }
static CUresult gpuenv_cuMemFreeHost(gpuenv_cu *c, void *p) { return c->cuMemFreeHost(p); }
static int gpuenv_has_peer(gpuenv_cu *c) {
	return c->cuDeviceCanAccessPeer != NULL && c->cuCtxSetCurrent != NULL && c->cuCtxEnablePeerAccess != NULL && c->cuMemcpyPeer != NULL;
}
static CUresult gpuenv_cuDeviceCanAccessPeer(gpuenv_cu *c, int *can, CUdevice d, CUdevice peer) { return c->cuDeviceCanAccessPeer(can, d, peer); }
static CUresult gpuenv_cuCtxSetCurrent(gpuenv_cu *c, CUcontext ctx) { return c->cuCtxSetCurrent(ctx); }
static CUresult gpuenv_cuCtxEnablePeerAccess(gpuenv_cu *c, CUcontext peer) { return c->cuCtxEnablePeerAccess(peer, 0); }
static CUresult gpuenv_cuMemcpyPeer(gpuenv_cu *c, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) { return c->cuMemcpyPeer(dst, dctx, src, sctx, n); }
static CUresult gpuenv_cuModuleGetFunction(gpuenv_cu *c, CUfunction *f, CUmodule m, const char *name) { return c->cuModuleGetFunction(f, m, name); }
static CUresult gpuenv_cuModuleUnload(gpuenv_cu *c, CUmodule m) { return c->cuModuleUnload(m); }

// gpuenv_load_module JIT-compiles a PTX image, keeping the compiler's
// error log: it says which line of the PTX, or which .version, the driver
// refused.
static CUresult gpuenv_load_module(gpuenv_cu *c, CUmodule *m, const char *ptx, char *log, size_t logsize) {
	// CU_JIT_ERROR_LOG_BUFFER and CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES.
	int opts[2] = {5, 6};
	void *vals[2] = {log, (void *)(uintptr_t)logsize};
	return c->cuModuleLoadDataEx(m, ptx, 2, opts, vals);
}

// gpuenv_launch_add runs the vector_add kernel over n elements: its
// parameters are passed as the driver API wants them, an array of
// pointers to each argument's value.
static CUresult gpuenv_launch_add(gpuenv_cu *c, CUfunction f, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out, unsigned int n, unsigned int block) {
	void *params[4] = {&a, &b, &out, &n};
	return c->cuLaunchKernel(f, (n + block - 1) / block, 1, 1, block, 1, 1, 0, NULL, params, NULL);
}

static const char *gpuenv_error_name(gpuenv_cu *c, CUresult r) {
	const char *s = NULL;
	if (c->cuGetErrorName(r, &s) != 0) {
		return NULL;
	}
	return s;
}

static const char *gpuenv_error_string(gpuenv_cu *c, CUresult r) {
	const char *s = NULL;
	if (c->cuGetErrorString(r, &s) != 0) {
		return NULL;
	}
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// driver is libcuda opened with dlopen: gpuenv never links it, so that it
// starts on a machine without a driver.
type driver struct {
	c *C.gpuenv_cu
}

// devPtr is a device address; cuDevice and cuContext the driver's
// handles.
type (
	devPtr    = C.CUdeviceptr
	cuDevice  = C.CUdevice
	cuContext = C.CUcontext
)

// The device attributes the check reads (CUdevice_attribute).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// dieOfFaults makes a fault in the driver kill the process with its
// signal. Only the check's child calls it: it is a process of its own.
func dieOfFaults() { C.gpuenv_die_of_faults() }

// open loads lib. The error is a *Failure at StepLoad.
func open(lib string) (*driver, *Failure) {
	name := C.CString(lib)
	defer C.free(unsafe.Pointer(name))
	var missing, failure *C.char
	c := C.gpuenv_cu_open(name, &missing, &failure)
	if failure != nil {
		defer C.free(unsafe.Pointer(failure))
	}
	if c != nil {
		return &driver{c: c}, nil
	}
	if missing != nil {
		return nil, &Failure{Step: StepLoad, Message: fmt.Sprintf("%s has no %s: a driver older than the check needs (CUDA 6.0), or not NVIDIA's library", lib, C.GoString(missing))}
	}
	msg := "dlopen failed"
	if failure != nil {
		msg = C.GoString(failure)
	}
	return nil, &Failure{Step: StepLoad, Message: msg}
}

// fail turns a CUresult into a Failure at step, named by the driver
// itself when it knows the code.
func (d *driver) fail(step Step, r C.CUresult) *Failure {
	f := &Failure{Step: step, Code: int(r)}
	if s := C.gpuenv_error_name(d.c, r); s != nil {
		f.Name = C.GoString(s)
	} else {
		f.Name = errorNames[f.Code]
	}
	if s := C.gpuenv_error_string(d.c, r); s != nil {
		f.Message = C.GoString(s)
	}
	return f
}

func (d *driver) init() C.CUresult { return C.gpuenv_cuInit(d.c) }

func (d *driver) version() (int, C.CUresult) {
	var v C.int
	r := C.gpuenv_cuDriverGetVersion(d.c, &v)
	return int(v), r
}

func (d *driver) count() (int, C.CUresult) {
	var n C.int
	r := C.gpuenv_cuDeviceGetCount(d.c, &n)
	return int(n), r
}

func (d *driver) device(ordinal int) (C.CUdevice, C.CUresult) {
	var dev C.CUdevice
	r := C.gpuenv_cuDeviceGet(d.c, &dev, C.int(ordinal))
	return dev, r
}

func (d *driver) name(dev C.CUdevice) (string, C.CUresult) {
	var buf [256]C.char
	r := C.gpuenv_cuDeviceGetName(d.c, &buf[0], C.int(len(buf)), dev)
	return C.GoString(&buf[0]), r
}

func (d *driver) attribute(dev C.CUdevice, attr int) (int, C.CUresult) {
	var v C.int
	r := C.gpuenv_cuDeviceGetAttribute(d.c, &v, C.int(attr), dev)
	return int(v), r
}

func (d *driver) totalMemory(dev C.CUdevice) (uint64, C.CUresult) {
	var b C.size_t
	r := C.gpuenv_cuDeviceTotalMem(d.c, &b, dev)
	return uint64(b), r
}

// uuid is the device's UUID as nvidia-smi writes it, or "" when the
// driver cannot say.
func (d *driver) uuid(dev C.CUdevice) string {
	if C.gpuenv_has_uuid(d.c) == 0 {
		return ""
	}
	var u [16]C.uchar
	if C.gpuenv_cuDeviceGetUuid(d.c, &u[0], dev) != 0 {
		return ""
	}
	var b [16]byte
	for i := range u {
		b[i] = byte(u[i])
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (d *driver) createContext(dev C.CUdevice) (C.CUcontext, C.CUresult) {
	var ctx C.CUcontext
	r := C.gpuenv_cuCtxCreate(d.c, &ctx, dev)
	return ctx, r
}

func (d *driver) destroyContext(ctx C.CUcontext) { C.gpuenv_cuCtxDestroy(d.c, ctx) }

func (d *driver) memInfo() (free, total uint64, r C.CUresult) {
	var f, t C.size_t
	r = C.gpuenv_cuMemGetInfo(d.c, &f, &t)
	return uint64(f), uint64(t), r
}

func (d *driver) alloc(n int) (C.CUdeviceptr, C.CUresult) {
	var p C.CUdeviceptr
	r := C.gpuenv_cuMemAlloc(d.c, &p, C.size_t(n))
	return p, r
}

func (d *driver) free(p C.CUdeviceptr) { C.gpuenv_cuMemFree(d.c, p) }

func (d *driver) copyIn(dst C.CUdeviceptr, src []float32) C.CUresult {
	return C.gpuenv_cuMemcpyHtoD(d.c, dst, unsafe.Pointer(&src[0]), C.size_t(4*len(src)))
}

func (d *driver) copyOut(dst []float32, src C.CUdeviceptr) C.CUresult {
	return C.gpuenv_cuMemcpyDtoH(d.c, unsafe.Pointer(&dst[0]), src, C.size_t(4*len(dst)))
}

// loadModule JIT-compiles ptx and finds its kernel; log is the
// compiler's error log when it refused.
func (d *driver) loadModule(ptx, kernel string) (mod C.CUmodule, fn C.CUfunction, log string, r C.CUresult) {
	img := C.CString(ptx)
	defer C.free(unsafe.Pointer(img))
	const logSize = 4096
	buf := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(buf))
	if r = C.gpuenv_load_module(d.c, &mod, img, buf, logSize); r != 0 {
		return nil, nil, C.GoString(buf), r
	}
	name := C.CString(kernel)
	defer C.free(unsafe.Pointer(name))
	if r = C.gpuenv_cuModuleGetFunction(d.c, &fn, mod, name); r != 0 {
		C.gpuenv_cuModuleUnload(d.c, mod)
		return nil, nil, "", r
	}
	return mod, fn, "", 0
}

func (d *driver) unload(mod C.CUmodule) { C.gpuenv_cuModuleUnload(d.c, mod) }

func (d *driver) launchAdd(fn C.CUfunction, a, b, out C.CUdeviceptr, n, block int) C.CUresult {
	return C.gpuenv_launch_add(d.c, fn, a, b, out, C.uint(n), C.uint(block))
}

func (d *driver) synchronize() C.CUresult { return C.gpuenv_cuCtxSynchronize(d.c) }

// hostBuffer is n bytes of host memory for copies: page-locked when the
// driver offers it (free with freeHost), else allocated by C.
func (d *driver) hostBuffer(n int) (p unsafe.Pointer, pinned bool, r C.CUresult) {
	if C.gpuenv_has_pinned(d.c) != 0 {
		if r = C.gpuenv_cuMemAllocHost(d.c, &p, C.size_t(n)); r == 0 {
			return p, true, 0
		}
	}
	p = C.calloc(C.size_t(n), 1)
	if p == nil {
		return nil, false, 2 // CUDA_ERROR_OUT_OF_MEMORY
	}
	return p, false, 0
}

func (d *driver) freeHost(p unsafe.Pointer, pinned bool) {
	if pinned {
		C.gpuenv_cuMemFreeHost(d.c, p)
		return
	}
	C.free(p)
}

func (d *driver) copyInRaw(dst C.CUdeviceptr, src unsafe.Pointer, n int) C.CUresult {
	return C.gpuenv_cuMemcpyHtoD(d.c, dst, src, C.size_t(n))
}

func (d *driver) copyOutRaw(dst unsafe.Pointer, src C.CUdeviceptr, n int) C.CUresult {
	return C.gpuenv_cuMemcpyDtoH(d.c, dst, src, C.size_t(n))
}

// hasPeer reports whether the driver offers the peer-to-peer entry points.
func (d *driver) hasPeer() bool { return C.gpuenv_has_peer(d.c) != 0 }

// canAccessPeer reports whether dev can address peer's memory directly
// (NVLink, or PCIe through a switch or root port that allows it).
func (d *driver) canAccessPeer(dev, peer C.CUdevice) (bool, C.CUresult) {
	var can C.int
	r := C.gpuenv_cuDeviceCanAccessPeer(d.c, &can, dev, peer)
	return can != 0, r
}

func (d *driver) setCurrent(ctx C.CUcontext) C.CUresult { return C.gpuenv_cuCtxSetCurrent(d.c, ctx) }

// enablePeerAccess lets the current context address peer's memory.
func (d *driver) enablePeerAccess(peer C.CUcontext) C.CUresult {
	return C.gpuenv_cuCtxEnablePeerAccess(d.c, peer)
}

func (d *driver) copyPeer(dst C.CUdeviceptr, dctx C.CUcontext, src C.CUdeviceptr, sctx C.CUcontext, n int) C.CUresult {
	return C.gpuenv_cuMemcpyPeer(d.c, dst, dctx, src, sctx, C.size_t(n))
}
