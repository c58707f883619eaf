package cudacheck

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/providers/probe/cudacheck/cudachecktest"
)

// childVar makes the test binary the check's child, as gpuenv's hidden
// command makes gpuenv: a crash of the fake driver kills that process, not
// the test.
const childVar = "GPUENV_CUDACHECK_TEST_CHILD"

func TestMain(m *testing.M) {
	if from := os.Getenv(childVar); from != "" {
		n, _ := strconv.Atoi(from)
		os.Exit(Child(os.Stdout, n))
	}
	os.Exit(m.Run())
}

// fakeDriver builds the fake libcuda.so.1 once per test and returns its
// directory.
func fakeDriver(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc to build the fake libcuda.so.1")
	}
	dir, err := cudachecktest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// starter runs this test binary as the child, with the fake driver first
// on the loader's path and env added.
func starter(libDir string, env ...string) Start {
	return func(ctx context.Context, from int, stdout, stderr io.Writer) error {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), childVar+"="+strconv.Itoa(from), "LD_LIBRARY_PATH="+libDir)
		cmd.Env = append(cmd.Env, env...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		return cmd.Run()
	}
}

func okDevice(i int, uuid string) Device {
	return Device{
		Ordinal: i, Name: "Fake GPU " + strconv.Itoa(i), UUID: uuid, Capability: "8.0",
		TotalMemory: 16 << 30, FreeMemory: 15 << 30, Passed: slices.Clone(DeviceSteps),
	}
}

const (
	uuid0 = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
	uuid1 = "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"
	uuid2 = "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f"
)

func TestRun(t *testing.T) {
	lib := fakeDriver(t)
	passedBefore := func(s Step) []Step { return slices.Clone(DeviceSteps[:slices.Index(DeviceSteps, s)]) }
	tests := []struct {
		name string
		env  []string
		want Report
	}{
		{
			name: "every device adds the vectors",
			want: Report{DriverVersion: "12.4", Count: 2, Devices: []Device{okDevice(0, uuid0), okDevice(1, uuid1)}},
		},
		{
			name: "no device",
			env:  []string{"FAKE_CUDA=no-device"},
			want: Report{Count: -1, Failure: &Failure{Step: StepInit, Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Message: "no CUDA-capable device is detected"}, Devices: []Device{}},
		},
		{
			name: "driver and kernel module do not match",
			env:  []string{"FAKE_CUDA=mismatch"},
			want: Report{Count: -1, Failure: &Failure{Step: StepInit, Code: 803, Name: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", Message: "system has unsupported display driver / cuda driver combination"}, Devices: []Device{}},
		},
		{
			name: "the JIT refuses the PTX on every device",
			env:  []string{"FAKE_CUDA=ptx"},
			want: Report{DriverVersion: "12.4", Count: 2, Devices: []Device{
				failedDevice(okDevice(0, uuid0), passedBefore(StepModule), &Failure{Step: StepModule, Code: 222, Name: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
					Message: "the provided PTX was compiled with an unsupported toolchain.",
					Log:     "ptxas application ptx input, line 1; fatal   : Unsupported .version 3.0; current version is '2.3'"}),
				failedDevice(okDevice(1, uuid1), passedBefore(StepModule), &Failure{Step: StepModule, Code: 222, Name: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
					Message: "the provided PTX was compiled with an unsupported toolchain.",
					Log:     "ptxas application ptx input, line 1; fatal   : Unsupported .version 3.0; current version is '2.3'"}),
			}},
		},
		{
			name: "out of memory on one device",
			env:  []string{"FAKE_CUDA=oom:1"},
			want: Report{DriverVersion: "12.4", Count: 2, Devices: []Device{
				okDevice(0, uuid0),
				failedDevice(okDevice(1, uuid1), passedBefore(StepAlloc), &Failure{Step: StepAlloc, Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"}),
			}},
		},
		{
			name: "a wrong sum",
			env:  []string{"FAKE_CUDA=wrong:0"},
			want: Report{DriverVersion: "12.4", Count: 2, Devices: []Device{
				failedDevice(okDevice(0, uuid0), passedBefore(StepCompare), &Failure{Step: StepCompare, Message: "65535 of 65536 sums are wrong; the first, element 1, is -1 where 3 was expected"}),
				okDevice(1, uuid1),
			}},
		},
		{
			// The crash takes the child down in the launch on GPU 1; GPU
			// 2 is checked by a second child.
			name: "the driver crashes on one device",
			env:  []string{"FAKE_CUDA=segv:1", "FAKE_CUDA_DEVICES=3"},
			want: Report{DriverVersion: "12.4", Count: 3, Devices: []Device{
				okDevice(0, uuid0),
				crashed(okDevice(1, uuid1), passedBefore(StepLaunch), StepLaunch, "was killed by signal 11 (segmentation fault)"),
				okDevice(2, uuid2),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Run(context.Background(), starter(lib, tt.env...), 30*time.Second)
			tt.want.Library = Library
			for i := range got.Devices {
				got.Devices[i].KernelSeconds = 0
				// A device that passed had its copies timed: the fake
				// driver's are memcpy of host memory it allocates with
				// calloc, having no page-locked memory to offer.
				d := &got.Devices[i]
				if b := d.Bandwidth; d.OK() != (b != nil) || b != nil && (b.HostToDevice <= 0 || b.DeviceToHost <= 0 || b.Pinned || b.Bytes != 64<<20 || b.Error != "") {
					t.Errorf("device %d (ok %v): bandwidth %+v", i, d.OK(), b)
				}
				d.Bandwidth = nil
			}
			// Both devices passed only in the first case, whose two
			// ordered pairs are copied; a pair needs two devices that
			// passed in one child.
			if tt.env == nil {
				if len(got.Peers) != 2 || !got.Peers[0].Access || got.Peers[0].From != 0 || got.Peers[0].To != 1 || got.Peers[0].GBs <= 0 || got.Peers[1].From != 1 || got.Peers[1].ToUUID != uuid0 {
					t.Errorf("peers %+v", got.Peers)
				}
			} else if len(got.Peers) != 0 || got.PeersSkipped != "" {
				t.Errorf("peers %+v (%s)", got.Peers, got.PeersSkipped)
			}
			got.Peers = nil
			got.Stderr = ""
			if d := cmp.Diff(&tt.want, got); d != "" {
				t.Errorf("report (-want +got):\n%s", d)
			}
			if got.OK() != (tt.env == nil) {
				t.Errorf("OK() = %v", got.OK())
			}
		})
	}
}

func failedDevice(d Device, passed []Step, f *Failure) Device {
	d.Passed, d.Failure = passed, f
	if slices.Index(DeviceSteps, f.Step) <= slices.Index(DeviceSteps, StepContext) {
		d.FreeMemory = 0
	}
	return d
}

func crashed(d Device, passed []Step, at Step, how string) Device {
	// The device line is lost with the child; the parent knows the step,
	// and what the device said before the context.
	d.Passed, d.FreeMemory, d.Crashed = passed, 0, how
	d.Failure = &Failure{Step: at, Message: "the check's process " + how}
	return d
}

// TestRunTimeout: a device that never finishes is killed at the timeout,
// and the devices after it are not tried.
func TestRunTimeout(t *testing.T) {
	lib := fakeDriver(t)
	start := time.Now()
	got := Run(context.Background(), starter(lib, "FAKE_CUDA=hang:0"), 500*time.Millisecond)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	if len(got.Devices) != 1 || !got.Devices[0].TimedOut || got.Devices[0].Failure.Step != StepLaunch ||
		got.Devices[0].Failure.Message != "the check's process killed after 500ms without finishing" {
		t.Errorf("devices %+v", got.Devices)
	}
	if got.OK() {
		t.Error("OK after a timeout")
	}
}

// TestRunWithoutDriver: no libcuda.so.1 where the loader looks, or one
// that lacks the entry points.
func TestRunWithoutDriver(t *testing.T) {
	if out, _ := exec.Command("ldconfig", "-p").Output(); strings.Contains(string(out), "libcuda.so.1 ") {
		t.Skip("this machine has a CUDA driver library")
	}
	got := Run(context.Background(), starter(t.TempDir()), 30*time.Second)
	if got.Failure == nil || got.Failure.Step != StepLoad || !strings.Contains(got.Failure.Message, "libcuda.so.1: cannot open shared object file") {
		t.Errorf("failure %+v", got.Failure)
	}

	dir := t.TempDir()
	src := filepath.Join(dir, "old.c")
	if err := os.WriteFile(src, []byte("int cuInit(unsigned f) { return 0; }\nint cuDriverGetVersion(int *v) { *v = 3020; return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v\n%s", err, out)
	}
	got = Run(context.Background(), starter(dir), 30*time.Second)
	want := &Failure{Step: StepLoad, Message: "libcuda.so.1 has no cuDeviceGetCount: a driver older than the check needs (CUDA 6.0), or not NVIDIA's library"}
	if d := cmp.Diff(want, got.Failure); d != "" {
		t.Errorf("failure (-want +got):\n%s", d)
	}
}

// TestRunNotStarted: a child that cannot be started is said so.
func TestRunNotStarted(t *testing.T) {
	start := func(ctx context.Context, _ int, stdout, stderr io.Writer) error {
		cmd := exec.CommandContext(ctx, filepath.Join(t.TempDir(), "missing"))
		return cmd.Run()
	}
	got := Run(context.Background(), start, time.Second)
	if !strings.Contains(got.NotStarted, "no such file") || got.OK() {
		t.Errorf("report %+v", got)
	}
}
