// Package providers holds one sub-package per resource kind; this file is
// the observation that runs them all, in the order their facts feed each
// other, so that every file of the host is read once.
package providers

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/cuda"
	"github.com/gpuenv/gpuenv/providers/cudnn"
	"github.com/gpuenv/gpuenv/providers/devaccess"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/framework"
	"github.com/gpuenv/gpuenv/providers/groups"
	"github.com/gpuenv/gpuenv/providers/health"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgindex"
	"github.com/gpuenv/gpuenv/providers/kernellog"
	"github.com/gpuenv/gpuenv/providers/loader"
	"github.com/gpuenv/gpuenv/providers/packages"
	"github.com/gpuenv/gpuenv/providers/pydeps"
	"github.com/gpuenv/gpuenv/providers/repository"
	"github.com/gpuenv/gpuenv/providers/runtime"
	"github.com/gpuenv/gpuenv/providers/session"
	"github.com/gpuenv/gpuenv/providers/system"
)

// ObserveOptions are what an observation needs besides the host.
type ObserveOptions struct {
	// Pythons are interpreters, as paths inside the root, whose
	// environments are observed besides the system's: --python and the
	// spec's.
	Pythons []string
	// NVML replaces the host's own (host.Host.NVML); tests hand in
	// go-nvml's mock through host.NewNVML. Nil: the host's.
	NVML host.NVML
	// Programs are native programs, as paths inside the root, whose
	// libraries the loader model resolves (doctor --program).
	Programs []string
	// Session holds variables of the environment gpuenv was started
	// from; the loader model adds its LD_LIBRARY_PATH. Leave it empty
	// when the root is not this machine's.
	Session []facts.Assignment
	// Home is the invoking user's home directory inside the root, whose
	// shell start-up files are read; "" for none.
	Home string
	// PID names a running process whose environment (/proc/PID/environ)
	// is the one its GPU programs run in (doctor --pid); 0 for none.
	PID int
}

// Observe reads everything gpuenv knows how to see on h. It never fails:
// what could not be read is a warning in the result, and the rest stands.
// It starts no process on a Debian-family host and changes nothing but
// gpuenv's cache of the package indexes' relevant stanzas, when run as
// root (pkgindex.CacheDir).
func Observe(ctx context.Context, h *host.Host, opts ObserveOptions) *facts.Observation {
	// Nothing changes the root while it is observed, so path resolution
	// may be remembered for the length of this pass.
	h = h.ForObservation()
	defer h.Close()
	obs := &facts.Observation{FormatVersion: facts.FormatVersion(), SchemaVersion: facts.SchemaVersion, SchemaMinor: facts.SchemaMinor, Root: h.Root()}
	n := opts.NVML
	if n == nil {
		n = h.NVML()
	}
	// The OS and the running kernel come first: the package family and
	// the kernel release decide what the others read.
	system.Observe(ctx, h, obs)
	driver.Observe(ctx, h, n, obs)
	obs.Kernel.Log = kernellog.Observe(ctx, h, kernellog.DefaultLimits)
	health.Observe(h, obs)

	var warns []facts.Warning
	add := func(w []facts.Warning) { obs.Warnings = append(obs.Warnings, w...) }
	obs.Packages, warns = packages.Observe(ctx, h, obs.OS.Family)
	add(warns)
	obs.Repositories, warns = repository.Observe(h, obs.OS.Family)
	add(warns)
	obs.RepositoryFiles = repository.ObserveFiles(h, obs.OS.Family, obs.Repositories...)
	obs.PackageIndexes, warns = pkgindex.Read(h, pkgindex.Options{Family: obs.OS.Family, Repositories: obs.Repositories, Installed: obs.Packages.Packages, Arch: obs.OS.Arch})
	add(warns)
	// The toolkit and cuDNN observers take the package list rather than
	// read the database again.
	obs.CUDA, warns = cuda.Observe(h, obs.Packages)
	add(warns)
	obs.CuDNN, warns = cudnn.Observe(h, obs.Packages)
	add(warns)
	obs.Python, warns = framework.Observe(h, obs.Packages, opts.Pythons)
	add(warns)
	add(pydeps.Observe(h, obs.Python, obs.OS.Arch))
	obs.Groups, warns = groups.Observe(h)
	add(warns)
	obs.Environment, warns = environment.Observe(h)
	add(warns)
	obs.Session, warns = session.Observe(h, session.Options{Home: opts.Home, PID: opts.PID, Session: opts.Session, System: obs.Environment.Variables, LoaderPaths: obs.Environment.LoaderPaths})
	add(warns)
	obs.Units = []facts.Unit{driver.ObserveUnit(h), devices.ObserveUnit(h), devices.ObserveMIGUnit(h)}
	driver.ObserveFabric(h, obs)
	obs.Containers, warns = containers.Observe(ctx, h, obs.Packages, obs.Driver)
	add(warns)

	nameDeviceGroups(obs)
	// The context and the loader read what the observers above found:
	// device nodes, driver libraries, toolkits, Python environments.
	obs.Context = runtime.Observe(h, obs)
	obs.DeviceAccess = devaccess.Observe(h, obs)
	// A named process's environment is the one its programs load
	// libraries in, not gpuenv's own.
	loaderSession := opts.Session
	if p := obs.Session.Process; p != nil && p.Error == "" {
		loaderSession = p.Variables
	}
	obs.Loader, warns = loader.Observe(h, obs, loader.Options{Programs: opts.Programs, Session: loaderSession})
	add(warns)
	unfinishedPackages(obs)
	pathsInsideRoot(obs, h.Root())
	normalize(obs)
	return obs
}

// IndexesOf returns what reads h's package indexes as Observe does, for
// apply (apply.HostExecutor.Indexes): the sources, the installed packages
// and the indexes, and nothing else of the host.
func IndexesOf(h *host.Host) func(ctx context.Context) (*facts.PackageIndexes, error) {
	return func(ctx context.Context) (*facts.PackageIndexes, error) {
		var sys facts.Observation
		system.Observe(ctx, h, &sys)
		pkgs, _ := packages.Observe(ctx, h, sys.OS.Family)
		repos, _ := repository.Observe(h, sys.OS.Family)
		ix, warns := pkgindex.Read(h, pkgindex.Options{Family: sys.OS.Family, Repositories: repos, Installed: pkgs.Packages, Arch: sys.OS.Arch})
		if len(ix.Indexes) == 0 && len(warns) > 0 {
			return nil, fmt.Errorf("%s: %s", warns[0].Path, warns[0].Message)
		}
		return &ix, nil
	}
}

// unfinishedPackages flags packages a package manager left half done: an
// install or upgrade that was interrupted, whose files or configuration
// are not what any version expects. Each gets the fix that works for its
// state: dpkg --configure -a finishes configuring unpacked packages and
// runs pending triggers, but passes over a package whose unpack was cut
// short (half-installed, or flagged reinstreq): only reinstalling it,
// removing it, or gpuenv rollback where a gpuenv run was cut short, mends
// that one.
func unfinishedPackages(obs *facts.Observation) {
	var reinstall, names, configure []string
	for _, p := range obs.Packages.Packages {
		switch {
		case p.ReinstallRequired || p.State == facts.StateHalfInstalled:
			state := string(p.State)
			if p.ReinstallRequired {
				state += ", reinstall required"
			}
			reinstall = append(reinstall, p.Name)
			names = append(names, p.Name+" ("+state+")")
		case p.State == facts.StateUnpacked, p.State == facts.StateHalfConfigured, p.State == facts.StateTriggersAwaited, p.State == facts.StateTriggersPending:
			configure = append(configure, p.Name+" ("+string(p.State)+")")
		}
	}
	if len(reinstall) > 0 {
		pkgs := strings.Join(reinstall, " ")
		obs.Problems = append(obs.Problems, facts.Problem{Layer: "packages", Message: "an install or upgrade stopped while unpacking, and dpkg --configure -a does not mend it: " +
			strings.Join(names, ", ") + " — if a gpuenv apply or rollback was cut short (gpuenv history shows it running or failed), run gpuenv rollback; " +
			"otherwise reinstall them (apt-get install --reinstall " + pkgs + ", or dpkg -i of their .deb files), " +
			"or remove those that should not be installed (dpkg --remove --force-remove-reinstreq " + pkgs + ")"})
	}
	if len(configure) == 0 {
		return
	}
	fix := "run dpkg --configure -a"
	if obs.Packages.Manager == facts.DatabaseRPM {
		fix = "finish or undo the transaction with dnf"
	}
	obs.Problems = append(obs.Problems, facts.Problem{Layer: "packages", Message: "an install or upgrade did not finish: " + strings.Join(configure, ", ") + " — " + fix})
}

// pathsInsideRoot rewrites the host paths that error texts carry ("open
// /mnt/img/var/lib/dpkg/status: …") as paths inside the root, which is how
// every path in the document is meant.
func pathsInsideRoot(obs *facts.Observation, root string) {
	if root == "/" {
		return
	}
	prefix := strings.TrimSuffix(root, "/") + "/"
	for i := range obs.Warnings {
		obs.Warnings[i].Message = strings.ReplaceAll(obs.Warnings[i].Message, prefix, "/")
	}
}

// nameDeviceGroups gives each device node its group's name from the
// groups already read, rather than reading /etc/group a second time.
func nameDeviceGroups(obs *facts.Observation) {
	names := make(map[uint32]string, len(obs.Groups))
	for _, g := range obs.Groups {
		names[g.GID] = g.Name
	}
	for i := range obs.DeviceNodes {
		obs.DeviceNodes[i].Group = names[obs.DeviceNodes[i].GID]
	}
}

// normalize makes empty lists print as [] rather than null, so that a
// consumer of the JSON document can tell "none" from a missing section.
func normalize(obs *facts.Observation) {
	empty(&obs.PCI)
	empty(&obs.DeviceNodes)
	empty(&obs.Repositories)
	empty(&obs.Kernel.Loaded)
	empty(&obs.Kernel.Blacklists)
	empty(&obs.Kernel.Installed)
	if obs.Kernel.Log != nil {
		empty(&obs.Kernel.Log.Events)
	}
	empty(&obs.Problems)
	empty(&obs.Warnings)
}

func empty[T any](s *[]T) {
	if *s == nil {
		*s = []T{}
	}
}
