package applytest

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

//go:embed testdata/host.txtar
var hostTxtar []byte

// Fixture is a fake host laid out by BuildHost.
type Fixture struct {
	Dir     string // what BuildHost laid it out in, and OpenHost takes
	Root    string // the root directory
	Archive string // the fake apt archive (EnvArchive)
	Index   string // the Python package index, as a file:// URL
	// Env is what fakes need in their environment: EnvArchive.
	Env []string
}

// The versions the fixture starts with and the standard plan moves to.
const (
	DriverOld = "535.261.03-1"
	DriverNew = "535.309.01-1"
	TorchOld  = "2.4.1+cu121"
	TorchNew  = "2.5.1+cu124"
	Venv      = "/opt/ml"
	NewVenv   = "/opt/jax"
)

// DriverDebs are the driver packages at version v.
func DriverDebs(v string) []Deb {
	return []Deb{
		{Name: "libnvidia-ml1", Version: v, Files: map[string]string{
			"/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1": "NVML " + v + "\n",
		}},
		{Name: "nvidia-smi", Version: v, Depends: "libnvidia-ml1 (= " + v + ")", Files: map[string]string{
			"/usr/bin/nvidia-smi":               "#!nvidia-smi " + v + "\n",
			"/usr/share/doc/nvidia-smi/version": v + "\n",
		}},
	}
}

// ArchiveDebs are what the fake archive offers. The installed
// libnvidia-ml1 535.261.03-1 is deliberately missing, as an archive that
// moved on has lost it: saving it for rollback needs dpkg-repack.
func ArchiveDebs() []Deb {
	old := DriverDebs(DriverOld)
	return append([]Deb{old[1]}, append(DriverDebs(DriverNew),
		Deb{Name: "cuda-cudart-12-4", Version: "12.4.127-1", Files: map[string]string{
			"/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12": "cudart 12.4.127\n",
		}},
		Deb{Name: "cuda-toolkit-12-4", Version: "12.4.1-1", Depends: "cuda-cudart-12-4", Files: map[string]string{
			"/usr/local/cuda-12.4/version.json": `{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}` + "\n",
			"/usr/local/cuda-12.4/bin/nvcc":     "#!nvcc 12.4\n",
		}},
	)...)
}

// Wheels are what the Python index offers.
func Wheels() []Wheel {
	torch := func(v string) Wheel {
		return Wheel{Name: "torch", Version: v, Files: map[string]string{
			"torch/__init__.py": "from .version import __version__\n",
			"torch/version.py":  fmt.Sprintf("__version__ = '%s'\ncuda = '%s'\n", v, "12."+v[len(v)-1:]),
		}}
	}
	return []Wheel{
		torch(TorchOld), torch(TorchNew),
		{Name: "jax", Version: "0.4.30", Files: map[string]string{"jax/__init__.py": "__version__ = '0.4.30'\n"}},
	}
}

// OpenHost names the parts of a host BuildHost laid out in dir, for a
// process other than the one that built it.
func OpenHost(dir string) *Fixture {
	f := &Fixture{Dir: dir, Root: filepath.Join(dir, "root"), Archive: filepath.Join(dir, "archive"), Index: "file://" + filepath.Join(dir, "index", "simple") + "/"}
	f.Env = []string{EnvArchive + "=" + f.Archive}
	return f
}

// BuildHost lays out the standard fake host in dir: dir/root, the archive
// dir/archive and the index dir/index. Packages, the venv and the linker
// cache are installed with the fakes themselves.
func BuildHost(dir string) (*Fixture, error) {
	f := OpenHost(dir)
	if err := os.MkdirAll(f.Root, 0o755); err != nil {
		return nil, err
	}
	if err := hosttest.BuildArchive(txtar.Parse(hostTxtar), f.Root, dir); err != nil {
		return nil, err
	}
	if err := WriteArchive(f.Archive, ArchiveDebs()...); err != nil {
		return nil, err
	}
	if _, err := WriteIndex(filepath.Join(dir, "index"), Wheels()...); err != nil {
		return nil, err
	}
	// The installed driver, from package files outside the archive.
	pkgs := filepath.Join(f.Root, "tmp", "installed")
	if err := WriteArchive(pkgs, DriverDebs(DriverOld)...); err != nil {
		return nil, err
	}
	r := &Runner{Env: f.Env}
	run := func(argv ...string) error {
		return r.Run(context.Background(), host.Command{Argv: append([]string{"chroot", f.Root}, argv...)})
	}
	steps := [][]string{
		{"dpkg", "-i", "/tmp/installed/" + DriverDebs(DriverOld)[0].FileName(), "/tmp/installed/" + DriverDebs(DriverOld)[1].FileName()},
		{"apt-mark", "hold", "libnvidia-ml1"},
		{"python3", "-m", "venv", Venv},
		{Venv + "/bin/python", "-m", "pip", "install", "--index-url", f.Index, "torch==" + TorchOld},
		{"ldconfig"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return nil, err
		}
	}
	return f, os.RemoveAll(filepath.Join(f.Root, "tmp"))
}

// StandardPlan is a plan touching every kind of operation on the
// standard host: a batched apt transaction (driver upgrade of a held
// package, a toolkit with a dependency), files new, changed and removed
// (one with a follow-up command, one in a directory that does not exist),
// a group changed and one created, a unit enabled, a kernel and a device
// operation (skipped in a fixture root), a pip upgrade in an existing
// venv and an install into a new one.
func StandardPlan(index string) *plan.Plan {
	apt := func(op plan.PackagesOp) plan.Operation {
		op.Manager = "apt"
		return plan.Operation{Kind: plan.OpPackages, Packages: &op}
	}
	file := func(op plan.FileOp) plan.Operation {
		return plan.Operation{Kind: plan.OpFile, File: &op}
	}
	steps := []plan.Step{
		{Address: "driver", Action: plan.Update, Reason: "driver 535.261.03 is older than the spec's 535.309.01",
			After: map[string]string{"version": DriverNew, "packages": "libnvidia-ml1, nvidia-smi"},
			Operations: []plan.Operation{apt(plan.PackagesOp{
				Unhold:  []string{"libnvidia-ml1"},
				Install: []plan.PackagePin{{Name: "libnvidia-ml1", Version: DriverNew}, {Name: "nvidia-smi", Version: DriverNew}},
				Hold:    []string{"libnvidia-ml1", "nvidia-smi"},
			})}},
		{Address: "cuda", Action: plan.Create, Reason: "CUDA 12.4 is not installed",
			After: map[string]string{"version": "12.4.1", "package": "cuda-toolkit-12-4=12.4.1-1"},
			Operations: []plan.Operation{apt(plan.PackagesOp{
				Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}},
			})}},
		{Address: "kernel.nouveau", Action: plan.Update, Reason: "nouveau must stay off",
			Operations: []plan.Operation{
				file(plan.FileOp{Path: "/etc/modprobe.d/nvidia-blacklists-nouveau.conf", Content: "blacklist nouveau\noptions nouveau modeset=0\n", Mode: 0o644}),
				{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "rebuild_initramfs"}},
			},
			Flags: plan.Flags{NeedsReboot: true}},
		{Address: "environment", Action: plan.Update, Reason: "CUDA on PATH and the linker path",
			Operations: []plan.Operation{
				file(plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "export PATH=/usr/local/cuda-12.4/bin:$PATH\n", Mode: 0o644}),
				file(plan.FileOp{Path: "/etc/ld.so.conf.d/gpuenv.conf", Content: "/usr/local/cuda-12.4/targets/x86_64-linux/lib\n", Mode: 0o644, After: []string{"ldconfig"}}),
				file(plan.FileOp{Path: "/etc/systemd/system.conf.d/gpuenv.conf", Content: "[Manager]\nDefaultEnvironment=CUDA_DEVICE_ORDER=PCI_BUS_ID\n", Mode: 0o644}),
				file(plan.FileOp{Path: "/etc/profile.d/bash_completion.sh", Remove: true}),
			}},
		{Address: "group.video", Action: plan.Update, Reason: "members",
			Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"bob"}, Remove: []string{"alice"}}}}},
		{Address: "group.gpu", Action: plan.Create, Reason: "missing",
			Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "gpu", Create: true, Add: []string{"carol", "alice"}}}}},
		{Address: "service.nvidia-persistenced", Action: plan.Update, Reason: "persistence",
			Operations: []plan.Operation{{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true, Now: true}}}},
		{Address: "device.0", Action: plan.Update, Reason: "compute mode",
			Operations: []plan.Operation{{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-00000000-0000-0000-0000-000000000000", Setting: "compute_mode", Value: "exclusive_process"}}}},
		{Address: "framework.pytorch", Action: plan.Update, Reason: "torch 2.4.1 is older",
			After: map[string]string{"version": TorchNew, "index_url": index},
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
				Manager: "pip", Venv: Venv, IndexURL: index,
				Install: []plan.PackagePin{{Name: "torch", Version: TorchNew}},
			}}}},
		{Address: "framework.jax", Action: plan.Create, Reason: "missing",
			After: map[string]string{"version": "0.4.30", "index_url": index},
			Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
				Manager: "pip", Venv: NewVenv, Python: "/usr/bin/python3", IndexURL: index,
				Install: []plan.PackagePin{{Name: "jax", Version: "0.4.30"}},
			}}}},
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SpecDigest: "sha256:test", Steps: steps, NeedsReboot: true}
	p.Transactions = planner.Batch(p.Steps)
	return p
}

// StateDir is where the tests keep gpuenv's state inside the root.
const StateDir = "/var/lib/gpuenv"

// TempDir is a directory for one test's fixture, removed when it ends: in
// /dev/shm where there is one. Apply fsyncs every journal record, saved
// file and directory change; the tests kill processes, which keeps the
// page cache, and do not check durability against power loss, so a
// memory file system, on which fsync costs nothing, keeps them fast.
func TempDir(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "gpuenv-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return tb.TempDir()
}
