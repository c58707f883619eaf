package plan

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/finding"
)

// FormatVersion is the version of the JSON plan document: gpuenv's one
// JSON format version (jsonformat.Version). A reader refuses a document
// whose major version it does not know, and reads the 1.x plans written
// before the documents shared one version (1.2 wrote a version known only
// after apply as "version": null with "known_after_apply": true, and added
// the refresh operation).
const FormatVersion = jsonformat.Version

// Action is what a step does to its resource, as Terraform says it. The
// zero value is NoOp, so an unset Action can never change a host.
type Action int

const (
	NoOp    Action = iota // nothing to do; never in a plan's steps
	Create                // "+": the resource does not exist and will
	Update                // "~": changed in place
	Replace               // "-/+": removed, then created anew
	Delete                // "-": removed
)

var actionNames = [...]string{NoOp: "no-op", Create: "create", Update: "update", Replace: "replace", Delete: "delete"}
var actionSymbols = [...]string{NoOp: " ", Create: "+", Update: "~", Replace: "-/+", Delete: "-"}

func (a Action) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return fmt.Sprintf("Action(%d)", int(a))
	}
	return actionNames[a]
}

// Symbol is the prefix the human plan prints for the action.
func (a Action) Symbol() string {
	if a < 0 || int(a) >= len(actionSymbols) {
		return "?"
	}
	return actionSymbols[a]
}

// MarshalJSON writes the action's name.
func (a Action) MarshalJSON() ([]byte, error) {
	if a < 0 || int(a) >= len(actionNames) {
		return nil, fmt.Errorf("invalid action %d", int(a))
	}
	return json.Marshal(actionNames[a])
}

// UnmarshalJSON is the exact inverse of MarshalJSON.
func (a *Action) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for i, n := range actionNames {
		if n == s {
			*a = Action(i)
			return nil
		}
	}
	return fmt.Errorf("unknown action %q", s)
}

// Plan is everything that must change, in the order it will be done.
type Plan struct {
	FormatVersion string `json:"format_version"`
	// Summary counts the steps as the closing line of the human plan does.
	Summary Summary `json:"summary"`
	// SpecDigest is a SHA-256 over the spec's files, so a generation can
	// say which spec it applied.
	SpecDigest string `json:"spec_digest,omitempty"`
	// Steps are in execution order; a converged host has none.
	Steps []Step `json:"steps"`
	// Transactions are the package-manager transactions that carry out the
	// steps' package operations, each run once, when apply reaches the
	// first operation that names it (Operation.Transaction). A transaction
	// serving several steps is the union of their operations; each step
	// still lists its own part, so that a reader sees per-step pins.
	Transactions []Transaction `json:"transactions,omitempty"`
	// Inferred are values the spec left out that the planner completed
	// from its compatibility tables.
	Inferred []Inference `json:"inferred,omitempty"`
	// Warnings are what the user needs to know that does not stop the
	// plan: findings of stage plan (or observe) about the host as the
	// plan leaves it, each with the ID of its rule under "check".
	Warnings finding.Warnings `json:"warnings,omitempty"`
	// NeedsReboot is true when any step needs one for the change to take
	// effect.
	NeedsReboot bool `json:"needs_reboot"`
}

// Step is one resource's change.
type Step struct {
	// Address names the resource. Its first part (up to the first dot) is
	// the resource's kind; together with the whole address it places the
	// step in the plan's order (see Kinds.Layer):
	//
	//	repository.<name>  an APT repository (sources list, key, pin)
	//	index.<manager>    refreshing a package manager's indexes
	//	                   ("index.apt": apt-get update)
	//	driver.purge       removing driver packages that conflict with the
	//	                   spec's (another branch, flavour or source)
	//	kernel.nouveau     blacklisting nouveau and rebuilding the initramfs
	//	kernel.headers     headers of the running kernel, for DKMS
	//	driver             the driver packages
	//	driver.hold        holding them against unplanned upgrades
	//	driver.persistence nvidia-persistenced
	//	cuda, cudnn        the toolkit and cuDNN
	//	framework.<name>   a framework ("framework.pytorch"; a second
	//	                   environment for the same framework adds its
	//	                   key: "framework.pytorch[/opt/venv]")
	//	group.<name>, environment, device.<selector>
	//	container_toolkit  the NVIDIA container toolkit's packages
	//	container_toolkit.engine.<engine>
	//	                   the NVIDIA runtime in an engine's configuration
	//	container_toolkit.cdi
	//	                   the CDI spec, /etc/cdi/nvidia.yaml
	//	container_toolkit.cdi_management
	//	                   the CDI management spec,
	//	                   /etc/cdi/management.nvidia.com-gpu.yaml
	Address string `json:"address"`
	Action  Action `json:"action"`
	// Before and After are the resource's observed and desired values, by
	// attribute; a created resource has no Before, a deleted one no After.
	// An update lists the same attributes in both, so that a reader sees
	// what stays as well as what changes.
	Before map[string]string `json:"before,omitempty"`
	After  map[string]string `json:"after,omitempty"`
	// Reason says in words why the step is needed.
	Reason string `json:"reason"`
	// ReasonCode says why as one of a closed set of words (ReasonCodes),
	// for programs. Every provider sets it; a plan of format 1.0 has none.
	ReasonCode ReasonCode `json:"action_reason,omitempty"`
	// Operations carry the step out, in order.
	Operations []Operation `json:"operations"`
	// DependsOn lists the addresses of steps that must run first.
	DependsOn []string `json:"depends_on,omitempty"`
	Flags     Flags    `json:"flags"`
}

// Flags are consequences of a step a user must know before applying.
type Flags struct {
	NeedsReboot       bool `json:"needs_reboot,omitempty"`
	NeedsModuleReload bool `json:"needs_module_reload,omitempty"`
	// InterruptsGPUProcesses is set by the provider when the step stops
	// GPU clients by itself, and by the planner on every step that needs
	// a module reload while the facts show GPU processes running.
	InterruptsGPUProcesses bool `json:"interrupts_gpu_processes,omitempty"`
	// BuildsKernelModule is true when the step builds the nvidia module
	// with DKMS (rather than installing a prebuilt one): with Secure Boot
	// on, such a module loads only once its signing key is enrolled.
	BuildsKernelModule bool `json:"builds_kernel_module,omitempty"`
}

// Inference is a value the spec did not give, completed from a table.
type Inference struct {
	Address string `json:"address"`
	Attr    string `json:"attribute"`
	Value   string `json:"value"`
	// From names the table row and its source, e.g. "torch_variants row
	// 2.5 cu124 (pytorch-release)", or for a value read from the host,
	// what it was read from: the installed package and the package index
	// that lists it, the index that offers a version.
	From string `json:"from"`
	// Unverified names the row From cites and its fields that no source
	// confirms ("torch_releases row 2.1: default_variant"), when there
	// are any: a plan lists them once, after the inferred values.
	Unverified string `json:"unverified,omitempty"`
}

// OpKind names an operation's kind. The set is closed: apply knows how to
// run and invert each of these, and nothing else.
type OpKind string

const (
	OpPackages OpKind = "packages" // a package transaction
	OpFile     OpKind = "file"     // write or remove one file
	OpGroup    OpKind = "group"    // create a group, add or remove members
	OpKernel   OpKind = "kernel"   // rebuild the initramfs, load or unload a module
	OpService  OpKind = "service"  // enable or disable a systemd unit
	OpDevice   OpKind = "device"   // an NVML device setting
	OpRefresh  OpKind = "refresh"  // fetch a package manager's indexes
)

// Operation is one primitive, executable change. Exactly the field named
// by Kind is set.
type Operation struct {
	Kind OpKind `json:"kind"`
	// Transaction is set on a package operation of a planned Plan: the
	// number (Transaction.ID) of the plan's transaction that carries it
	// out. Apply runs that transaction when it meets the first operation
	// naming it and skips the operations naming it after that.
	Transaction int         `json:"transaction,omitempty"`
	Packages    *PackagesOp `json:"packages,omitempty"`
	File        *FileOp     `json:"file,omitempty"`
	Group       *GroupOp    `json:"group,omitempty"`
	Kernel      *KernelOp   `json:"kernel,omitempty"`
	Service     *ServiceOp  `json:"service,omitempty"`
	Device      *DeviceOp   `json:"device,omitempty"`
	Refresh     *RefreshOp  `json:"refresh,omitempty"`
}

// PackagesOp is one package-manager transaction. Apply computes its inverse
// from the package state before it runs.
type PackagesOp struct {
	// Manager is "apt", "dnf" or "pip".
	Manager Manager `json:"manager"`
	// Install pins exact versions (name=version).
	Install []PackagePin `json:"install,omitempty"`
	Remove  []string     `json:"remove,omitempty"`
	// Purge removes configuration files too (apt).
	Purge  bool     `json:"purge,omitempty"`
	Hold   []string `json:"hold,omitempty"`
	Unhold []string `json:"unhold,omitempty"`
	// AllowDowngrade is set when a pin is older than what is installed.
	AllowDowngrade bool `json:"allow_downgrade,omitempty"`
	// Reinstall installs the pins again at the versions installed now
	// (-replace): apt-get install --reinstall, dnf reinstall, pip's
	// --force-reinstall --no-deps. It removes, holds and releases
	// nothing, and joins no other transaction.
	Reinstall bool `json:"reinstall,omitempty"`
	// For pip: Python is the interpreter pip runs with; when Venv is set,
	// pip runs the venv's own bin/python and Python is the interpreter that
	// creates the venv first if it does not exist. IndexURL is the index to
	// install from.
	Python   string `json:"python,omitempty"`
	Venv     string `json:"venv,omitempty"`
	IndexURL string `json:"index_url,omitempty"`
}

// PipInto reports whether a pip transaction installs into the Python
// environment with that prefix and interpreter: its venv's, else the
// interpreter it runs with.
func (p *PackagesOp) PipInto(prefix, interpreter string) bool {
	return p.Manager == ManagerPip && (p.Venv != "" && prefix == p.Venv || p.Venv == "" && interpreter == p.Python)
}

// PackagePin is a package at an exact version.
type PackagePin struct {
	Name string `json:"name"`
	// Version is the exact version to install. It is empty only when the
	// version is known after apply (KnownAfterApply): the package manager
	// cannot list the package until a step before it ran, one that
	// configures its repository or refreshes indexes that are not on disk.
	// Apply then pins, once that step ran, the newest version the indexes
	// list that satisfies Constraint, and journals it.
	Version    string `json:"version"`
	Constraint string `json:"constraint,omitempty"`
	// Extras are pip extras ("and-cuda").
	Extras []string `json:"extras,omitempty"`
}

// KnownAfterApply reports whether the pin's version is left to apply.
func (p PackagePin) KnownAfterApply() bool { return p.Version == "" }

// pinJSON is PackagePin as the plan document writes it: a version known
// only after apply is null, and says so, as Terraform writes an unknown
// value.
type pinJSON struct {
	Name            string   `json:"name"`
	Version         *string  `json:"version"`
	KnownAfterApply bool     `json:"known_after_apply,omitempty"`
	Constraint      string   `json:"constraint,omitempty"`
	Extras          []string `json:"extras,omitempty"`
}

// MarshalJSON writes a version known after apply as null.
func (p PackagePin) MarshalJSON() ([]byte, error) {
	j := pinJSON{Name: p.Name, Constraint: p.Constraint, Extras: p.Extras}
	if p.KnownAfterApply() {
		j.KnownAfterApply = true
	} else {
		j.Version = &p.Version
	}
	return json.Marshal(j)
}

// UnmarshalJSON is the inverse of MarshalJSON. It also reads format 1.1,
// which wrote a version known after apply as "". A pin that has both a
// version and known_after_apply is refused: it would say two things.
func (p *PackagePin) UnmarshalJSON(b []byte) error {
	var j pinJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = PackagePin{Name: j.Name, Constraint: j.Constraint, Extras: j.Extras}
	if j.Version != nil {
		p.Version = *j.Version
	}
	if j.KnownAfterApply && p.Version != "" {
		return fmt.Errorf("pin of %s has version %q and is known after apply", j.Name, p.Version)
	}
	return nil
}

// FileOp writes (or, with Remove, deletes) one file inside the root.
type FileOp struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Mode    uint32 `json:"mode,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Remove  bool   `json:"remove,omitempty"`
	// After is the argv of one command to run once the file changed and
	// once more after it is restored: ["ldconfig"], ["systemctl",
	// "daemon-reload"].
	After []string `json:"after,omitempty"`
	// Generate, instead of Content, names what apply makes the file's
	// content from when the operation runs, from the host's files as the
	// steps before it left them: GenerateCDI, the CDI spec of a driver
	// this plan installs.
	Generate string `json:"generate,omitempty"`
	// Symlink, instead of Content, makes the file a symbolic link to
	// this path (a /dev/char link to an NVIDIA device node). Its inverse
	// removes the link, or puts back what was there.
	Symlink string `json:"symlink,omitempty"`
	// Key, instead of Content, is a repository's signing key that apply
	// fetches when the operation runs and writes only when its
	// fingerprint is the pinned one; otherwise the operation fails, naming
	// both, before any package manager reads the repository.
	Key *KeyFetch `json:"key,omitempty"`
}

// KeyFetch is a signing key to fetch and check (FileOp.Key).
type KeyFetch struct {
	// URL is where the key file is: https, http or file (a path inside
	// the root). The fingerprint, not the transport, is what is trusted.
	URL string `json:"url"`
	// Fingerprint is the primary key's full fingerprint, upper-case hex;
	// the file must hold that key and no other.
	Fingerprint string `json:"fingerprint"`
	// Armored writes the key ASCII-armored, as rpm imports it; else in
	// binary, as apt's Signed-By reads a .gpg keyring.
	Armored bool `json:"armored,omitempty"`
}

// FileOp.Generate for the CDI spec and the CDI management spec.
const (
	GenerateCDI           = "cdi"
	GenerateManagementCDI = "cdi-management"
)

// GroupOp creates a group when missing and changes its members.
type GroupOp struct {
	Group  string `json:"group"`
	Create bool   `json:"create,omitempty"`
	// System creates the group as a system group (groupadd -r: a gid below
	// the first user gid), as distributions make the device groups.
	System bool     `json:"system,omitempty"`
	Delete bool     `json:"delete,omitempty"`
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// RefreshOp fetches a package manager's indexes from its configured
// sources: apt-get update, dnf makecache. The plan runs it first where
// the indexes it needs are not on disk (an image before its first
// apt-get update), so that the steps after it install versions the
// archive has. Its inverse does nothing: the indexes are a cache of the
// archives, which apt itself refreshes whenever it is told to, and
// undoing a package step restores saved package files, never from the
// indexes.
type RefreshOp struct {
	Manager Manager `json:"manager"`
}

// RefreshCommand is the command that refreshes manager's indexes; nil
// for a manager that has none (pip).
func RefreshCommand(m Manager) []string {
	switch m {
	case ManagerApt:
		return []string{"apt-get", "update"}
	case ManagerDnf:
		return []string{"dnf", "makecache"}
	}
	return nil
}

// Manager names the package manager that runs a package transaction.
type Manager string

const (
	ManagerApt Manager = "apt"
	ManagerDnf Manager = "dnf"
	ManagerPip Manager = "pip"
)

// KernelAction is what a kernel operation does.
type KernelAction string

const (
	KernelRebuildInitramfs KernelAction = "rebuild_initramfs"
	KernelLoadModule       KernelAction = "load_module"   // modprobe Module
	KernelUnloadModule     KernelAction = "unload_module" // modprobe -r Module
	// KernelCheckVersion confirms that the loaded nvidia module, as
	// /proc/driver/nvidia/version and NVML report it, is Version: the
	// last operation of a module reload.
	KernelCheckVersion KernelAction = "check_version"
	// KernelStopProcess stops the GPU process PID (Process is its command
	// name, which must still match) so that the modules can be unloaded;
	// planned only with --interrupt-gpu-processes. A stopped process is
	// not started again: nothing knows how it was started.
	KernelStopProcess KernelAction = "stop_process"
)

// KernelOp changes the kernel's state.
type KernelOp struct {
	Action KernelAction `json:"action"`
	Module string       `json:"module,omitempty"`
	// Reload marks the load, unload and check of a module reload after a
	// driver's packages changed: the module files on disk are the new
	// driver's, and the old module loads again only once the package
	// transaction is undone, so their inverses wait for that.
	Reload bool `json:"reload,omitempty"`
	// Version is the driver version check_version expects.
	Version string `json:"version,omitempty"`
	// PID and Process name the process stop_process stops.
	PID     int    `json:"pid,omitempty"`
	Process string `json:"process,omitempty"`
}

// ServiceOp enables or disables a systemd unit, or, with Run, only stops
// or starts it.
type ServiceOp struct {
	Unit   string `json:"unit"`
	Enable bool   `json:"enable"`
	// Now also starts or stops the unit.
	Now bool `json:"now,omitempty"`
	// Run is ServiceStop or ServiceStart: the unit is stopped or started
	// and its enablement left as it is (Enable and Now are unused). A
	// module reload stops what holds the modules and starts it again.
	Run string `json:"run,omitempty"`
	// Reload marks the stop and start of a module reload (KernelOp.Reload).
	Reload bool `json:"reload,omitempty"`
}

// Service runs.
const (
	ServiceStop  = "stop"
	ServiceStart = "start"
)

// DeviceOp sets one NVML setting on one device.
type DeviceOp struct {
	// UUID identifies the device; Index is for the reader.
	UUID  string `json:"uuid"`
	Index int    `json:"index"`
	// Value is one the setting takes.
	Setting DeviceSetting `json:"setting"`
	Value   string        `json:"value"`
	// Instance is the GPU instance of SettingGPUInstance: created with
	// its compute instances (Value GPUInstancePresent) or destroyed
	// (GPUInstanceAbsent). Its profile and placement name it.
	Instance *MIGInstance `json:"instance,omitempty"`
}

// MIGInstance is a MIG GPU instance at a placement, with the compute
// instances it holds.
type MIGInstance struct {
	// Profile is the profile's name ("3g.40gb"), ProfileID NVML's id.
	Profile   string `json:"profile"`
	ProfileID int    `json:"profile_id"`
	// Start and Size are the placement, in memory slices.
	Start int `json:"placement_start"`
	Size  int `json:"placement_size"`
	// Compute are its compute instances by their number of compute
	// slices.
	Compute []int `json:"compute_slices"`
}

// DeviceSetting names an NVML device setting.
type DeviceSetting string

const (
	// SettingPersistenceMode takes PersistenceEnabled or PersistenceDisabled.
	SettingPersistenceMode DeviceSetting = "persistence_mode"
	// SettingComputeMode takes the spec's compute modes (spec.ComputeMode).
	SettingComputeMode DeviceSetting = "compute_mode"
	// SettingMIGMode takes spec.MIGEnabled or spec.MIGDisabled: the mode
	// NVML activates at once when it can reset the GPU, else at the
	// next reset or reboot.
	SettingMIGMode DeviceSetting = "mig_mode"
	// SettingGPUInstance takes GPUInstancePresent or GPUInstanceAbsent,
	// for DeviceOp.Instance.
	SettingGPUInstance DeviceSetting = "gpu_instance"
)

// The values of SettingGPUInstance.
const (
	GPUInstancePresent = "present"
	GPUInstanceAbsent  = "absent"
)

// The values of SettingPersistenceMode.
const (
	PersistenceEnabled  = "enabled"
	PersistenceDisabled = "disabled"
)

// Transaction is one package-manager run serving one or more steps.
type Transaction struct {
	// ID numbers the plan's transactions from 1, in execution order.
	ID int `json:"id"`
	// Steps are the addresses of the steps whose package operations it
	// carries out, in plan order.
	Steps []string   `json:"steps"`
	Op    PackagesOp `json:"operation"`
}

// Summary counts a plan's changes: a replacement adds and removes.
type Summary struct {
	Add    int `json:"add"`
	Change int `json:"change"`
	Remove int `json:"remove"`
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Steps) == 0 }

// Step returns the step at address, or nil.
func (p *Plan) Step(address string) *Step {
	for i := range p.Steps {
		if p.Steps[i].Address == address {
			return &p.Steps[i]
		}
	}
	return nil
}

// Sentence joins the clauses of a step's reason into one sentence.
func Sentence(parts []string) string {
	s := strings.Join(parts, "; ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
