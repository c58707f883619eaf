//go:build realsystem

package realsys

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/reload"
)

// Every scenario of this tier runs gpuenv in a chroot with the machine's
// own /proc mounted: its /proc/modules are the machine's modules, not the
// root's. gpuenv must tell the chroot (process 1's root is another
// directory), or say it cannot tell (a sandbox that hides process 1's
// root even from root), so that a driver change there never plans to
// unload the machine's modules and load the root's.
func TestChrootIsNotTheRunningKernel(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true})
	obs := r.Observe()
	if !obs.Init.Live || obs.Init.Chroot == "" {
		t.Fatalf("init %+v: want a live root seen as a chroot, or as one that cannot be told", obs.Init)
	}
	t.Logf("init: %+v", obs.Init)
	// The machine running this tier has no GPU: the verdict is asked as
	// if its nvidia module were loaded.
	obs.Kernel.Loaded = append(obs.Kernel.Loaded, facts.LoadedModule{Name: "nvidia"})
	p := reload.Decide(obs, reload.Options{})
	if p.Possible() || !strings.Contains(p.Why(), "chroot") {
		t.Errorf("reload in a chroot: possible %v, why %q", p.Possible(), p.Why())
	}
}
