package providers

import (
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/cuda"
	"github.com/gpuenv/gpuenv/providers/cudnn"
	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/environment"
	"github.com/gpuenv/gpuenv/providers/framework"
	"github.com/gpuenv/gpuenv/providers/groups"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/kernel"
	"github.com/gpuenv/gpuenv/providers/repository"
)

// Planners returns every provider, for planner.New, in the order they
// plan (the planner orders their steps itself). h is the root they read
// their own files from: repository sources, gpuenv's environment files,
// the persistence daemon's enablement, the compute modes' boot-time
// unit; they never change it.
func Planners(h *host.Host) []planner.Provider {
	return []planner.Provider{
		repository.Provider{Host: h},
		kernel.Provider{},
		driver.Provider{Host: h},
		cuda.Provider{},
		cudnn.Provider{},
		framework.Provider{},
		groups.Provider{},
		environment.Provider{Host: h},
		devices.Provider{Host: h},
	}
}

// Candidates returns what asks the root's package manager for versions,
// for planner.Planner.Candidates. It starts a process only when a
// provider asks, which it does only for a resource that must change; the
// repository provider tells it first which packages the spec installs
// (Expect), so that one command answers every question.
func Candidates(h *host.Host) *repository.Candidates {
	return repository.NewCandidates(h)
}
