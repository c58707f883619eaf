package containers

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Step addresses.
const (
	// ToolkitAddress installs or removes the toolkit's packages.
	ToolkitAddress = "container_toolkit"
	// CDIAddress writes the CDI spec.
	CDIAddress = "container_toolkit.cdi"
	// CDIManagementAddress writes the CDI management spec.
	CDIManagementAddress = "container_toolkit.cdi_management"
	// engineAddress, with the engine's name, writes its configuration.
	engineAddress = "container_toolkit.engine."
)

// Checks this provider raises (finding.Finding.Check).
const (
	CheckCDIOutranked  = "cdi-outranked"
	CheckCDIUnplanned  = "cdi-unplanned"
	CheckToolkitDriver = "container-toolkit-driver"
)

// Provider plans the container toolkit, the engines' runtime entries and
// the CDI spec.
type Provider struct{}

var _ kind.Planner = Provider{}

// Plan compares the container_toolkit block with the host.
func (Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	c := req.Spec.ContainerToolkit
	if c == nil {
		return resp
	}
	obs := req.Facts
	manager := packageManager(req)
	if c.IsAbsent() {
		var remove []string
		for _, p := range obs.Containers.Toolkit.Packages {
			remove = append(remove, p.Name)
		}
		slices.Sort(remove)
		engines := planAbsentEngines(req, c, resp)
		resp.Steps = append(resp.Steps, engines...)
		if s := pkgkit.Remove(ToolkitAddress, "the NVIDIA container toolkit", manager, remove); s != nil {
			// The engines stop naming the runtime before it goes.
			for _, e := range engines {
				s.DependsOn = append(s.DependsOn, e.Address)
			}
			resp.Steps = append(resp.Steps, *s)
		}
		return resp
	}
	toolkitStep := planToolkit(ctx, req, c, manager, resp)
	if toolkitStep != nil {
		resp.Steps = append(resp.Steps, *toolkitStep)
	}
	for _, e := range runtimeEngines(c) {
		if s := planEngine(req, c, e, toolkitStep != nil, resp); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
	}
	if c.EffectiveCDI() {
		if s := planCDI(req, c, toolkitStep, resp, gpuCDI); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
	}
	if c.EffectiveCDIManagement() {
		if s := planCDI(req, c, toolkitStep, resp, managementCDI); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
	}
	if s := planDevChar(req, c, toolkitStep); s != nil {
		resp.Steps = append(resp.Steps, *s)
	}
	return resp
}

func packageManager(req *planner.Request) plan.Manager {
	if req.Desired != nil && req.Desired.Manager != "" {
		return req.Desired.Manager
	}
	if req.Facts.OS.Family == "rpm" {
		return plan.ManagerDnf
	}
	return plan.ManagerApt
}

func repositoryDeps(req *planner.Request) []string {
	if req.Desired == nil {
		var out []string
		for _, r := range req.Spec.Repositories {
			out = append(out, "repository."+r.Name)
		}
		return out
	}
	return pkgkit.Deps(req)
}

// toolkitPackages are the packages a plan pins: every one at the same
// version, as NVIDIA's instructions install them, so that apt cannot pair
// a new toolkit with an old libnvidia-container.
func toolkitPackages() []planner.PackageName {
	out := make([]planner.PackageName, len(ToolkitPackages))
	for i, n := range ToolkitPackages {
		out[i] = planner.PackageName{Name: n}
	}
	return out
}

// planToolkit installs the toolkit when it is missing or outside the
// block's version constraint; nil when it fits.
func planToolkit(ctx context.Context, req *planner.Request, c *spec.ContainerToolkit, manager plan.Manager, resp *planner.Response) *plan.Step {
	obs := req.Facts
	installed := obs.Containers.Toolkit.Version
	if installed != "" {
		v, err := version.Parse(installed)
		if err == nil && (!c.Version.Set || c.Version.Value.Check(v)) {
			checkToolkitDriver(req, v, resp)
			return nil
		}
	}
	pkgs := toolkitPackages()
	deps := repositoryDeps(req)
	var picked pkgkit.Picked
	var err error
	switch add, ok := toolkitRepository(ctx, req, manager); {
	case !ok:
		resp.Diagnostics = append(resp.Diagnostics, missingRepository(obs, c))
		return nil
	case add != nil:
		// NVIDIA's libnvidia-container repository, from gpuenv's table:
		// the toolkit's version is known once apply has fetched its
		// index.
		if s := repository.AddStep(obs.RepositoryFiles, *add, nvidiarepo.ToolkitFiles, "The container toolkit's packages"); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
		deps = append(deps, nvidiarepo.ToolkitFiles.Address)
		picked = pkgkit.Picked{Constraint: c.Version.Value.String(),
			Note: fmt.Sprintf("NVIDIA's libnvidia-container repository, which the plan adds, has no index on disk yet, so the toolkit's version is known after apply: the newest its index lists that satisfies %s", c.Version.Value.Quoted())}
	default:
		picked, err = pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{
			Manager: manager, Packages: pkgs, Versions: c.Version.Value,
			OS: pkgkit.OSID(obs.OS), OSVersion: obs.OS.VersionID, Pending: offersToolkit(req.Spec),
		})
	}
	if err != nil {
		if !offersToolkit(req.Spec) {
			resp.Diagnostics = append(resp.Diagnostics, missingRepository(obs, c))
		} else {
			resp.Diagnostics = append(resp.Diagnostics, pkgkit.NoVersion("container toolkit", err, c.Version.RangeOr(c.DefRange)))
		}
		return nil
	}
	if v, err := version.FromDebian(picked.Version); err == nil {
		checkToolkitDriver(req, v, resp)
	}
	names := pkgkit.Names(pkgs)
	op := picked.Install(manager, pkgs)
	step := &plan.Step{
		Address:    ToolkitAddress,
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"version": pkgkit.ShownVersion(picked.Version), "packages": strings.Join(names, ", ")},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: op}},
		DependsOn:  deps,
	}
	why := []string{"the NVIDIA container toolkit is not installed"}
	if installed != "" {
		step.Action = plan.Update
		step.ReasonCode = plan.ReasonVersionMismatch
		step.Before = map[string]string{"version": installed, "packages": strings.Join(packageNames(obs.Containers.Toolkit.Packages), ", ")}
		why = []string{fmt.Sprintf("the installed container toolkit %s does not satisfy %s", installed, c.Version.Value.Quoted())}
		if cur, ok := pkgdb.Installed(obs.Packages, ToolkitPackages[0], pkgdb.Configured); ok {
			op.AllowDowngrade = picked.Downgrades(manager, cur.Version)
		}
	}
	why = append(why, fmt.Sprintf("installs %s %s", strings.Join(names, ", "), pkgkit.ShownVersion(picked.Version)))
	step.Reason = picked.Reason(why)
	return step
}

func packageNames(pkgs []facts.Package) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = p.Name
	}
	return out
}

// toolkitRepository says where the toolkit comes from when the spec
// names no repository that carries it: add is the libnvidia-container
// repository from gpuenv's table, which the plan adds, where neither the
// host's package sources nor the package manager's lists offer the
// toolkit; nil where they do (or the spec's repository blocks may). ok is
// false where the toolkit has no source at all: the table has no
// repository for the host, and a plan never installs it without one.
func toolkitRepository(ctx context.Context, req *planner.Request, manager plan.Manager) (add *nvidiarepo.Repository, ok bool) {
	obs := req.Facts
	if offersToolkit(req.Spec) {
		return nil, true
	}
	for _, r := range obs.Repositories {
		for _, u := range r.URIs {
			if strings.Contains(u, "libnvidia-container") && !nvidiarepo.OwnFile(r.File) {
				return nil, true
			}
		}
	}
	if req.Candidates != nil {
		if listed, err := req.Candidates.Versions(ctx, manager, ToolkitPackages[0]); err == nil && len(listed) > 0 {
			return nil, true
		}
	}
	repo, found := nvidiarepo.ContainerToolkit(obs.OS.Family, obs.OS.Arch)
	if !found || repo.Usable() != nil {
		return nil, false
	}
	return &repo, true
}

// offersToolkit reports whether the spec configures a repository that can
// carry the toolkit: NVIDIA's libnvidia-container repository, or a local
// mirror (file://), which may hold anything.
func offersToolkit(s *spec.Spec) bool {
	for _, r := range s.Repositories {
		if !r.IsAbsent() && (strings.Contains(r.URL.Value, "libnvidia-container") || strings.HasPrefix(r.URL.Value, "file:")) {
			return true
		}
	}
	return false
}

// missingRepository is the error of a toolkit no configured source
// offers: it names the block to add.
func missingRepository(obs *facts.Observation, c *spec.ContainerToolkit) *hcl.Diagnostic {
	// apt takes the key from a file, which NVIDIA's instructions make
	// with gpg --dearmor; dnf fetches it from the URL itself.
	kind, arch := "deb", obs.OS.Arch
	keyring, fetch := "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
		"\n\nwith the key in place first:\n\ncurl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
	if obs.OS.Family == "rpm" {
		kind = "rpm"
		keyring, fetch = "https://nvidia.github.io/libnvidia-container/gpgkey", ""
		if arch == "" {
			arch = "x86_64"
		}
	} else if arch == "" {
		arch = "amd64"
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Missing repository for the container toolkit",
		Detail: fmt.Sprintf("The NVIDIA container toolkit is not in the distribution's archive, and no package source on this host offers it. Add NVIDIA's libnvidia-container repository to the spec:\n\n"+
			"repository \"nvidia-container-toolkit\" {\n  url     = \"https://nvidia.github.io/libnvidia-container/stable/%s/%s/\"\n  keyring = %q\n}%s", kind, arch, keyring, fetch),
		Subject: c.DefRange.Ptr(),
	}
}

// checkToolkitDriver warns when the toolkit is older than the driver
// branch the host runs (or the spec installs) supports.
func checkToolkitDriver(req *planner.Request, toolkit version.Version, resp *planner.Response) {
	branch, ok := driverBranch(req)
	if !ok {
		return
	}
	f, ok := compat.ToolkitForDriver(branch)
	if !ok || toolkit.Compare(f.ToolkitMin) >= 0 {
		return
	}
	resp.Warnings = append(resp.Warnings, finding.Finding{
		ID:      CheckToolkitDriver,
		Summary: fmt.Sprintf("Container toolkit %s is older than driver branch %d supports", toolkit, branch),
		Detail:  fmt.Sprintf("Driver branch %s and later need container toolkit %s or newer: %s (%s). Raise the container_toolkit block's version.", f.Key, f.ToolkitMin, f.Notes, f.Source),
	})
}

func driverBranch(req *planner.Request) (uint64, bool) {
	if req.Desired != nil && req.Desired.Driver != nil && req.Desired.Driver.Branch != 0 {
		return req.Desired.Driver.Branch, true
	}
	if v, err := version.Parse(req.Facts.Containers.DriverVersion); err == nil {
		return v.Major(), true
	}
	return 0, false
}

// planEngine merges the runtime into one engine's configuration; nil when
// the file already says what the merge would.
func planEngine(req *planner.Request, c *spec.ContainerToolkit, e spec.Engine, toolkitChanges bool, resp *planner.Response) *plan.Step {
	cfg := engineFacts(req.Facts, e)
	var setDefault *bool
	if c.DefaultRuntime.Set {
		setDefault = &c.DefaultRuntime.Value
	}
	if cfg.Error != "" {
		resp.Diagnostics = append(resp.Diagnostics, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unreadable engine configuration",
			Detail:   fmt.Sprintf("gpuenv merges the NVIDIA runtime into %s, which it cannot read: %s. Fix the file, or remove %q from engines.", cfg.Path, cfg.Error, e),
			Subject:  c.Engines.RangeOr(c.DefRange).Ptr(),
		})
		return nil
	}
	k, _ := kindOf(e)
	merged, err := k.merge(cfg.Content, setDefault)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Engine configuration cannot be merged",
			Detail:   fmt.Sprintf("gpuenv cannot add the NVIDIA runtime to %s: %s.", cfg.Path, err),
			Subject:  c.Engines.RangeOr(c.DefRange).Ptr(),
		})
		return nil
	}
	if cfg.Exists && sameSettings(e, cfg.Content, merged) {
		return nil
	}
	op := engineFileOp(cfg, merged)
	// The engine reads its configuration when it starts; a restart is
	// what makes the runtime usable now, and is only possible where
	// systemd runs the host.
	restart := "at its next start"
	if req.Facts.Init.Systemd {
		op.After = RestartCommand(e)
		restart = "then " + strings.Join(op.After, " ")
	}
	step := &plan.Step{
		Address:    engineAddress + string(e),
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      map[string]string{"path": cfg.Path, "runtime": RuntimeName},
		Operations: []plan.Operation{{Kind: plan.OpFile, File: op}},
	}
	if c.DefaultRuntime.Set {
		step.After["default_runtime"] = fmt.Sprint(c.DefaultRuntime.Value)
	}
	what := fmt.Sprintf("%s has no NVIDIA runtime entry", cfg.Path)
	if !cfg.Exists {
		what = fmt.Sprintf("%s does not exist", cfg.Path)
	}
	if cfg.Exists {
		step.Action = plan.Update
		step.ReasonCode = plan.ReasonContentDiffers
		step.Before = map[string]string{"path": cfg.Path, "runtime": ""}
		if cfg.NVIDIARuntime {
			step.Before["runtime"] = RuntimeName
			what = fmt.Sprintf("the NVIDIA runtime entry in %s differs from the spec's", cfg.Path)
		}
		if c.DefaultRuntime.Set {
			step.Before["default_runtime"] = fmt.Sprint(cfg.DefaultRuntime == RuntimeName)
		}
	}
	if toolkitChanges {
		step.DependsOn = []string{ToolkitAddress}
	}
	step.Reason = plan.Sentence([]string{what, fmt.Sprintf("merges the nvidia runtime into it, keeping every other setting, %s", restart)})
	return step
}

// engineFileOp writes content to an engine's configuration file: a new
// one 0644 and root's, as the engines' packages ship theirs; an existing
// one keeps its mode (setuid, setgid and sticky aside), owner and group,
// for it is the administrator's and may hold secrets, as a containerd
// config.toml 0600 with a registry's password does.
func engineFileOp(cfg facts.EngineConfig, content string) *plan.FileOp {
	op := &plan.FileOp{Path: cfg.Path, Content: content, Mode: 0o644}
	if cfg.Exists && cfg.Mode != 0 {
		op.Mode, op.UID, op.GID = cfg.Mode&0o777, cfg.UID, cfg.GID
	}
	return op
}

func engineFacts(obs *facts.Observation, e spec.Engine) facts.EngineConfig {
	for _, c := range obs.Containers.Engines {
		if c.Engine == string(e) {
			return c
		}
	}
	return facts.EngineConfig{Engine: string(e), Path: EngineConfigPath(e)}
}

// sameSettings reports whether two texts of an engine's configuration
// hold the same settings, whatever their layout: a file already merged by
// hand or by nvidia-ctk needs no step.
func sameSettings(e spec.Engine, a, b string) bool {
	var da, db map[string]any
	var err1, err2 error
	if e == spec.EngineDocker {
		da, err1 = decodeJSONObject(a)
		db, err2 = decodeJSONObject(b)
	} else {
		da, err1 = decodeTOML(a)
		db, err2 = decodeTOML(b)
	}
	return err1 == nil && err2 == nil && reflect.DeepEqual(normalize(da), normalize(db))
}

// normalize makes decoded values comparable: JSON numbers by their text.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	case fmt.Stringer:
		return t.String()
	}
	return v
}

// cdiFile is one CDI spec file gpuenv writes: the nvidia.com/gpu spec,
// or the management spec beside it. Both are planned alike.
type cdiFile struct {
	address, path, kind string
	// generate is what apply makes the file's content with
	// (plan.FileOp.Generate), when the plan cannot know it.
	generate string
	make     func(cs *facts.Containers, obs *facts.Observation) (*cdispec.Spec, error)
	// shown are the After (or, of the spec on disk, Before) values
	// besides the path, the driver version and the digest.
	shown       func(s *cdispec.Spec) map[string]string
	shownOnDisk func(sp facts.CDISpec) map[string]string
	// writes says what the step writes, for its reason.
	writes func(cs *facts.Containers, s *cdispec.Spec) string
	// afterMIG is why the file is made at apply after the plan's MIG
	// steps, when there are any: its content follows the instances.
	afterMIG string
}

var gpuCDI = cdiFile{
	address: CDIAddress, path: cdi.CDISpecPath, kind: cdi.CDIKind, generate: plan.GenerateCDI,
	afterMIG: "names the MIG devices and their capability nodes: apply writes it from /dev and NVML after the MIG steps",
	make: func(cs *facts.Containers, obs *facts.Observation) (*cdispec.Spec, error) {
		return cdi.GenerateCDI(cs, obs.DeviceNodes, obs.NVML.Devices)
	},
	shown: func(s *cdispec.Spec) map[string]string {
		return map[string]string{"devices": strings.Join(deviceNames(s.Devices), ", ")}
	},
	shownOnDisk: func(sp facts.CDISpec) map[string]string {
		return map[string]string{"devices": strings.Join(sp.Devices, ", ")}
	},
	writes: func(cs *facts.Containers, _ *cdispec.Spec) string {
		return fmt.Sprintf("writes the spec for %d GPUs and all from the device nodes and %d driver files", len(cs.GPUs), len(cs.DriverFiles))
	},
}

// managementCDI is the management spec: its one device is "all", so the
// step shows the device nodes it gives, which change with the MIG
// layout.
var managementCDI = cdiFile{
	address: CDIManagementAddress, path: cdi.ManagementSpecPath, kind: cdi.ManagementKind, generate: plan.GenerateManagementCDI,
	afterMIG: "names the capability nodes of the instances: apply writes it from /dev after the MIG steps",
	make: func(cs *facts.Containers, obs *facts.Observation) (*cdispec.Spec, error) {
		return cdi.GenerateManagementCDI(cs, obs.DeviceNodes)
	},
	shown: func(s *cdispec.Spec) map[string]string {
		var nodes []string
		for _, d := range s.Devices {
			for _, n := range d.ContainerEdits.DeviceNodes {
				nodes = append(nodes, n.Path)
			}
		}
		return map[string]string{"devices": strings.Join(deviceNames(s.Devices), ", "), "device_nodes": strings.Join(nodes, ", ")}
	},
	shownOnDisk: func(sp facts.CDISpec) map[string]string {
		return map[string]string{"devices": strings.Join(sp.Devices, ", "), "device_nodes": strings.Join(sp.DeviceNodes, ", ")}
	},
	writes: func(cs *facts.Containers, s *cdispec.Spec) string {
		n := 0
		for _, d := range s.Devices {
			n += len(d.ContainerEdits.DeviceNodes)
		}
		return fmt.Sprintf("writes %s=all with the host's %d NVIDIA device nodes and %d driver files, for containers that manage the GPUs", cdi.ManagementKind, n, len(cs.DriverFiles))
	},
}

// planCDI writes a CDI spec file when the one on disk differs from what
// the host's files make.
func planCDI(req *planner.Request, c *spec.ContainerToolkit, toolkitStep *plan.Step, resp *planner.Response, f cdiFile) *plan.Step {
	obs := req.Facts
	cs := obs.Containers
	if toolkitStep != nil {
		// The hooks a spec names are those of the toolkit in place when
		// it is written: the one this plan installs, when apply knows its
		// version; otherwise none, until the next plan sees it.
		cs.Toolkit = incomingToolkit(toolkitStep)
	}
	if driverChanges(req) {
		return regenerateAtApply(cs, toolkitStep, f, fmt.Sprintf("This plan changes the driver, and %s must name the new driver's files: apply writes it from them after the driver step.", f.path))
	}
	if f.afterMIG != "" {
		if migSteps := devices.MIGChanges(req); len(migSteps) > 0 {
			step := regenerateAtApply(cs, toolkitStep, f, fmt.Sprintf("This plan changes the MIG layout, and %s %s.", f.path, f.afterMIG))
			step.DependsOn = append(step.DependsOn, migSteps...)
			return step
		}
	}
	s, err := f.make(&cs, obs)
	if err != nil {
		what := "No CDI spec can be made on this host yet"
		if f.kind != cdi.CDIKind {
			what = fmt.Sprintf("No CDI spec for %s can be made on this host yet", f.kind)
		}
		resp.Warnings = append(resp.Warnings, finding.Finding{
			ID:      CheckCDIUnplanned,
			Summary: what,
			Detail:  fmt.Sprintf("%s. gpuenv writes %s once the driver is loaded and its files are in place.", strings.TrimSuffix(err.Error(), "."), f.path),
		})
		return nil
	}
	if toolkitStep != nil && cs.Toolkit.Version == "" {
		step := regenerateAtApply(cs, toolkitStep, f, fmt.Sprintf("The toolkit this plan installs is known after apply, and %s names only the hooks the installed toolkit has: apply writes it after the toolkit step, from the driver's files and the toolkit then in place.", f.path))
		// The driver and the devices stay: only the hooks wait for the
		// toolkit.
		step.After["driver_version"] = cs.DriverVersion
		maps.Copy(step.After, f.shown(s))
		return step
	}
	content, err := cdi.MarshalCDI(s)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "CDI spec not written", Detail: err.Error(), Subject: c.DefRange.Ptr()})
		return nil
	}
	if in := specInUse(cs.CDISpecs, f.kind); in != "" && in != f.path && strings.HasPrefix(in, cdi.DynamicCDIDir+"/") {
		detail := fmt.Sprintf("A CDI spec for %s in %s outranks one in %s. Toolkit 1.18 and later write it with the nvidia-cdi-refresh service; disable that service, or leave cdi unset and let the toolkit keep the spec.", f.kind, cdi.DynamicCDIDir, cdi.StaticCDIDir)
		if f.kind != cdi.CDIKind {
			detail = fmt.Sprintf("A CDI spec for %s in %s outranks one in %s. The GPU Operator's toolkit container writes it there; remove it, or set cdi_management = false and let the operator keep its spec.", f.kind, cdi.DynamicCDIDir, cdi.StaticCDIDir)
		}
		resp.Warnings = append(resp.Warnings, finding.Finding{
			ID:       CheckCDIOutranked,
			Summary:  fmt.Sprintf("Engines use %s, not gpuenv's %s", in, f.path),
			Detail:   detail,
			Evidence: []string{in},
		})
	}
	var current *facts.CDISpec
	for i := range cs.CDISpecs {
		if cs.CDISpecs[i].Path == f.path {
			current = &cs.CDISpecs[i]
		}
	}
	if current != nil && current.SHA256 == planner.Digest(content) {
		return nil
	}
	after := map[string]string{"path": f.path, "driver_version": cs.DriverVersion, "sha256": planner.Digest(content)}
	maps.Copy(after, f.shown(s))
	step := &plan.Step{
		Address:    f.address,
		Action:     plan.Create,
		ReasonCode: plan.ReasonMissing,
		After:      after,
		Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: f.path, Content: content, Mode: 0o644}}},
		DependsOn:  []string{"driver"},
	}
	if toolkitStep != nil {
		step.DependsOn = append(step.DependsOn, ToolkitAddress)
	}
	why := []string{fmt.Sprintf("%s does not exist", f.path)}
	if current != nil {
		step.Action = plan.Update
		step.ReasonCode = plan.ReasonContentDiffers
		step.Before = onDisk(f, *current)
		why = []string{fmt.Sprintf("%s differs from the spec the driver's files make", f.path)}
		if current.DriverVersion != "" && current.DriverVersion != cs.DriverVersion {
			why = []string{fmt.Sprintf("%s names driver %s, and the installed driver is %s", f.path, current.DriverVersion, cs.DriverVersion)}
		}
		switch n := len(current.Missing); {
		case n == 1:
			why = append(why, fmt.Sprintf("a path it names is gone (%s)", current.Missing[0]))
		case n > 1:
			why = append(why, fmt.Sprintf("%d of the paths it names are gone (%s, …)", n, current.Missing[0]))
		}
	}
	why = append(why, f.writes(&cs, s))
	step.Reason = plan.Sentence(why)
	return step
}

// onDisk is what a plan shows of the spec file on disk.
func onDisk(f cdiFile, sp facts.CDISpec) map[string]string {
	m := map[string]string{"path": f.path, "driver_version": sp.DriverVersion, "sha256": sp.SHA256}
	maps.Copy(m, f.shownOnDisk(sp))
	return m
}

// regenerateAtApply is the step of a CDI spec file that depends on what
// an earlier step leaves: a driver change (the spec names the driver's
// files of one version) or a toolkit whose version apply picks (the spec
// names its hooks). Apply makes the spec from the host as those steps
// left it, right after them; rollback restores the spec the host had, as
// for every file.
func regenerateAtApply(cs facts.Containers, toolkitStep *plan.Step, f cdiFile, reason string) *plan.Step {
	after := map[string]string{"path": f.path, "driver_version": plan.KnownAfterApply, "sha256": plan.KnownAfterApply}
	for k := range f.shownOnDisk(facts.CDISpec{}) {
		after[k] = plan.KnownAfterApply
	}
	step := &plan.Step{
		Address:    f.address,
		Action:     plan.Create,
		ReasonCode: plan.ReasonDependency,
		After:      after,
		Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: f.path, Mode: 0o644, Generate: f.generate}}},
		DependsOn:  []string{"driver"},
		Reason:     reason,
	}
	if toolkitStep != nil {
		step.DependsOn = append(step.DependsOn, ToolkitAddress)
	}
	for _, sp := range cs.CDISpecs {
		if sp.Path == f.path {
			step.Action = plan.Update
			step.Before = onDisk(f, sp)
		}
	}
	return step
}

// specInUse is the spec engines use for kind: one in the dynamic
// directory outranks the static one.
func specInUse(specs []facts.CDISpec, kind string) string {
	in := ""
	for _, s := range specs {
		if s.Kind == kind && s.Error == "" {
			if in == "" || strings.HasPrefix(s.Path, cdi.DynamicCDIDir+"/") && !strings.HasPrefix(in, cdi.DynamicCDIDir+"/") {
				in = s.Path
			}
		}
	}
	return in
}

// incomingToolkit is the toolkit a toolkit step installs, as the CDI spec
// needs it: its version, hooks and hook executable.
func incomingToolkit(s *plan.Step) facts.ContainerToolkit {
	var t facts.ContainerToolkit
	for _, op := range s.Operations {
		if op.Packages == nil || len(op.Packages.Install) == 0 {
			continue
		}
		v, err := version.FromDebian(op.Packages.Install[0].Version)
		if err != nil {
			return t
		}
		t.Version = v.String()
		t.Hooks = compat.ToolkitHooks(v)
		t.HookPath = CDIHookPath
		if v.Compare(version.MustParse("1.16.0")) < 0 {
			t.HookPath = CTKPath
		}
	}
	return t
}

func deviceNames(devs []cdispec.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

// driverChanges reports whether the plan's driver step will replace the
// driver: the spec names a version the installed one does not satisfy.
func driverChanges(req *planner.Request) bool {
	d := req.Spec.Driver
	if d == nil || d.IsAbsent() || !d.Version.Set {
		return false
	}
	v, err := version.Parse(req.Facts.Containers.DriverVersion)
	return err != nil || !d.Version.Value.Check(v)
}
