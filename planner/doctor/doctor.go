package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/facts"
	// Imported under another name: gpuhealth.go has a finding of its own,
	// what one health check says of one GPU.
	findings "github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/spec/version"
)

// FormatVersion is the version of the JSON report.
const FormatVersion = jsonformat.Version

// Status is a check's verdict.
type Status = findings.Status

// The verdicts, from best to worst. Skipped means the check did not apply
// (nothing to judge, or an earlier problem already explains it).
const (
	Skipped = findings.Skipped
	OK      = findings.OK
	Warning = findings.Warning
	Problem = findings.Problem
)

// Group is one of the stages an expert goes through, in order.
type Group = findings.Group

// The groups, in the order they are checked.
var (
	GroupPCI        = Group{Number: 1, Name: "GPU on the PCI bus"}
	GroupKernel     = Group{Number: 2, Name: "Kernel module"}
	GroupNVML       = Group{Number: 3, Name: "NVML"}
	GroupDevices    = Group{Number: 4, Name: "Device nodes"}
	GroupCUDA       = Group{Number: 5, Name: "CUDA toolkit"}
	GroupCuDNN      = Group{Number: 6, Name: "cuDNN"}
	GroupFrameworks = Group{Number: 7, Name: "Frameworks"}
	GroupEnv        = Group{Number: 8, Name: "Environment"}
	GroupGPUState   = Group{Number: 9, Name: "GPU state"}
)

// Fix is how to remove a problem: a spec change for gpuenv, a command, or
// both.
type Fix = findings.Fix

// Check is one finding: the doctor's name for the one finding type, kept
// so that a check reads as the doctor's.
type Check = findings.Finding

// Counts are how many checks ended in each status.
type Counts struct {
	OK       int `json:"ok"`
	Warnings int `json:"warnings"`
	Problems int `json:"problems"`
	Skipped  int `json:"skipped"`
}

// Report is doctor's result.
type Report struct {
	FormatVersion string  `json:"format_version"`
	Root          string  `json:"root"`
	User          *User   `json:"user,omitempty"`
	Checks        []Check `json:"checks"`
	Counts        Counts  `json:"counts"`
	// Healthy is true when no check found a problem; warnings alone keep
	// a host healthy.
	Healthy bool `json:"healthy"`
	// Context and Loader are the observation's, which the checks of
	// groups 0 and the loader's judge: where programs run, and which
	// library file each consumer loads, with what it hides.
	Context *facts.RuntimeContext `json:"context,omitempty"`
	Loader  *facts.Loader         `json:"loader,omitempty"`
	// KernelLog is the observation's reading of the kernel log, which
	// the kernel checks judge: the logs read and the driver's messages.
	KernelLog *facts.KernelLog `json:"kernel_log,omitempty"`
	// Session is the observation's reading of the user's shell files and
	// a named process's environment, which the environment checks judge
	// with the system's settings.
	Session *facts.Session `json:"session,omitempty"`
	// DeviceAccess is the observation's /dev/char links, cgroup drivers
	// and device rules, which the container device checks judge.
	DeviceAccess *facts.DeviceAccess `json:"device_access,omitempty"`
	// Python are, for each Python environment, the GPU libraries besides
	// the frameworks and the GPU requirements left unmet.
	Python []PythonLibraries `json:"python_libraries,omitempty"`
}

// PythonLibraries is one environment's part of Report.Python.
type PythonLibraries struct {
	Interpreter string                   `json:"interpreter"`
	Libraries   []facts.PythonLibrary    `json:"gpu_libraries"`
	Unmet       []facts.UnmetRequirement `json:"unmet_requirements"`
}

// User is the person whose programs must reach the GPU: SUDO_USER under
// sudo, otherwise the user running gpuenv, resolved in the root's
// /etc/passwd.
type User struct {
	Name string `json:"name"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
}

// Input is what doctor judges.
type Input struct {
	Obs *facts.Observation
	// User is nil when the invoking user is unknown; the device-node
	// access check is then skipped.
	User *User
	// Session holds variables set in the environment doctor was started
	// from (CUDA_VISIBLE_DEVICES …), judged with those of the host's
	// configuration files. Leave it empty when the root is not this
	// machine's.
	Session []facts.Assignment
}

// Run runs every check in order and returns the report.
func Run(in Input) *Report {
	// About as many verdicts as checks: a check is too large a value to
	// copy at every growth of the list.
	d := &doctor{in: in, obs: in.Obs, out: make([]Check, 0, 2*len(checks))}
	for _, c := range checks {
		c(d)
	}
	r := &Report{FormatVersion: FormatVersion, Root: in.Obs.Root, User: in.User, Checks: d.out,
		Context: &in.Obs.Context, Loader: &in.Obs.Loader, KernelLog: in.Obs.Kernel.Log, Session: &in.Obs.Session, DeviceAccess: &in.Obs.DeviceAccess}
	for _, env := range in.Obs.Python {
		if len(env.Libraries)+len(env.Unmet) == 0 {
			continue
		}
		p := PythonLibraries{Interpreter: env.Interpreter, Libraries: env.Libraries, Unmet: env.Unmet}
		if p.Libraries == nil {
			p.Libraries = []facts.PythonLibrary{}
		}
		if p.Unmet == nil {
			p.Unmet = []facts.UnmetRequirement{}
		}
		r.Python = append(r.Python, p)
	}
	for _, c := range r.Checks {
		switch c.Status {
		case OK:
			r.Counts.OK++
		case Warning:
			r.Counts.Warnings++
		case Problem:
			r.Counts.Problems++
		default:
			r.Counts.Skipped++
		}
	}
	r.Healthy = r.Counts.Problems == 0
	return r
}

// checks run in the order of the groups; within a group, the order a
// person would look.
var checks = []func(*doctor){
	(*doctor).runtimeContext,
	(*doctor).pciGPUs,
	(*doctor).pciDriver,
	(*doctor).kernelModule,
	(*doctor).kernelBlocked,
	(*doctor).driverFlavor,
	(*doctor).driverBranch,
	(*doctor).kernelNVRM,
	(*doctor).kernelNouveau,
	(*doctor).kernelInitramfs,
	(*doctor).kernelSecureBoot,
	(*doctor).kernelDKMS,
	(*doctor).packagesUnfinished,
	(*doctor).nvmlInit,
	(*doctor).driverVersions,
	(*doctor).deviceNodes,
	(*doctor).deviceAccess,
	(*doctor).containerDevices,
	(*doctor).cudaToolkits,
	(*doctor).loaderToolkit,
	(*doctor).driverLibrary,
	(*doctor).cudnn,
	(*doctor).cudnnHeaderLibrary,
	(*doctor).frameworks,
	(*doctor).loaderFrameworks,
	(*doctor).pythonLibraries,
	(*doctor).visibleDevices,
	(*doctor).deviceOrder,
	(*doctor).ldLibraryPath,
	(*doctor).stubLibrary,
	(*doctor).visibleDeviceUUIDs,
	(*doctor).gpuState,
	(*doctor).migState,
	(*doctor).gpuHealth,
	(*doctor).programs,
	(*doctor).containers,
	(*doctor).fabricManager,
}

// stages are the rules reported before doctor, by ID (the part before a
// colon), with the first command that reports each: observe reports a
// problem of its stage from the facts alone (ObserveFindings), plan
// judges its stage's rules on the host as the plan leaves it (Judge).
// A rule not listed would be doctor's alone: the corpus test refuses one.
var stages = map[string]findings.Stage{
	// Observe reports these of the host as it is.
	"driver.versions":     findings.Observe,
	"kernel.nouveau":      findings.Observe,
	"kernel.module":       findings.Observe,
	"kernel.initramfs":    findings.Observe,
	"kernel.dkms":         findings.Observe,
	"pci.driver":          findings.Observe,
	"nvml.init":           findings.Observe,
	CheckGPUBus:           findings.Observe,
	"packages.unfinished": findings.Observe,
	// Where programs run.
	"context":                findings.Plan,
	"context.cuda":           findings.Plan,
	"context.gpu-access":     findings.Plan,
	"context.job":            findings.Plan,
	"context.user-namespace": findings.Plan,
	"context.wsl":            findings.Plan,
	"context.suspend":        findings.Plan,
	// The GPU and the kernel's driver.
	"pci.gpus":           findings.Plan,
	"kernel.blocked":     findings.Plan,
	"driver.flavor":      findings.Plan,
	"driver.branch":      findings.Plan,
	"kernel.nvrm":        findings.Plan,
	"kernel.secure-boot": findings.Plan,
	// Device nodes.
	"devices.nodes":            findings.Plan,
	"devices.access":           findings.Plan,
	"containers.dev-char":      findings.Plan,
	"containers.device-cgroup": findings.Plan,
	// CUDA, cuDNN and the loader.
	"cuda.toolkit":         findings.Plan,
	"cuda.driver":          findings.Plan,
	"cuda.default":         findings.Plan,
	"cuda.nvcc":            findings.Plan,
	"cuda.loader":          findings.Plan,
	"loader":               findings.Plan,
	"loader.compat":        findings.Plan,
	"loader.cudnn":         findings.Plan,
	"loader.missing":       findings.Plan,
	"loader.shadowed":      findings.Plan,
	"cudnn":                findings.Plan,
	"cudnn.header-library": findings.Plan,
	// Frameworks and Python libraries.
	"framework":              findings.Plan,
	"framework.driver":       findings.Plan,
	"framework.cpu-only":     findings.Plan,
	"framework.arch":         findings.Plan,
	"framework.cudnn":        findings.Plan,
	"framework.libraries":    findings.Plan,
	"framework.cupy":         findings.Plan,
	"framework.jax-plugin":   findings.Plan,
	"framework.onnxruntime":  findings.Plan,
	"framework.requirements": findings.Plan,
	// The environment.
	"env.cuda-visible-devices": findings.Plan,
	"env.cuda-device-order":    findings.Plan,
	"env.ld-library-path":      findings.Plan,
	"env.stub-libcuda":         findings.Plan,
	"env.visible-devices-uuid": findings.Plan,
	// The GPUs' state and health.
	"gpu.state":            findings.Plan,
	"gpu.memory":           findings.Plan,
	"gpu.compute-mode":     findings.Plan,
	"gpu.mig":              findings.Plan,
	"gpu.mig-pending":      findings.Plan,
	"gpu.mig-persistence":  findings.Plan,
	"gpu.mig-layout":       findings.Plan,
	"gpu.mig-compute-mode": findings.Plan,
	"gpu.mig-processes":    findings.Plan,
	CheckGPUXid:            findings.Plan,
	CheckGPUReset:          findings.Plan,
	CheckGPUECC:            findings.Plan,
	CheckGPUMemRepair:      findings.Plan,
	CheckGPUThermal:        findings.Plan,
	CheckGPUNVLink:         findings.Plan,
	CheckGPUPCIeLink:       findings.Plan,
	CheckGPUPersistence:    findings.Plan,
	CheckGPUCounters:       findings.Plan,
	// Containers and Fabric Manager.
	"containers.toolkit": findings.Plan,
	"containers.engine":  findings.Plan,
	"containers.cdi":     findings.Plan,
	"fabric.manager":     findings.Plan,
}

// StageOf is the first command that reports rule id (a check's ID, with
// or without its subject); ok is false for an ID not in stages.
func StageOf(id string) (stage findings.Stage, ok bool) {
	id, _, _ = strings.Cut(id, ":")
	stage, ok = stages[id]
	return stage, ok
}

// stageChecks are the check functions of each stage that Judge runs, in
// Run's order: those that judge a rule of that stage. A plan's end state
// holds every fact as it will be, or leaves it unknown where only apply
// makes it known (facts.Prediction), and the checks skip themselves there.
var stageChecks = map[findings.Stage][]func(*doctor){
	findings.Observe: {
		(*doctor).pciDriver,
		(*doctor).kernelModule,
		(*doctor).kernelNouveau,
		(*doctor).kernelInitramfs,
		(*doctor).kernelDKMS,
		(*doctor).packagesUnfinished,
		(*doctor).nvmlInit,
		(*doctor).driverVersions,
		(*doctor).gpuBus,
	},
	findings.Plan: {
		(*doctor).runtimeContext,
		(*doctor).pciGPUs,
		(*doctor).kernelBlocked,
		(*doctor).driverFlavor,
		(*doctor).driverBranch,
		(*doctor).kernelNVRM,
		(*doctor).kernelSecureBoot,
		(*doctor).deviceNodes,
		(*doctor).deviceAccess,
		(*doctor).containerDevices,
		(*doctor).cudaToolkits,
		(*doctor).loaderToolkit,
		(*doctor).driverLibrary,
		(*doctor).cudnn,
		(*doctor).cudnnHeaderLibrary,
		(*doctor).frameworks,
		(*doctor).loaderFrameworks,
		(*doctor).pythonLibraries,
		(*doctor).visibleDevices,
		(*doctor).deviceOrder,
		(*doctor).ldLibraryPath,
		(*doctor).stubLibrary,
		(*doctor).visibleDeviceUUIDs,
		(*doctor).gpuState,
		(*doctor).migState,
		(*doctor).gpuHealth,
		(*doctor).programs,
		(*doctor).containers,
		(*doctor).fabricManager,
	},
}

// Judge runs the checks of one stage only, in Run's order: observe runs
// those of stage observe over the host as it is; plan runs both stages'
// over the host as its plan leaves it, so that it warns where doctor
// would after apply, in doctor's words.
func Judge(in Input, stage findings.Stage) []Check {
	d := &doctor{in: in, obs: in.Obs, out: make([]Check, 0, 2*len(stageChecks[stage]))}
	for _, c := range stageChecks[stage] {
		c(d)
	}
	// A check function may judge rules of several stages (containers
	// judges the toolkit, the engines and both CDI specs): only this
	// stage's are its verdicts.
	return slices.DeleteFunc(d.out, func(c Check) bool { return c.Stage != stage })
}

// doctor carries the input and the checks made so far.
type doctor struct {
	in  Input
	obs *facts.Observation
	out []Check
	// logGPUs is gpusForLog's answer, once asked.
	logGPUs []logGPU
}

func (d *doctor) add(c Check) {
	if c.Evidence == nil {
		c.Evidence = []string{}
	}
	if c.Stage == findings.Doctor {
		id, _, _ := strings.Cut(c.ID, ":")
		c.Stage = stages[id]
	}
	d.out = append(d.out, c)
}

// skip adds c as skipped: what it checks is not there to check, as
// summary says.
func (d *doctor) skip(c Check, summary string) {
	c.Status, c.Summary = Skipped, summary
	d.add(c)
}

// skipLive adds c as skipped when the host judged is a plan's predicted
// end state whose steps reset the GPUs' live state, which the
// observation holds only as it was before them (facts.Prediction); what
// names what c would judge.
func (d *doctor) skipLive(c Check, what string) bool {
	var why string
	switch p := d.obs.Predicted; {
	case p == nil:
	case p.Reboot:
		why = "the plan's reboot"
	case p.ModuleReload:
		why = "the plan's reload of the nvidia module"
	}
	if why == "" {
		return false
	}
	d.skip(c, fmt.Sprintf("%s: %s resets them, so doctor judges them after apply", what, why))
	return true
}

// skipUnpacked adds c as skipped when the host judged is a plan's
// predicted end state whose steps change the system's packages, whose
// maintainer scripts make what c reads (kernel modules, the initramfs,
// the database's states): it is known after apply.
func (d *doctor) skipUnpacked(c Check, what string) bool {
	if p := d.obs.Predicted; p != nil && p.Packages {
		d.skip(c, what+": the plan's package changes make them, so doctor judges them after apply")
		return true
	}
	return false
}

// hasGPU reports whether the host shows an NVIDIA GPU by any route.
func (d *doctor) hasGPU() bool { return HasGPU(d.obs) }

// moduleLoaded reports whether the nvidia kernel module runs.
func (d *doctor) moduleLoaded() bool {
	if d.obs.Driver.ModuleVersion != "" || d.obs.NVML.Status == "ok" {
		return true
	}
	return slices.ContainsFunc(d.obs.Kernel.Loaded, func(m facts.LoadedModule) bool { return m.Name == "nvidia" })
}

// driverVersion is the driver programs get (the rule DriverVersion).
func (d *doctor) driverVersion() (version.Version, string) {
	return DriverVersion(d.obs)
}

// gpuCCs returns the distinct compute capabilities of the host's GPUs
// with the GPUs that have each, from NVML or, without it, the device
// table.
func (d *doctor) gpuCCs() []ccGPUs {
	var out []ccGPUs
	add := func(cc, who string) {
		if cc == "" {
			return
		}
		for i := range out {
			if out[i].cc == cc {
				out[i].gpus = append(out[i].gpus, who)
				return
			}
		}
		out = append(out, ccGPUs{cc: cc, gpus: []string{who}})
	}
	if len(d.obs.NVML.Devices) > 0 {
		for _, g := range d.obs.NVML.Devices {
			add(g.ComputeCapability, fmt.Sprintf("GPU %d (%s)", g.Index, g.Name))
		}
	} else {
		for _, p := range d.obs.PCI {
			add(p.ComputeCapability, fmt.Sprintf("%s (%s)", p.Address, orUnknown(p.Model)))
		}
	}
	return out
}

type ccGPUs struct {
	cc   string
	gpus []string
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown model"
	}
	return s
}

// plural writes "1 GPU" or "3 GPUs".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func bytesText(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// initramfsCommand rebuilds the running kernel's initramfs on the host's
// distribution family.
func (d *doctor) initramfsCommand() string {
	if d.obs.OS.Family == "rpm" {
		return "dracut --force"
	}
	return "update-initramfs -u"
}
