package doctor_test

import (
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers"
)

// corpusObserveOptions are the observation's options for a corpus case:
// the environments and programs it names, and the session its report
// was made in (the loader adds the session's LD_LIBRARY_PATH).
func corpusObserveOptions(pythons, programs []string, session []facts.Assignment) providers.ObserveOptions {
	return providers.ObserveOptions{Pythons: pythons, Programs: programs, Session: session}
}
