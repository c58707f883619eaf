package applytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/reload"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// KernelRelease is the running kernel of the reload host.
const KernelRelease = "6.1.0-28-amd64"

// ModuleDeb is the driver's kernel modules at package version v, built
// for KernelRelease as DKMS leaves them; signed says whether DKMS signed
// them.
func ModuleDeb(v string, signed bool) Deb {
	up, _, _ := strings.Cut(v, "-")
	deps := map[string]string{"nvidia": "", "nvidia_modeset": "nvidia", "nvidia_drm": "nvidia_modeset", "nvidia_uvm": "nvidia"}
	files := map[string]string{}
	for m, dep := range deps {
		ko := "version=" + up + "\ndepends=" + dep + "\n"
		if signed {
			ko += "signer=DKMS module signing key\n"
		}
		files["/lib/modules/"+KernelRelease+"/updates/dkms/"+m+".ko"] = ko
	}
	return Deb{Name: "nvidia-kernel-dkms", Version: v, Files: files}
}

// ReloadDebs are the driver's packages at v, kernel modules included.
func ReloadDebs(v string) []Deb { return append(DriverDebs(v), ModuleDeb(v, true)) }

// BuildReloadHost lays out in dir a running Debian 12 system with the
// driver DriverOld installed and its modules loaded (nvidia,
// nvidia_modeset, nvidia_drm, nvidia_uvm), nvidia-persistenced running,
// systemd as process 1, and an archive offering DriverOld and DriverNew:
// the host of a driver upgrade that reloads the modules. Open it with
// host.AsRunningSystem.
func BuildReloadHost(dir string) (*Fixture, error) {
	f := OpenHost(dir)
	if err := os.MkdirAll(f.Root, 0o755); err != nil {
		return nil, err
	}
	if err := hosttest.BuildArchive(txtar.Parse(hostTxtar), f.Root, dir); err != nil {
		return nil, err
	}
	if err := WriteArchive(f.Archive, append(ReloadDebs(DriverOld), ReloadDebs(DriverNew)...)...); err != nil {
		return nil, err
	}
	pkgs := filepath.Join(f.Root, "tmp", "installed")
	old := ReloadDebs(DriverOld)
	if err := WriteArchive(pkgs, old...); err != nil {
		return nil, err
	}
	for p, data := range map[string]string{
		"proc/sys/kernel/osrelease": KernelRelease + "\n",
		"proc/1/comm":               "systemd\n",
		"proc/modules":              "",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(f.Root, p)), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(f.Root, p), []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	r := &Runner{Env: f.Env}
	run := func(argv ...string) error {
		return r.Run(context.Background(), host.Command{Argv: append([]string{"chroot", f.Root}, argv...)})
	}
	install := []string{"dpkg", "-i"}
	for _, d := range old {
		install = append(install, "/tmp/installed/"+d.FileName())
	}
	for _, s := range [][]string{
		install,
		// In the order a reload loads them, so that /proc/modules
		// lists them alike after one.
		{"modprobe", "nvidia", "nvidia_modeset", "nvidia_drm", "nvidia_uvm"},
		{"systemctl", "start", "nvidia-persistenced.service"},
	} {
		if err := run(s...); err != nil {
			return nil, err
		}
	}
	return f, os.RemoveAll(filepath.Join(f.Root, "tmp"))
}

// ReloadPlan is the upgrade to DriverNew of the reload host observed in
// obs, as the planner makes it: the package transaction, then the reload
// reload.Decide allows, as operations (planned whatever it says, for the
// tests where apply must meet what the plan did not see). The tests hand
// in the driver provider's operations: this kit, like apply, imports
// nothing of the providers but host access. It fails when no nvidia module
// is loaded.
func ReloadPlan(obs *facts.Observation, o reload.Options, operations func(rp reload.Plan, version string) []plan.Operation) (*plan.Plan, error) {
	rp := reload.Decide(obs, o)
	if !rp.Loaded {
		return nil, fmt.Errorf("the reload host has no nvidia module loaded: %+v", obs.Kernel.Loaded)
	}
	var pins []plan.PackagePin
	for _, d := range ReloadDebs(DriverNew) {
		pins = append(pins, plan.PackagePin{Name: d.Name, Version: DriverNew})
	}
	up, _, _ := strings.Cut(DriverNew, "-")
	ops := append([]plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "apt", Install: pins}}},
		operations(rp, up)...)
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SpecDigest: "sha256:test", Steps: []plan.Step{{
		Address: "driver", Action: plan.Update, Reason: "driver upgrade", ReasonCode: plan.ReasonVersionMismatch,
		After:      map[string]string{"version": DriverNew, "packages": "libnvidia-ml1, nvidia-smi, nvidia-kernel-dkms"},
		Operations: ops, Flags: plan.Flags{NeedsModuleReload: true},
	}}}
	p.Transactions = planner.Batch(p.Steps)
	return p, nil
}
