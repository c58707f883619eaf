package containers_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// rpmFiles stands in for rpm -ql: it records the command and answers
// with the file list given.
type rpmFiles struct {
	argv []string
	out  string
	err  error
}

func (r *rpmFiles) Run(_ context.Context, c host.Command) error {
	r.argv = c.Argv
	io.WriteString(c.Stdout, r.out)
	if r.err != nil {
		io.WriteString(c.Stderr, "error: rpmdb open failed\n")
	}
	return r.err
}

// On an RPM host the driver's files come from rpm's database, asked once
// for every package of the driver's version.
func TestDriverFilesFromRPM(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"/usr/lib64/libcuda.so.550.54.15", "/usr/lib64/libnvidia-ml.so.550.54.15", "/usr/bin/nvidia-smi", "/usr/share/man/man1/nvidia-smi.1.gz"} {
		hosttest.WriteFile(t, dir, f, "x")
	}
	pkgs := facts.Packages{Manager: facts.DatabaseRPM, Packages: []facts.Package{
		{Name: "bash", Version: "5.1.8-9.el9", State: facts.StateInstalled},
		{Name: "nvidia-driver-NVML", Version: "3:550.54.15-1.el9", State: facts.StateInstalled},
		{Name: "nvidia-driver-cuda-libs", Version: "3:550.54.15-1.el9", State: facts.StateInstalled},
		{Name: "nvidia-container-toolkit", Version: "550.54.15-1", State: facts.StateInstalled},
	}}
	drv := facts.Driver{LibraryVersion: "550.54.15"}
	r := &rpmFiles{out: "/usr/lib64/libnvidia-ml.so.550.54.15\n/usr/lib64/libcuda.so.1\n/usr/lib64/libcuda.so.550.54.15\n(contains no files)\n/usr/bin/nvidia-smi\n/usr/share/man/man1/nvidia-smi.1.gz\n"}
	h := hosttest.New(t, dir, host.WithRunner(r))
	c, warns := containers.Observe(context.Background(), h, pkgs, drv)
	if want := []string{"chroot", dir, "rpm", "-ql", "--", "nvidia-driver-NVML", "nvidia-driver-cuda-libs"}; !slices.Equal(r.argv, want) {
		t.Errorf("ran %q, want %q", r.argv, want)
	}
	// libcuda.so.1 is listed and missing; the man page is no driver file.
	if want := []string{"/usr/bin/nvidia-smi", "/usr/lib64/libcuda.so.550.54.15", "/usr/lib64/libnvidia-ml.so.550.54.15"}; !slices.Equal(c.DriverFiles, want) {
		t.Errorf("driver files %q, want %q", c.DriverFiles, want)
	}
	hosttest.NoWarnings(t, warns)

	// rpm failing leaves no file list and says why; the CDI spec is then
	// not made, as without a driver.
	r = &rpmFiles{err: errors.New("exit status 1")}
	c, warns = containers.Observe(context.Background(), hosttest.New(t, dir, host.WithRunner(r)), pkgs, drv)
	if len(c.DriverFiles) != 0 || len(warns) != 1 || !strings.Contains(warns[0].Message, "listing the files of driver 550.54.15's packages (nvidia-driver-NVML, nvidia-driver-cuda-libs): exit status 1 error: rpmdb open failed") {
		t.Errorf("files %q, warnings %+v", c.DriverFiles, warns)
	}
	c.GPUs = []facts.ContainerGPU{{Index: 0, Minor: 0}}
	if _, err := cdi.GenerateCDI(&c, []facts.DeviceNode{{Path: "/dev/nvidia0"}}, nil); err == nil || !strings.Contains(err.Error(), "no file of driver \"550.54.15\"") {
		t.Errorf("a spec without the driver's files: %v", err)
	}
}
