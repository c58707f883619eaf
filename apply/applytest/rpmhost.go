package applytest

import (
	"context"
	"os"
	"path/filepath"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// The versions of the RPM fixture: a driver at DnfDriverOld, locked,
// that the standard dnf plan moves to DnfDriverNew.
const (
	DnfDriverOld = "3:550.54.15-1.el9"
	DnfDriverNew = "3:560.35.03-1.el9"
	// DnfLongName is a dependency whose name is longer than the name
	// column of dnf's transaction table.
	DnfLongName = "cuda-nvml-devel-12-4-with-a-long-name"
)

func dnfDriver(evr string) []RPM {
	ver, rel := "550.54.15", "1.el9"
	if evr == DnfDriverNew {
		ver = "560.35.03"
	}
	return []RPM{
		{Name: "libnvidia-ml", Epoch: "3", Version: ver, Release: rel, Files: map[string]string{
			"/usr/lib64/libnvidia-ml.so.1": "NVML " + ver + "\n",
		}},
		{Name: "nvidia-driver-cuda", Epoch: "3", Version: ver, Release: rel, Requires: "libnvidia-ml = " + evr, Files: map[string]string{
			"/usr/bin/nvidia-smi":                       "#!nvidia-smi " + ver + "\n",
			"/usr/share/doc/nvidia-driver-cuda/version": ver + "\n",
		}},
	}
}

// OldTool is installed and in the repository; the standard dnf plan
// removes it, and with it Dependent, which requires it.
var (
	OldTool   = RPM{Name: "nvidia-old-tool", Version: "1.0", Release: "1.el9", Arch: "noarch", Files: map[string]string{"/usr/bin/nvidia-old-tool": "old tool\n"}}
	Dependent = RPM{Name: "nvidia-old-tool-plugin", Version: "1.0", Release: "1.el9", Arch: "noarch", Requires: "nvidia-old-tool", Files: map[string]string{"/usr/lib/old-tool/plugin.so": "plugin\n"}}
	// Orphan is installed but no repository has it: upgrading or
	// removing it cannot be made reversible offline.
	Orphan    = RPM{Name: "nvidia-persistenced", Epoch: "3", Version: "550.40.07", Release: "1.el9", Files: map[string]string{"/usr/bin/nvidia-persistenced": "persistenced 550.40.07\n"}}
	OrphanNew = RPM{Name: "nvidia-persistenced", Epoch: "3", Version: "560.35.03", Release: "1.el9", Files: map[string]string{"/usr/bin/nvidia-persistenced": "persistenced 560.35.03\n"}}
)

// RepoRPMs are what the fixture's repository offers.
func RepoRPMs() []RPM {
	return append(append(dnfDriver(DnfDriverOld), dnfDriver(DnfDriverNew)...),
		OldTool, Dependent, OrphanNew,
		RPM{Name: "cuda-cudart-12-4", Version: "12.4.127", Release: "1", Files: map[string]string{
			"/usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12": "cudart 12.4.127\n",
		}},
		RPM{Name: DnfLongName, Version: "12.4.127", Release: "1", Files: map[string]string{
			"/usr/local/cuda-12.4/include/nvml.h": "nvml.h 12.4\n",
		}},
		RPM{Name: "cuda-toolkit-12-4", Version: "12.4.1", Release: "1", Requires: "cuda-cudart-12-4, " + DnfLongName, Files: map[string]string{
			"/usr/local/cuda-12.4/version.json": `{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}` + "\n",
		}},
	)
}

// RPMFixture is a fake RPM host laid out by BuildRPMHost.
type RPMFixture struct {
	Dir  string // what BuildRPMHost laid it out in, and OpenRPMHost takes
	Root string
	Repo string // EnvRPMRepo
	Env  []string
}

// OpenRPMHost names the parts of a host BuildRPMHost laid out in dir,
// for a process other than the one that built it.
func OpenRPMHost(dir string) *RPMFixture {
	f := &RPMFixture{Dir: dir, Root: filepath.Join(dir, "root"), Repo: filepath.Join(dir, "repo")}
	f.Env = []string{EnvRPMRepo + "=" + f.Repo}
	return f
}

// BuildRPMHost lays out an RPM host in dir: dir/root with the driver at
// DnfDriverOld (libnvidia-ml locked by versionlock), OldTool with its
// Dependent, and Orphan installed from a file outside the repository;
// the repository dir/repo. Packages are installed with the fakes
// themselves.
func BuildRPMHost(dir string) (*RPMFixture, error) {
	f := OpenRPMHost(dir)
	if err := WriteRPMRepo(f.Repo, RepoRPMs()...); err != nil {
		return nil, err
	}
	conf := filepath.Join(f.Root, VersionlockConf)
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, []byte("[main]\nenabled = 1\nlocklist = "+DefaultLocklist+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := WriteRPMRepo(filepath.Join(f.Root, "tmp"), Orphan); err != nil {
		return nil, err
	}
	r := &Runner{Env: f.Env}
	run := func(argv ...string) error {
		return r.Run(context.Background(), host.Command{Argv: append([]string{"chroot", f.Root}, argv...)})
	}
	old := dnfDriver(DnfDriverOld)
	for _, s := range [][]string{
		{"dnf", "-y", "install", old[0].Name + "-" + DnfDriverOld, old[1].Name + "-" + DnfDriverOld, Dependent.Name},
		{"dnf", "-y", "install", "/tmp/" + Orphan.FileName()},
		{"dnf", "-y", "versionlock", "add", "libnvidia-ml"},
	} {
		if err := run(s...); err != nil {
			return nil, err
		}
	}
	return f, os.RemoveAll(filepath.Join(f.Root, "tmp"))
}

// DnfOp is a dnf package operation.
func DnfOp(op plan.PackagesOp) plan.Operation {
	op.Manager = "dnf"
	return plan.Operation{Kind: plan.OpPackages, Packages: &op}
}

// DnfPlan moves the RPM host's driver to DnfDriverNew (releasing its
// lock and locking both packages again), installs the CUDA toolkit with
// its dependencies, and removes OldTool (taking Dependent with it).
func DnfPlan() *plan.Plan {
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SpecDigest: "sha256:dnf", Steps: []plan.Step{
		{Address: "driver", Action: plan.Update, Reason: "driver 550 is older than the spec's 560",
			Operations: []plan.Operation{DnfOp(plan.PackagesOp{
				Unhold:  []string{"libnvidia-ml"},
				Install: []plan.PackagePin{{Name: "libnvidia-ml", Version: DnfDriverNew}, {Name: "nvidia-driver-cuda", Version: DnfDriverNew}},
				Hold:    []string{"libnvidia-ml", "nvidia-driver-cuda"},
			})}},
		{Address: "cuda", Action: plan.Create, Reason: "CUDA 12.4 is not installed",
			Operations: []plan.Operation{DnfOp(plan.PackagesOp{
				Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}},
			})}},
		{Address: "package.nvidia-old-tool", Action: plan.Delete, Reason: "absent = true",
			Operations: []plan.Operation{DnfOp(plan.PackagesOp{Remove: []string{OldTool.Name}})}},
	}}
	return p
}
