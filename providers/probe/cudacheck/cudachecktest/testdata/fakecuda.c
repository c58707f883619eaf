// A stand-in for the driver's libcuda.so.1, for tests on machines without
// a GPU. It exports the driver API entry points gpuenv's check calls, with
// host memory for device memory; the kernel launch adds the vectors on
// the host. FAKE_CUDA chooses a failure, FAKE_CUDA_DEVICES the device
// count (default 2):
//
//   no-device      cuInit returns CUDA_ERROR_NO_DEVICE (100)
//   mismatch       cuInit returns CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)
//   ptx            the JIT refuses the PTX: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)
//   oom:K          cuMemAlloc on device K: CUDA_ERROR_OUT_OF_MEMORY (2)
//   wrong:K        the kernel on device K subtracts instead of adding
//   segv:K         the launch on device K dereferences a null pointer
//   hang:K         the synchronisation on device K never returns
//   slow-peer:K    each peer-to-peer copy into device K takes 250 ms
//   segv-peer:K    a peer-to-peer copy into device K dereferences a null pointer
//
// FAKE_CUDA_NO_PEER lists pairs of devices that cannot access each other
// ("0-2,1-3"), either way round.
//
// The PTX must be gpuenv's: .version 3.0, .target sm_30, an entry named
// vector_add; anything else is CUDA_ERROR_INVALID_PTX (218).
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static int initialized = 0;
static int current = -1;

static const char *mode(int *device) {
	static char buf[64];
	const char *m = getenv("FAKE_CUDA");
	*device = -1;
	if (m == NULL) {
		return "";
	}
	snprintf(buf, sizeof buf, "%s", m);
	char *colon = strchr(buf, ':');
	if (colon != NULL) {
		*colon = 0;
		*device = atoi(colon + 1);
	}
	return buf;
}

// failing reports whether FAKE_CUDA is m on the current device.
static int failing(const char *m) {
	int dev;
	const char *got = mode(&dev);
	return strcmp(got, m) == 0 && (dev < 0 || dev == current);
}

static int devices(void) {
	const char *n = getenv("FAKE_CUDA_DEVICES");
	return n == NULL ? 2 : atoi(n);
}

CUresult cuInit(unsigned int flags) {
	if (flags != 0) {
		return 1;
	}
	if (failing("no-device")) {
		return 100;
	}
	if (failing("mismatch")) {
		return 803;
	}
	initialized = 1;
	return 0;
}

CUresult cuDriverGetVersion(int *v) {
	*v = 12040;
	return 0;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialized) {
		return 3;
	}
	*n = devices();
	return 0;
}

CUresult cuDeviceGet(int *d, int ordinal) {
	if (ordinal < 0 || ordinal >= devices()) {
		return 101;
	}
	*d = ordinal;
	return 0;
}

CUresult cuDeviceGetName(char *name, int len, int d) {
	snprintf(name, len, "Fake GPU %d", d);
	return 0;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
	switch (attr) {
	case 75:
		*v = 8;
		return 0;
	case 76:
		*v = 0;
		return 0;
	}
	return 1;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int d) {
	*bytes = (size_t)16 << 30;
	return 0;
}

CUresult cuDeviceGetUuid(unsigned char *uuid, int d) {
	for (int i = 0; i < 16; i++) {
		uuid[i] = (unsigned char)(0x10 * d + i);
	}
	return 0;
}

// A context holds its device's ordinal.
CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, int d) {
	if (!initialized) {
		return 3;
	}
	current = d;
	int *c = malloc(sizeof(int));
	*c = d;
	*ctx = c;
	return 0;
}

CUresult cuCtxSetCurrent(void *ctx) {
	current = ctx == NULL ? -1 : *(int *)ctx;
	return 0;
}

CUresult cuDeviceCanAccessPeer(int *can, int d, int peer) {
	if (d < 0 || d >= devices() || peer < 0 || peer >= devices() || d == peer) {
		return 101;
	}
	*can = 1;
	const char *no = getenv("FAKE_CUDA_NO_PEER");
	for (const char *p = no; p != NULL && *p != 0;) {
		int a, b, n;
		if (sscanf(p, "%d-%d%n", &a, &b, &n) != 2) {
			break;
		}
		if ((a == d && b == peer) || (a == peer && b == d)) {
			*can = 0;
		}
		p += n;
		if (*p == ',') {
			p++;
		}
	}
	return 0;
}

// enabled[a][b]: device a's context may address device b's memory.
static int enabled[16][16];

CUresult cuCtxEnablePeerAccess(void *peer, unsigned int flags) {
	int p = *(int *)peer;
	if (flags != 0 || current < 0 || current >= 16 || p >= 16) {
		return 1;
	}
	if (enabled[current][p]) {
		return 704;
	}
	enabled[current][p] = 1;
	return 0;
}

CUresult cuMemcpyPeer(CUdeviceptr dst, void *dctx, CUdeviceptr src, void *sctx, size_t n) {
	int to = *(int *)dctx, from = *(int *)sctx;
	if (from >= 16 || to >= 16 || !enabled[from][to]) {
		// The real driver would stage the copy through host memory; the
		// check enables access first, so this is its bug.
		return 1;
	}
	int dev;
	const char *m = mode(&dev);
	if (strcmp(m, "segv-peer") == 0 && dev == to) {
		volatile int *p = NULL;
		*p = 1;
	}
	if (strcmp(m, "slow-peer") == 0 && dev == to) {
		// The Go runtime of the process that loads this library
		// signals its threads (preemption), which cuts a plain sleep
		// short: sleep out the remainder after each interruption.
		struct timespec left = {0, 250000000};
		while (nanosleep(&left, &left) != 0 && errno == EINTR) {
		}
	}
	memcpy((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return 0;
}

CUresult cuCtxDestroy_v2(void *ctx) {
	free(ctx);
	current = -1;
	return 0;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	*free = (size_t)15 << 30;
	*total = (size_t)16 << 30;
	return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	if (failing("oom")) {
		return 2;
	}
	*p = (CUdeviceptr)(uintptr_t)calloc(1, n);
	return 0;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	free((void *)(uintptr_t)p);
	return 0;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	memcpy((void *)(uintptr_t)dst, src, n);
	return 0;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	memcpy(dst, (void *)(uintptr_t)src, n);
	return 0;
}

CUresult cuModuleLoadDataEx(void **mod, const void *image, unsigned int n, int *opts, void **vals) {
	const char *ptx = image;
	char *log = NULL;
	size_t logsize = 0;
	for (unsigned int i = 0; i < n; i++) {
		if (opts[i] == 5) {
			log = vals[i];
		} else if (opts[i] == 6) {
			logsize = (size_t)(uintptr_t)vals[i];
		}
	}
	if (failing("ptx")) {
		if (log != NULL && logsize > 0) {
			snprintf(log, logsize, "ptxas application ptx input, line 1; fatal   : Unsupported .version 3.0; current version is '2.3'");
		}
		return 222;
	}
	if (strncmp(ptx, ".version 3.0\n", 13) != 0 || strstr(ptx, "\n.target sm_30\n") == NULL ||
	    strstr(ptx, ".entry vector_add(") == NULL) {
		if (log != NULL && logsize > 0) {
			snprintf(log, logsize, "not gpuenv's vector_add PTX");
		}
		return 218;
	}
	*mod = malloc(1);
	return 0;
}

CUresult cuModuleGetFunction(void **f, void *mod, const char *name) {
	if (strcmp(name, "vector_add") != 0) {
		return 500;
	}
	*f = mod;
	return 0;
}

CUresult cuModuleUnload(void *mod) {
	free(mod);
	return 0;
}

CUresult cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
		void *stream, void **params, void **extra) {
	if (failing("segv")) {
		volatile int *p = NULL;
		*p = 1;
	}
	float *a = (float *)(uintptr_t)*(CUdeviceptr *)params[0];
	float *b = (float *)(uintptr_t)*(CUdeviceptr *)params[1];
	float *c = (float *)(uintptr_t)*(CUdeviceptr *)params[2];
	unsigned int n = *(unsigned int *)params[3];
	if ((unsigned long long)gx * bx < n || gy != 1 || gz != 1 || by != 1 || bz != 1) {
		return 1;
	}
	int wrong = failing("wrong");
	for (unsigned int i = 0; i < n; i++) {
		c[i] = wrong ? a[i] - b[i] : a[i] + b[i];
	}
	return 0;
}

CUresult cuCtxSynchronize(void) {
	if (failing("hang")) {
		for (;;) {
			pause();
		}
	}
	return 0;
}

static const struct {
	int code;
	const char *name, *text;
} errors[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
};

CUresult cuGetErrorName(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == r) {
			*s = errors[i].name;
			return 0;
		}
	}
	return 1;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == r) {
			*s = errors[i].text;
			return 0;
		}
	}
	return 1;
}
