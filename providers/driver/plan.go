package driver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/reload"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// PersistencedUnit is the service that keeps the driver initialised.
const PersistencedUnit = "nvidia-persistenced.service"

// persistencedWants is the link systemctl enable creates for the unit,
// which ObserveUnit looks for.
const persistencedWants = "/etc/systemd/system/multi-user.target.wants/" + PersistencedUnit

// Provider plans the driver: its packages ("driver"), the removal of
// driver packages that conflict with them ("driver.purge"), holding them
// ("driver.hold"), and nvidia-persistenced ("driver.persistence").
// It reads the service's enablement from the observed units; an
// observation without the unit judges persistence from NVML alone.
type Provider struct{}

var _ kind.Planner = Provider{}

// Plan compares the resolved driver with the installed packages.
func (p Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil || req.Desired.Driver == nil {
		return resp
	}
	d := req.Desired.Driver
	obs := req.Facts
	if d.Absent {
		if s := removeDriver(obs, req.Desired.Manager); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
		return resp
	}
	if d.FromHost {
		// The host's driver, mounted in by the container toolkit: no
		// package of it belongs in the container.
		return resp
	}
	install, err := planPackages(ctx, req)
	var re replaceError
	if errors.As(err, &re) {
		resp.Diagnostics = append(resp.Diagnostics, re.diag)
		return resp
	}
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, pkgkit.NoVersion("driver", err, d.Block.Version.RangeOr(d.Block.DefRange)))
		return resp
	}
	fabric, err := planFabric(ctx, req, install)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, noFabric(err, d.Block.Version.RangeOr(d.Block.DefRange)))
		return resp
	}
	if fabric != nil {
		resp.Steps = append(resp.Steps, *fabric)
	}
	if install != nil && install.ReasonCode == plan.ReasonReplaceRequested {
		// A reinstall leaves the driver as the spec has it: what is
		// planned around a driver that changes (purge, holds) is not.
		resp.Steps = append(resp.Steps, *install)
		install = nil
	} else if install != nil {
		resp.Warnings = append(resp.Warnings, kernelsWithoutModule(req, install)...)
		resp.Steps = append(resp.Steps, *install)
		if purge := purgeStep(obs, d, req.Desired.Manager); purge != nil {
			// The reload after the install puts the new module in
			// the old one's place: nothing waits for a reboot.
			if install.Flags.NeedsModuleReload && !install.Flags.NeedsReboot {
				purge.Flags.NeedsReboot = false
			}
			resp.Steps = append(resp.Steps, *purge)
		}
	}
	if hold := holdStep(obs, d, install, req.Desired.Manager, inPlace(obs, d, req.Desired.Manager)); hold != nil {
		resp.Steps = append(resp.Steps, *hold)
	}
	if s := p.persistenceStep(obs, d); s != nil {
		resp.Steps = append(resp.Steps, *s)
	}
	return resp
}

// planPackages returns the "driver" step, or nil when the installed
// packages already satisfy the spec.
func planPackages(ctx context.Context, req *planner.Request) (*plan.Step, error) {
	d := req.Desired.Driver
	obs := req.Facts
	manager := req.Desired.Manager
	names := pkgkit.Names(d.Packages)
	installed := map[string]facts.Package{}
	for _, n := range names {
		if pkg, ok := pkgdb.Installed(obs.Packages, n, pkgdb.Configured); ok {
			installed[n] = pkg
		}
	}
	before := map[string]string{}
	mainPkg, haveMain := installed[names[0]]
	if haveMain {
		before["version"] = mainPkg.Version
		// Sized up front: this runs on every plan, converged or not.
		present := slices.AppendSeq(make([]string, 0, len(installed)), maps.Keys(installed))
		slices.Sort(present)
		before["packages"] = strings.Join(present, ", ")
	}
	if f := obs.Driver.ModuleFlavor; f != "" {
		before["kernel_modules"] = f
	}
	if v := obs.Driver.ModuleVersion; v != "" {
		before["loaded_module"] = v
	}
	if len(installed) == len(names) && haveMain {
		// One driver: for apt every package at the main one's version,
		// for dnf at its upstream version (NVIDIA's RPMs of one driver
		// differ in epoch and release: pkgdb.Match).
		same := true
		for _, pkg := range installed {
			_, ok := pkgdb.Match(string(manager), mainPkg.Version, []string{pkg.Version})
			same = same && ok
		}
		up, err := pkgdb.UpstreamVersion(string(manager), mainPkg.Version)
		if same && err == nil && d.Versions.Check(up) {
			if req.Replacing("driver") {
				return reinstallDriver(ctx, req, names, mainPkg, before)
			}
			return nil, nil
		}
	}
	if len(inPlace(obs, d, manager)) > 0 {
		return nil, nil
	}
	picked, err := pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{
		Manager: manager, Packages: d.Packages, Versions: d.Versions,
		OS: pkgkit.OSID(obs.OS), OSVersion: obs.OS.VersionID, Pending: pkgkit.Pending(req),
		Archive: req.Desired.Archive, Source: d.Source, Adds: pkgkit.Adds(req, d.Source),
	})
	if err != nil {
		return nil, err
	}
	op := picked.Install(manager, d.Packages)
	action := plan.Create
	code := plan.ReasonMissing
	var why []string
	switch {
	case haveMain && mainPkg.Version != picked.Version:
		action = plan.Update
		op.AllowDowngrade = picked.Downgrades(manager, mainPkg.Version)
		code = plan.ReasonVersionMismatch
		why = append(why, fmt.Sprintf("the installed %s %s does not satisfy %s", names[0], mainPkg.Version, d.Versions.Quoted()))
	case haveMain:
		action = plan.Update
		var missing []string
		for _, n := range names {
			if _, ok := installed[n]; !ok {
				missing = append(missing, n)
			}
		}
		code = plan.ReasonIncomplete
		why = append(why, fmt.Sprintf("the package %s is installed without %s", names[0], strings.Join(missing, ", ")))
	case len(conflicting(obs, d)) > 0:
		// Another driver's packages are installed: this one takes their
		// place (driver.purge removes them first).
		action = plan.Replace
		code = plan.ReasonVariantMismatch
		why = append(why, fmt.Sprintf("the installed %s are another driver than the spec's", strings.Join(conflicting(obs, d), ", ")))
	default:
		why = append(why, fmt.Sprintf("no %s driver package is installed", d.Source))
	}
	if cur := obs.Driver.ModuleFlavor; cur != "" && d.KernelModules != spec.KernelModulesNone && cur != string(d.KernelModules) {
		action = plan.Replace
		why = append(why, fmt.Sprintf("the loaded module is the %s flavour and the spec asks for %s modules", cur, d.KernelModules))
	}
	installs := strings.Join(names, ", ") + " " + pkgkit.ShownVersion(picked.Version)
	if len(picked.Versions) > 0 {
		// A dnf set shares its upstream version only: each package is
		// shown at the EVR it is pinned at.
		var each []string
		for _, pin := range op.Install {
			each = append(each, pin.Name+" "+pin.Version)
		}
		installs = strings.Join(each, ", ")
	}
	why = append(why, fmt.Sprintf("installs %s (%s kernel modules)", installs, d.KernelModules))
	signed := d.Signed.Pins()
	for _, p := range signed {
		op.Install = append(op.Install, plan.PackagePin{Name: p.Name, Version: p.Version})
	}
	switch {
	case len(signed) > 0:
		why = append(why, signedWhy(d))
	case d.ModulesWhy != "":
		why = append(why, d.ModulesWhy)
	}
	if d.KernelModules == spec.KernelModulesNone {
		why = append(why, "the driver's userspace only: nvidia-smi, NVML and the CUDA driver library, with what they depend on at exactly this version (nvidia-alternative, libnvidia-ptxjitcompiler1 …); their recommended kernel module must not be installed with them")
	}
	if d.FloorFor != "" {
		why = append(why, fmt.Sprintf("%s needs %s or newer", d.FloorFor, d.Floor))
	}
	step := &plan.Step{
		Address:    "driver",
		Action:     action,
		After:      map[string]string{"version": pkgkit.ShownVersion(picked.Version), "packages": strings.Join(names, ", "), "kernel_modules": string(d.KernelModules), "source": string(d.Source)},
		Reason:     picked.Reason(why),
		ReasonCode: code,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "driver.purge", "kernel.nouveau", "kernel.headers"),
	}
	if len(before) > 0 {
		step.Before = before
	}
	if len(signed) > 0 {
		step.After[plan.AfterSignedModules] = planner.ShownPins(signed)
	}
	if d.KernelModules != spec.KernelModulesNone {
		step.Flags.NeedsReboot = true
		// Ubuntu's signed modules come built: nothing is compiled, and
		// the kernel's own key signed them.
		step.Flags.BuildsKernelModule = len(signed) == 0
		if obs.Driver.ModuleVersion != "" {
			step.Flags.NeedsModuleReload = true
			step.Flags.InterruptsGPUProcesses = gpuBusy(obs)
			planReload(step, obs, manager, picked.Version, req.InterruptGPUProcesses)
		}
	}
	return step, nil
}

// reinstallDriver is the "driver" step -replace plans when the installed
// driver matches the spec: its packages reinstalled at their installed
// versions (with Ubuntu's signed modules where installed), then the module
// reload a driver change gets, so that the module loaded is the one
// reinstalled; where the modules cannot be reloaded the step needs a
// reboot and says why.
func reinstallDriver(ctx context.Context, req *planner.Request, names []string, mainPkg facts.Package, before map[string]string) (*plan.Step, error) {
	d := req.Desired.Driver
	obs := req.Facts
	manager := req.Desired.Manager
	// The packages the spec names may be metapackages; the module comes
	// from the driver packages beside them (nvidia-dkms-550-open), which
	// a reinstall must rewrite too: those at the same version.
	all := slices.Clone(names)
	for _, p := range obs.Packages.Packages {
		if p.State != facts.StateInstalled || !planner.DriverPackage(p.Name) || slices.Contains(all, p.Name) {
			continue
		}
		if _, ok := pkgdb.Match(string(manager), mainPkg.Version, []string{p.Version}); ok {
			all = append(all, p.Name)
		}
	}
	op := repository.Reinstall(obs, manager, all)
	var signed []planner.SignedPackage
	for _, p := range d.Signed.Pins() {
		if inst, ok := pkgdb.Installed(obs.Packages, p.Name, pkgdb.Configured); ok && inst.Version == p.Version {
			signed = append(signed, p)
			op.Install = append(op.Install, plan.PackagePin{Name: p.Name, Version: p.Version})
		}
	}
	if diag := repository.Reinstallable(ctx, req.Candidates, "driver", op, d.Block.Version.RangeOr(d.Block.DefRange)); diag != nil {
		return nil, replaceError{diag}
	}
	shown := make([]string, 0, len(op.Install))
	for _, p := range op.Install {
		if !slices.ContainsFunc(signed, func(s planner.SignedPackage) bool { return s.Name == p.Name }) {
			shown = append(shown, p.Name)
		}
	}
	before = maps.Clone(before)
	before["packages"] = strings.Join(shown, ", ")
	after := maps.Clone(before)
	step := &plan.Step{
		Address:    "driver",
		Action:     plan.Replace,
		Before:     before,
		After:      after,
		Reason:     repository.ReinstallReason(op),
		ReasonCode: plan.ReasonReplaceRequested,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  append(pkgkit.Deps(req), "kernel.nouveau", "kernel.headers"),
	}
	if len(signed) > 0 {
		step.After[plan.AfterSignedModules] = planner.ShownPins(signed)
	}
	if d.KernelModules != spec.KernelModulesNone {
		step.Flags.NeedsReboot = true
		step.Flags.BuildsKernelModule = len(signed) == 0
		if obs.Driver.ModuleVersion != "" {
			step.Flags.NeedsModuleReload = true
			step.Flags.InterruptsGPUProcesses = gpuBusy(obs)
			planReload(step, obs, manager, mainPkg.Version, req.InterruptGPUProcesses)
		}
	}
	return step, nil
}

// replaceError carries the diagnostic of a -replace that cannot be
// carried out, which the driver's Plan reports as it is.
type replaceError struct{ diag *hcl.Diagnostic }

func (e replaceError) Error() string { return e.diag.Detail }

// planReload adds to a driver step that changes the loaded module the
// reload that puts the new module in its place, after the package
// transaction, when the facts allow one; otherwise the step keeps its
// reboot and its reason says why the modules cannot be reloaded.
func planReload(step *plan.Step, obs *facts.Observation, manager plan.Manager, version string, interrupt bool) {
	rp := reload.Decide(obs, reload.Options{Interrupt: interrupt, BuildsModule: step.Flags.BuildsKernelModule})
	want, err := pkgdb.UpstreamVersion(string(manager), version)
	if version == "" || err != nil {
		rp.Blockers = append(rp.Blockers, "the new version is known only after apply")
	}
	if !rp.Possible() {
		// Off the running system a reload is never the question: the
		// root's kernel is not running, and its next boot loads the
		// new module.
		if obs.Init.Live {
			step.Reason += " A reboot is required: the modules cannot be reloaded now, since " + rp.Why() + "."
		}
		return
	}
	step.Operations = append(step.Operations, ReloadOperations(rp, want.String())...)
	step.Flags.NeedsReboot = false
	step.Flags.InterruptsGPUProcesses = len(rp.Interrupt) > 0
	how := "After the package transaction the modules are reloaded"
	if len(rp.Stop) > 0 {
		how += " (" + strings.Join(rp.Stop, ", ") + " stopped and started again)"
	}
	if len(rp.Interrupt) > 0 {
		var who []string
		for _, p := range rp.Interrupt {
			who = append(who, p.What)
		}
		how += ", stopping the GPU processes " + strings.Join(who, "; ")
	}
	step.Reason += " " + how + ": no reboot is needed."
}

// ReloadOperations are a reload's operations: stop the services and the
// processes that hold the modules, unload the old modules, load the new
// ones, start the services again, and check that the loaded driver is
// version.
func ReloadOperations(rp reload.Plan, version string) []plan.Operation {
	var ops []plan.Operation
	svc := func(unit, run string) plan.Operation {
		return plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: unit, Run: run, Reload: true}}
	}
	kern := func(k plan.KernelOp) plan.Operation {
		k.Reload = true
		return plan.Operation{Kind: plan.OpKernel, Kernel: &k}
	}
	for _, u := range rp.Stop {
		ops = append(ops, svc(u, plan.ServiceStop))
	}
	for _, p := range rp.Interrupt {
		ops = append(ops, kern(plan.KernelOp{Action: plan.KernelStopProcess, PID: p.PID, Process: p.Command}))
	}
	for _, m := range rp.Unload {
		ops = append(ops, kern(plan.KernelOp{Action: plan.KernelUnloadModule, Module: m}))
	}
	for _, m := range rp.Load {
		ops = append(ops, kern(plan.KernelOp{Action: plan.KernelLoadModule, Module: m}))
	}
	for _, u := range slices.Backward(rp.Stop) {
		ops = append(ops, svc(u, plan.ServiceStart))
	}
	return append(ops, kern(plan.KernelOp{Action: plan.KernelCheckVersion, Version: version}))
}

func gpuBusy(obs *facts.Observation) bool {
	for _, d := range obs.NVML.Devices {
		if len(d.Processes) > 0 {
			return true
		}
	}
	return false
}

// inPlace returns the installed top-level driver packages that already
// satisfy the spec under other names than the ones it would install (an
// nvidia-driver-550-open where the spec, asking for ">= 545", would
// install nvidia-open): same flavour, a version the spec admits. Such a
// driver is left alone. None when the spec installs the userspace alone.
func inPlace(obs *facts.Observation, d *planner.DesiredDriver, manager plan.Manager) []string {
	var out []string
	for p := range installedTopLevel(obs, d) {
		up, err := pkgdb.UpstreamVersion(string(manager), p.Version)
		if err != nil || !d.Versions.Check(up) || planner.InstalledDriverFlavor(obs, p.Name) != d.KernelModules {
			return nil
		}
		out = append(out, p.Name)
	}
	return out
}

// installedTopLevel yields the installed top-level driver packages; none
// when the spec installs the userspace alone, which lives beside any
// module and so neither stands in for one nor conflicts with one.
func installedTopLevel(obs *facts.Observation, d *planner.DesiredDriver) iter.Seq[facts.Package] {
	return func(yield func(facts.Package) bool) {
		if d.KernelModules == spec.KernelModulesNone {
			return
		}
		for _, p := range obs.Packages.Packages {
			if p.State == facts.StateInstalled && planner.DriverPackage(p.Name) && !yield(p) {
				return
			}
		}
	}
}

// conflicting lists the installed top-level driver packages that are not
// the spec's.
func conflicting(obs *facts.Observation, d *planner.DesiredDriver) []string {
	var out []string
	for p := range installedTopLevel(obs, d) {
		if slices.ContainsFunc(d.Packages, func(pn planner.PackageName) bool { return pn.Name == p.Name }) {
			continue
		}
		out = append(out, p.Name)
	}
	return out
}

// purgeStep removes installed top-level driver packages of another
// branch, flavour or source than the spec's.
func purgeStep(obs *facts.Observation, d *planner.DesiredDriver, manager plan.Manager) *plan.Step {
	remove := conflicting(obs, d)
	if len(remove) == 0 {
		return nil
	}
	var unhold []string
	for _, n := range remove {
		if pkg, _ := pkgdb.Installed(obs.Packages, n, pkgdb.Configured); pkg.Hold {
			unhold = append(unhold, n)
		}
	}
	return &plan.Step{
		Address: "driver.purge",
		Action:  plan.Delete,
		Before:  map[string]string{"packages": strings.Join(remove, ", ")},
		Reason: fmt.Sprintf("Removes %s: another driver branch, flavour or source than the spec's (%s %s modules), which would conflict with it.",
			strings.Join(remove, ", "), d.Source, d.KernelModules),
		ReasonCode: plan.ReasonVariantMismatch,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: manager, Remove: remove, Purge: true, Unhold: unhold}}},
		Flags:      plan.Flags{NeedsReboot: true, InterruptsGPUProcesses: gpuBusy(obs)},
	}
}

// holdStep holds the driver packages when hold = true, or releases them
// when hold = false; nil when the spec does not say or they already are.
func holdStep(obs *facts.Observation, d *planner.DesiredDriver, install *plan.Step, manager plan.Manager, alike []string) *plan.Step {
	if !d.Block.Hold.Set || manager == "" {
		return nil
	}
	names := pkgkit.Names(d.Packages)
	if d.Signed != nil {
		// Each kernel's signed modules are held with the driver they
		// were built for; their meta package is not, so that it goes on
		// bringing the modules of new kernels.
		for _, k := range d.Signed.Kernels {
			for _, p := range k.Packages {
				names = append(names, p.Name)
			}
		}
	}
	present := slices.ContainsFunc(names, func(n string) bool { _, ok := pkgdb.Installed(obs.Packages, n, pkgdb.Configured); return ok })
	if install == nil && !present && len(alike) > 0 {
		// The driver in place under other names is the one to hold.
		names = alike
	}
	var change, before []string
	for _, name := range names {
		pkg, ok := pkgdb.Installed(obs.Packages, name, pkgdb.Configured)
		held := ok && (pkg.Hold || pkg.Want == "hold")
		if held {
			before = append(before, name)
		}
		// A package being installed is not held yet, whatever it was.
		if install != nil {
			held = false
		}
		if held != d.Hold && (ok || install != nil) {
			change = append(change, name)
		}
	}
	if len(change) == 0 {
		return nil
	}
	op := &plan.PackagesOp{Manager: manager}
	reason := fmt.Sprintf("hold = true keeps %s at the planned version: unattended upgrades cannot move the driver away from the loaded kernel module.", strings.Join(change, ", "))
	if d.Hold {
		op.Hold = change
	} else {
		op.Unhold = change
		reason = fmt.Sprintf("hold = false releases %s, so that upgrades may move them.", strings.Join(change, ", "))
	}
	action := plan.Update
	if install != nil && install.Action == plan.Create {
		action = plan.Create
	}
	return &plan.Step{
		Address:    "driver.hold",
		Action:     action,
		Before:     map[string]string{"held": strings.Join(before, ", ")},
		After:      map[string]string{"held": map[bool]string{true: strings.Join(change, ", "), false: ""}[d.Hold]},
		Reason:     reason,
		ReasonCode: plan.ReasonHoldDiffers,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  []string{"driver"},
	}
}

// persistenceStep enables or disables nvidia-persistenced.
func (p Provider) persistenceStep(obs *facts.Observation, d *planner.DesiredDriver) *plan.Step {
	if !d.PersistenceMode.Set {
		return nil
	}
	want := d.PersistenceMode.Value
	enabled, known := PersistenceEnabled(obs)
	if known && enabled == want {
		return nil
	}
	state := map[bool]string{true: plan.PersistenceEnabled, false: plan.PersistenceDisabled}
	step := &plan.Step{
		Address:    "driver.persistence",
		Action:     plan.Update,
		ReasonCode: plan.ReasonSettingDiffers,
		After:      map[string]string{string(plan.SettingPersistenceMode): state[want]},
		Operations: []plan.Operation{{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: PersistencedUnit, Enable: want, Now: obs.Init.Systemd}}},
		DependsOn:  []string{"driver"},
	}
	if known {
		step.Before = map[string]string{string(plan.SettingPersistenceMode): state[enabled]}
	}
	switch {
	case want:
		step.Reason = "persistence_mode = true: nvidia-persistenced keeps the driver initialised while no program uses the GPU, so that each program does not pay for initialising it."
	case obs.Init.Systemd:
		step.Reason = "persistence_mode = false: nvidia-persistenced is stopped and disabled."
	default:
		step.Reason = "persistence_mode = false: nvidia-persistenced is disabled."
	}
	// Only systemd can start or stop the service now; elsewhere
	// systemctl fails to, and changes only what the root's next boot
	// with systemd starts.
	if !obs.Init.Systemd {
		step.Reason += " " + withoutSystemd(obs.Init) + ", so the change takes effect at the next boot with systemd."
	}
	return step
}

// withoutSystemd says why systemd cannot be told to act now, as the start
// of a sentence.
func withoutSystemd(in facts.Init) string {
	switch {
	case !in.Live:
		return "The root is not the running system"
	case in.PID1 == "":
		return "Process 1 is unknown (no /proc/1/comm)"
	}
	return fmt.Sprintf("systemd is not process 1 here (%s is)", in.PID1)
}

// PersistenceEnabled tells whether persistence is on: from NVML when it
// reports every device, else from the service's enablement link. init
// states it as persistence_mode by this same rule.
func PersistenceEnabled(obs *facts.Observation) (enabled, known bool) {
	if len(obs.NVML.Devices) > 0 {
		all := true
		for _, dev := range obs.NVML.Devices {
			if dev.PersistenceMode == "" {
				all = false
				break
			}
			enabled = dev.PersistenceMode == "enabled"
		}
		if all {
			for _, dev := range obs.NVML.Devices {
				if (dev.PersistenceMode == "enabled") != enabled {
					return false, true
				}
			}
			return enabled, true
		}
	}
	for _, u := range obs.Units {
		if u.Name == PersistencedUnit {
			return u.Enabled, true
		}
	}
	// Not observed: judged from NVML alone.
	return false, false
}

// driverPackage matches the packages that make up an installed driver,
// for removing it.
// Ubuntu's signed prebuilt modules (linux-modules-nvidia-*, with their
// objects, signatures and meta packages) are the driver's too.
var driverPackage = lazyregexp.New(`^(nvidia-(driver|kernel|open|dkms|utils|compute-utils|smi|alternative|persistenced|modprobe|vdpau-driver|egl|settings|tesla)|libnvidia-|libcuda1|cuda-drivers|kmod-nvidia|xserver-xorg-video-nvidia|firmware-nvidia-gsp|linux-(modules|objects|signatures)-nvidia-)`)

// removeDriver plans the removal of every installed driver package.
func removeDriver(obs *facts.Observation, manager plan.Manager) *plan.Step {
	var remove []string
	for _, p := range obs.Packages.Packages {
		if p.State == facts.StateInstalled && driverPackage.MatchString(p.Name) && !strings.HasPrefix(p.Name, "nvidia-cuda") {
			remove = append(remove, p.Name)
		}
	}
	s := pkgkit.Remove("driver", "the NVIDIA driver", manager, remove)
	if s != nil {
		s.Operations[0].Packages.Purge = true
		s.Flags = plan.Flags{NeedsReboot: true, InterruptsGPUProcesses: gpuBusy(obs)}
	}
	return s
}
