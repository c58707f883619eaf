package providers

import (
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
	"github.com/gpuenv/gpuenv/providers/repository"
)

// Planners returns every provider, for planner.New, in the order they
// plan (the planner orders their steps itself). They plan from the
// request's facts alone: every file a step depends on is in the
// observation, so that a saved plan's fingerprint sees it change.
func Planners() []planner.Provider {
	return []planner.Provider{
		repository.Provider{},
		kernel.Provider{},
		driver.Provider{},
		cuda.Provider{},
		cudnn.Provider{},
		framework.Provider{},
		groups.Provider{},
		environment.Provider{},
		devices.Provider{},
		containers.Provider{},
	}
}

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
