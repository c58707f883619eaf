package apply

import "github.com/gpuenv/gpuenv/planner/plan"

// Inverse is what undoing one operation needs, recorded before the
// operation runs. Like Operation it is plain data from a closed set:
// exactly the field named by Kind is set. Paths of saved files are inside
// the root, so a rollback run later from any generation finds them.
type Inverse struct {
	Kind     plan.OpKind      `json:"kind"`
	File     *FileInverse     `json:"file,omitempty"`
	Group    *GroupInverse    `json:"group,omitempty"`
	Packages *PackagesInverse `json:"packages,omitempty"`
	Kernel   *KernelInverse   `json:"kernel,omitempty"`
	Service  *ServiceInverse  `json:"service,omitempty"`
	Device   *DeviceInverse   `json:"device,omitempty"`
	Refresh  *RefreshInverse  `json:"refresh,omitempty"`
}

// FileInverse is a file as it was: absent, a symlink, or a regular file
// whose bytes were saved.
type FileInverse struct {
	Path    string `json:"path"`
	Existed bool   `json:"existed"`
	// Symlink is the link's target, when the path was a symlink.
	Symlink string `json:"symlink,omitempty"`
	// Saved is where the previous bytes were kept.
	Saved string `json:"saved,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	// CreatedDirs are parent directories the write will create, deepest
	// last; undo removes them again when empty.
	CreatedDirs []string `json:"created_dirs,omitempty"`
	// After is the operation's follow-up command, run again once the
	// file is restored.
	After []string `json:"after,omitempty"`
}

// GroupInverse is a group as it was.
type GroupInverse struct {
	Group   string   `json:"group"`
	Existed bool     `json:"existed"`
	GID     int      `json:"gid,omitempty"`
	Members []string `json:"members,omitempty"`
}

// PackagesInverse is the state, before a transaction, of every package it
// could change: the ones it names and the ones the package manager's dry
// run said it would install, upgrade or remove as well.
type PackagesInverse struct {
	Manager  string         `json:"manager"`
	Packages []PriorPackage `json:"packages"`
	// Python is the interpreter pip ran with (pip transactions).
	Python string `json:"python,omitempty"`
	// Venv, with VenvCreated, is a virtual environment the transaction
	// created; undo removes it whole.
	Venv        string `json:"venv,omitempty"`
	VenvCreated bool   `json:"venv_created,omitempty"`
	// IndexURL is the index a pip transaction used, from which a version
	// whose saved wheel was pruned is fetched again.
	IndexURL string `json:"index_url,omitempty"`
	// Unfinished names the packages, outside the transaction, that dpkg
	// had already left half-done before it (an earlier failed upgrade):
	// the checks after the transaction and its undo do not hold them
	// against gpuenv.
	Unfinished []string `json:"unfinished,omitempty"`
}

// PriorPackage is one package before a transaction.
type PriorPackage struct {
	Name string `json:"name"`
	// Version is "" when the package was not installed.
	Version string `json:"version,omitempty"`
	// Status is dpkg's status ("install ok installed", "deinstall ok
	// config-files"); empty for pip.
	Status string `json:"status,omitempty"`
	Held   bool   `json:"held,omitempty"`
	// Saved is the package file (.deb, wheel) of Version, kept for an
	// offline reinstall; set when the transaction changes or removes it.
	Saved string `json:"saved,omitempty"`
	// SHA256 and Size are the saved file's when it was saved (.deb and
	// .rpm): undo checks the file against them before installing it, so
	// that a file damaged since is fetched again or named, never
	// installed. Generations from before they were recorded have
	// neither.
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// KernelInverse undoes a kernel operation: a module loaded again or
// unloaded, or the initramfs rebuilt once the files it is built from are
// restored.
type KernelInverse struct {
	Action string `json:"action"`
	Module string `json:"module,omitempty"`
	// AfterPackages is set on the inverse of a module reload's unload:
	// the module that was unloaded is the old driver's, whose files on
	// disk the package transaction replaced, so it loads again only once
	// that transaction is undone (the engine runs it then).
	AfterPackages bool `json:"after_packages,omitempty"`
	// Version is the driver version the module had; once loaded again it
	// must have it.
	Version string `json:"version,omitempty"`
	// Nothing says why an inverse with no action has nothing to undo,
	// where it is not that the module was already in that state.
	Nothing string `json:"nothing,omitempty"`
}

// ServiceInverse is a unit's enablement (and, on a live root, activity)
// before.
type ServiceInverse struct {
	Unit    string `json:"unit"`
	Enabled bool   `json:"enabled"`
	// Active is recorded only when the operation starts or stops the unit.
	Active *bool `json:"active,omitempty"`
	// RunOnly is set when the operation only stopped or started the unit
	// (ServiceOp.Run): its undo starts or stops it again.
	RunOnly bool `json:"run_only,omitempty"`
	// AfterPackages is set on the inverse of a module reload's stop: the
	// service starts again once the old module is back
	// (KernelInverse.AfterPackages).
	AfterPackages bool `json:"after_packages,omitempty"`
}

// afterPackages reports whether inv waits for the package transaction
// before it to be undone.
func (inv *Inverse) afterPackages() bool {
	return inv.Kernel != nil && inv.Kernel.AfterPackages || inv.Service != nil && inv.Service.AfterPackages
}

// RefreshInverse is the inverse of a refresh of a package manager's
// indexes, which restores nothing (refreshExecutor says why).
type RefreshInverse struct {
	Manager string `json:"manager"`
}

// DeviceInverse is a device setting's previous value. For a GPU
// instance, Value is whether an instance was at the placement
// (plan.GPUInstancePresent) and Instance is that instance, with the
// compute instances it had: undoing its destruction creates it again
// where it was.
type DeviceInverse struct {
	UUID     string            `json:"uuid"`
	Setting  string            `json:"setting"`
	Value    string            `json:"value"`
	Instance *plan.MIGInstance `json:"instance,omitempty"`
}
