package providers

import (
	"cmp"
	"slices"
	"sync"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/cuda"
	"github.com/gpuenv/gpuenv/providers/cudnn"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/framework"
	"github.com/gpuenv/gpuenv/providers/groups"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kernel"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/providers/observer/devaccess"
	"github.com/gpuenv/gpuenv/providers/observer/health"
	"github.com/gpuenv/gpuenv/providers/observer/kernellog"
	"github.com/gpuenv/gpuenv/providers/observer/loader"
	"github.com/gpuenv/gpuenv/providers/observer/packages"
	"github.com/gpuenv/gpuenv/providers/observer/pydeps"
	"github.com/gpuenv/gpuenv/providers/observer/runtime"
	"github.com/gpuenv/gpuenv/providers/observer/session"
	"github.com/gpuenv/gpuenv/providers/observer/system"
	"github.com/gpuenv/gpuenv/providers/repository"
)

// descriptors lists every package of providers/ that plans or observes,
// each describing itself once (kind.Descriptor). Nothing else names them:
// planning and observing take what they need from this list.
//
// Where their facts leave observers free, they run in this order, which
// is the order of the warnings in the document; planners plan in the
// stack's order whatever their place here.
var descriptors = []*kind.Descriptor{
	system.Kind,
	driver.Kind,
	kernellog.Kind,
	health.Kind,
	packages.Kind,
	repository.Kind,
	cuda.Kind,
	cudnn.Kind,
	framework.Kind,
	pydeps.Kind,
	groups.Kind,
	environment.Kind,
	session.Kind,
	devices.Kind,
	containers.Kind,
	runtime.Kind,
	devaccess.Kind,
	loader.Kind,
	kernel.Kind,
}

// Planners returns every provider, for planner.New, in the order they
// plan: by the layer of their kind's first step, the stack's order (the
// planner orders their steps itself). They plan from the request's facts
// alone: every file a step depends on is in the observation, so that a
// saved plan's fingerprint sees it change.
func Planners() []planner.Provider { return slices.Clone(planners()) }

var planners = sync.OnceValue(func() []planner.Provider {
	var ds []*kind.Descriptor
	for _, d := range descriptors {
		if d.Planner != nil {
			ds = append(ds, d)
		}
	}
	slices.SortStableFunc(ds, func(a, b *kind.Descriptor) int { return cmp.Compare(a.Steps[0].Layer, b.Steps[0].Layer) })
	out := make([]planner.Provider, len(ds))
	for i, d := range ds {
		out[i] = d.Provider()
	}
	return out
})

// Kinds are the kinds of step the providers make, for what orders and
// fingerprints a plan outside a planner (planner.Save, planner.Order).
func Kinds() *planner.Kinds { return kinds() }

var kinds = sync.OnceValue(func() *planner.Kinds { return planner.NewKinds(Planners()...) })

// Candidates returns what answers the providers' questions about package
// versions, for planner.Planner.Candidates: from the package indexes on
// disk that the plan's observation holds, starting no process. Only where
// the root has none (its lists never fetched) does it ask the package
// manager, when a provider asks, which it does only for a resource that
// must change; the repository provider tells it first which packages the
// spec installs (Expect), so that one command answers every question.
func Candidates(h *host.Host) *pkgkit.Candidates {
	return pkgkit.NewCandidates(h)
}

// FactsCandidates is Candidates for a host known only by a saved
// observation (plan --facts): the observation's package indexes answer,
// and what they cannot is an error naming the fact missing. No package
// manager is asked, since this machine's is not the host's.
func FactsCandidates() *pkgkit.Candidates {
	return pkgkit.NewFactsCandidates()
}
