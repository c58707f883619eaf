// Package providers holds one sub-package per resource kind, and the
// observers that are no kind; this file is the observation that runs
// their observers, in the order their facts feed each other, so that
// every file of the host is read once.
package providers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// ObserveOptions are what an observation needs besides the host.
type ObserveOptions = kind.Options

// observers are every descriptor's observers in the order their sections
// feed each other (kind.ObserveOrder), worked out once.
var observers = sync.OnceValues(func() ([]*kind.Observer, error) { return kind.ObserveOrder(descriptors) })

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
	obs := &facts.Observation{FormatVersion: jsonformat.Version, SchemaVersion: facts.SchemaVersion, SchemaMinor: facts.SchemaMinor, Root: h.Root()}
	in := kind.Input{Host: h, NVML: opts.NVML, Options: opts}
	if in.NVML == nil {
		in.NVML = h.NVML()
	}
	run(ctx, in, obs, mustObservers())
	// The problems are doctor's rules of stage observe, judged once every
	// section is in: a rule reads facts of several observers.
	obs.Problems = doctor.ObserveFindings(obs)
	pathsInsideRoot(obs, h.Root())
	normalize(obs)
	return obs
}

// mustObservers returns the observers in order; the descriptors are
// the program's own, and a test holds them to a sound order.
func mustObservers() []*kind.Observer {
	obs, err := observers()
	if err != nil {
		panic("the providers' observers: " + err.Error())
	}
	return obs
}

func run(ctx context.Context, in kind.Input, obs *facts.Observation, list []*kind.Observer) {
	for _, o := range list {
		obs.Warnings = append(obs.Warnings, o.Observe(ctx, in, obs)...)
	}
}

// observersFor returns, in order, the observers that write the sections
// of want and those that write what they read, and no other.
func observersFor(want ...string) []*kind.Observer {
	all := mustObservers()
	need := map[string]bool{}
	for _, sec := range want {
		need[sec] = true
	}
	keep := make([]bool, len(all))
	// Readers come after their writers, so one pass from the end finds
	// every writer a kept observer needs.
	for i := len(all) - 1; i >= 0; i-- {
		for _, sec := range all[i].Writes {
			if need[sec] {
				keep[i] = true
			}
		}
		if keep[i] {
			for _, sec := range all[i].Reads {
				need[sec] = true
			}
		}
	}
	var out []*kind.Observer
	for i, o := range all {
		if keep[i] {
			out = append(out, o)
		}
	}
	return out
}

// IndexesOf returns what reads h's package indexes as Observe does, for
// apply (apply.HostExecutor.Indexes): the observers of the package
// indexes and of what they read (the sources, the installed packages),
// and nothing else of the host.
func IndexesOf(h *host.Host) func(ctx context.Context) (*facts.PackageIndexes, error) {
	list := observersFor(kind.PackageIndexes)
	return func(ctx context.Context) (*facts.PackageIndexes, error) {
		var obs facts.Observation
		in := kind.Input{Host: h}
		var warns []facts.Warning
		for _, o := range list {
			w := o.Observe(ctx, in, &obs)
			if slices.Contains(o.Writes, kind.PackageIndexes) {
				warns = append(warns, w...)
			}
		}
		ix := obs.PackageIndexes
		if len(ix.Indexes) == 0 && len(warns) > 0 {
			return nil, fmt.Errorf("%s: %s", warns[0].Path, warns[0].Message)
		}
		return &ix, nil
	}
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
	empty((*[]finding.Finding)(&obs.Problems))
	empty(&obs.Warnings)
}

func empty[T any](s *[]T) {
	if *s == nil {
		*s = []T{}
	}
}
