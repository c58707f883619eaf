package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/spec"
)

// FabricStep is the step that brings Fabric Manager to the driver's
// version when the driver itself is already as the spec says.
const FabricStep = "driver.fabricmanager"

// fabricNames are the Fabric Manager packages of a driver branch from a
// source, by NVIDIA's names (compat: gpu-driver-container-fm): Fabric
// Manager itself, then the NVSwitch query library where it is installed,
// since it is versioned with the driver too and a driver upgrade that
// leaves it behind breaks the NVSwitch reads of DCGM and nvidia-smi.
func fabricNames(obs *facts.Observation, src spec.Source, driverNames []string, branch uint64) ([]string, error) {
	q := compat.PackageQuery{OS: pkgkit.OSID(obs.OS), OSVersion: obs.OS.VersionID, Repo: compat.RepoDistro, Branch: branch, Component: "fabricmanager"}
	if q.OS == "rhel" {
		q.OSVersion, _, _ = strings.Cut(q.OSVersion, ".")
	}
	if src == spec.SourceNVIDIA {
		q.Repo = compat.RepoNVIDIA
	}
	q.Server = slices.ContainsFunc(driverNames, func(n string) bool { return strings.Contains(n, "-server") })
	fm, err := compat.Packages(q)
	if err != nil || len(fm) == 0 {
		hint := ""
		if q.OS == "ubuntu" && q.Repo == compat.RepoDistro && !q.Server {
			hint = fmt.Sprintf(": Ubuntu's archive has Fabric Manager only for its -server drivers (nvidia-driver-%d-server), whose versions it shares, or use source = \"nvidia\"", branch)
		}
		return nil, fmt.Errorf("this board has NVSwitches, whose driver needs Fabric Manager at its exact version, and gpuenv's package tables name no Fabric Manager package of branch %d for %s %s from the %s source%s", branch, obs.OS.ID, obs.OS.VersionID, src, hint)
	}
	names := []string{fm[0].Name}
	q.Component = "nscq"
	if nscq, err := compat.Packages(q); err == nil && len(nscq) > 0 {
		if obs.Fabric.Manager.NSCQ != "" {
			names = append(names, nscq[0].Name)
		}
	}
	return names, nil
}

// fabricVersion is the version of a Fabric Manager package at the
// driver's upstream version: Fabric Manager carries its own package
// revision (550.54.15-1 beside nvidia-driver-550-open 550.54.15-0ubuntu1),
// so what must agree is the upstream part.
func fabricVersion(ctx context.Context, req *planner.Request, name, upstream, exact string) (string, error) {
	manager := req.Desired.Manager
	listed, err := req.Candidates.Versions(ctx, manager, name)
	if err != nil {
		return "", err
	}
	best := ""
	for _, v := range listed {
		up, err := pkgdb.UpstreamVersion(string(manager), v)
		if err != nil || up.String() != upstream || exact != "" && v != exact {
			continue
		}
		if best == "" || pkgdb.Compare(string(manager), v, best) > 0 {
			best = v
		}
	}
	if best == "" {
		if exact != "" {
			upstream = exact
		}
		offered := "none"
		if len(listed) > 0 {
			offered = strings.Join(listed, ", ")
		}
		return "", fmt.Errorf("the driver %s cannot go on this board without %s at the same version, and the package sources offer no %s %s (they offer %s): on a board with NVSwitches CUDA fails with error 802 until Fabric Manager at the driver's version runs; choose a driver version the sources also offer %s at", upstream, name, name, upstream, offered, name)
	}
	return best, nil
}

// planFabric makes Fabric Manager follow the driver on a board with
// NVSwitches. It returns the step that installs Fabric Manager's
// packages at the driver's version, or nil when they already are. Where
// install changes the driver, that step goes just before it, so that its
// packages join the driver's transaction (planner.Batch), the driver's
// module reload stops Fabric Manager before unloading the modules and
// starts it after loading the new ones, and the service is enabled once
// the new module runs.
func planFabric(ctx context.Context, req *planner.Request, install *plan.Step) (*plan.Step, error) {
	obs := req.Facts
	d := req.Desired.Driver
	if len(obs.Fabric.NVSwitches) == 0 || d.KernelModules == spec.KernelModulesNone {
		return nil, nil
	}
	manager := req.Desired.Manager
	driverNames := pkgkit.Names(d.Packages)
	fm := obs.Fabric.Manager
	var names []string
	var pins []plan.PackagePin
	shown := ""
	if install != nil && install.Operations[0].Packages.Install[0].KnownAfterApply() {
		// The driver's version is picked by apply once the indexes are
		// fetched: Fabric Manager's is the newest within the same
		// constraint, which NVIDIA publishes with each driver; the next
		// plan, and doctor, say if they came apart.
		branch := d.Branch
		if branch == 0 && len(d.Branches) == 1 {
			branch = d.Branches[0]
		}
		var err error
		if names, err = fabricNames(obs, d.Source, driverNames, branch); err != nil {
			return nil, err
		}
		for _, n := range names {
			pins = append(pins, plan.PackagePin{Name: n, Constraint: install.Operations[0].Packages.Install[0].Constraint})
		}
		shown = plan.KnownAfterApply
	} else {
		raw := ""
		if install != nil {
			raw = install.Operations[0].Packages.Install[0].Version
		} else {
			main, ok := installedDriver(obs, driverNames)
			if !ok {
				alike := inPlace(obs, d, manager)
				if len(alike) == 0 {
					return nil, nil
				}
				main, _ = pkgdb.Installed(obs.Packages, alike[0], pkgdb.Configured)
			}
			raw = main.Version
		}
		up, err := pkgdb.UpstreamVersion(string(manager), raw)
		if err != nil {
			return nil, nil
		}
		if fm.Upstream == up.String() && (fm.NSCQ == "" || nscqAt(obs, manager, up.String())) {
			if install != nil {
				reloadFabric(install, obs)
			}
			return nil, nil
		}
		if names, err = fabricNames(obs, d.Source, driverNames, up.Major()); err != nil {
			return nil, err
		}
		fmVersion, err := fabricVersion(ctx, req, names[0], up.String(), "")
		if err != nil {
			return nil, err
		}
		pins = append(pins, plan.PackagePin{Name: names[0], Version: fmVersion})
		for _, n := range names[1:] {
			// One step shows one version: the query library must be
			// published at Fabric Manager's own, as NVIDIA does.
			v, err := fabricVersion(ctx, req, n, up.String(), fmVersion)
			if err != nil {
				return nil, err
			}
			pins = append(pins, plan.PackagePin{Name: n, Version: v})
		}
		shown = fmVersion
	}
	var hold []string
	for _, n := range names {
		if p, ok := pkgdb.Installed(obs.Packages, n, pkgdb.Configured); d.Hold || ok && (p.Hold || p.Want == "hold") {
			hold = append(hold, n)
		}
	}
	op := &plan.PackagesOp{Manager: manager, Install: pins, Hold: hold}
	if fm.Version != "" && pins[0].Version != "" && pkgdb.Compare(string(manager), pins[0].Version, fm.Version) < 0 {
		op.AllowDowngrade = true
	}
	step := &plan.Step{
		Address:    FabricStep,
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"version": shown, "packages": strings.Join(names, ", ")},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
	}
	if fm.Package != "" {
		step.Action, step.ReasonCode = plan.Update, plan.ReasonVersionMismatch
		step.Before = map[string]string{"version": fm.Version, "packages": fm.Package}
	}
	what := fmt.Sprintf("Fabric Manager follows the driver on this board's %d NVSwitches: without it at the driver's version, running, CUDA fails on every GPU with error 802 (system not yet initialized)", len(obs.Fabric.NVSwitches))
	if fm.Package != "" {
		what += fmt.Sprintf("; the installed %s %s is another version than the driver's", fm.Package, fm.Version)
	}
	if install != nil {
		// Just before the driver, with what the driver waits for: its
		// packages join the driver's transaction.
		step.DependsOn = slices.Clone(install.DependsOn)
		install.DependsOn = append(install.DependsOn, FabricStep)
		step.Reason = plan.Sentence([]string{what, "installs " + strings.Join(names, ", ") + " in the driver's package transaction"})
		install.Reason += fmt.Sprintf(" %s joins its package transaction (%s).", names[0], FabricStep)
		reloadFabric(install, obs)
		enableFabric(obs, install)
		return step, nil
	}
	step.DependsOn = append(pkgkit.Deps(req), "driver")
	step.Reason = plan.Sentence([]string{what, "installs " + strings.Join(names, ", ") + " at the installed driver's version"})
	if obs.Init.Systemd && fm.Running == "yes" {
		// The daemon running is the old one: it stops before the
		// transaction and starts after it as the new one, against the
		// driver already loaded.
		svc := func(run string) plan.Operation {
			return plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: compat.FabricManagerUnit, Run: run}}
		}
		step.Operations = []plan.Operation{svc(plan.ServiceStop), step.Operations[0], svc(plan.ServiceStart)}
	}
	enableFabric(obs, step)
	return step, nil
}

// noFabric is the error that the driver cannot be planned without its
// Fabric Manager.
func noFabric(err error, subject hcl.Range) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No Fabric Manager at the driver's version", Detail: err.Error() + ".", Subject: subject.Ptr()}
}

// installedDriver is the installed driver's main package.
func installedDriver(obs *facts.Observation, names []string) (facts.Package, bool) {
	if len(names) == 0 {
		return facts.Package{}, false
	}
	return pkgdb.Installed(obs.Packages, names[0], pkgdb.Configured)
}

func nscqAt(obs *facts.Observation, manager plan.Manager, upstream string) bool {
	up, err := pkgdb.UpstreamVersion(string(manager), obs.Fabric.Manager.NSCQVersion)
	return err == nil && up.String() == upstream
}

// enableFabric adds to step, which installs or changes Fabric Manager,
// the enabling of its service where it is not enabled: started now where
// systemd runs the host and the new module is what runs after the step,
// else at the next boot.
func enableFabric(obs *facts.Observation, step *plan.Step) {
	if obs.Fabric.Manager.Enabled {
		return
	}
	now := obs.Init.Systemd && !step.Flags.NeedsReboot
	step.Operations = append(step.Operations, plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: compat.FabricManagerUnit, Enable: true, Now: now}})
	if now {
		step.Reason += " Fabric Manager's service is enabled and started."
	} else {
		step.Reason += " Fabric Manager's service is enabled, and starts at the next boot with the new module."
	}
}

// reloadFabric puts Fabric Manager's stop and start around the module
// reload of a driver step when the reload did not already (it was not
// seen holding the modules): it talks to the driver it was started
// against, so it must stop before the old module goes and start after
// the new one is loaded.
func reloadFabric(step *plan.Step, obs *facts.Observation) {
	if obs.Fabric.Manager.Running != "yes" {
		return
	}
	firstUnload, check := -1, -1
	for i, op := range step.Operations {
		if s := op.Service; s != nil && s.Unit == compat.FabricManagerUnit && s.Reload {
			return
		}
		if k := op.Kernel; k != nil && k.Reload {
			if k.Action == plan.KernelUnloadModule && firstUnload < 0 {
				firstUnload = i
			}
			if k.Action == plan.KernelCheckVersion {
				check = i
			}
		}
	}
	if firstUnload < 0 || check < 0 {
		return
	}
	svc := func(run string) plan.Operation {
		return plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: compat.FabricManagerUnit, Run: run, Reload: true}}
	}
	// The start goes just before the version check, after the new
	// modules and the other services are up.
	ops := slices.Insert(step.Operations, check, svc(plan.ServiceStart))
	step.Operations = slices.Insert(ops, firstUnload, svc(plan.ServiceStop))
}
