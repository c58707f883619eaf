package providers

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
)

const module = "github.com/gpuenv/gpuenv"

// TestEveryAddressHasOneKind: the planner places a step and picks the
// facts its plan is fingerprinted with by the one kind its address is
// of; the kinds the providers describe place the stack as the design
// orders it.
func TestEveryAddressHasOneKind(t *testing.T) {
	k := Kinds()
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
	drv := []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages}
	for _, tt := range []struct {
		addr     string
		layer    planner.Layer
		sections []string
	}{
		{"repository.cuda", planner.LayerRepositories, []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
		{"repository.distro-components", planner.LayerRepositories, []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
		{"driver.purge", planner.LayerPurge, drv},
		{"kernel.nouveau", planner.LayerNouveau, drv},
		{"kernel.headers", planner.LayerKernelHeaders, drv},
		{"driver", planner.LayerDriver, drv},
		{"driver.hold", planner.LayerHold, drv},
		{"driver.persistence", planner.LayerDriverSettings, append(slices.Clone(drv), planner.FactsInit, planner.FactsUnits)},
		{"driver.fabricmanager", planner.LayerDriverSettings, append(slices.Clone(drv), planner.FactsInit, planner.FactsUnits)},
		{"cuda", planner.LayerCUDA, []string{planner.FactsOS, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA}},
		{"cudnn", planner.LayerCuDNN, []string{planner.FactsOS, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN}},
		{"framework.pytorch", planner.LayerFrameworks, []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
		{"framework.jax[/opt]", planner.LayerFrameworks, []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
		{"group.video", planner.LayerGroups, []string{planner.FactsGroups, planner.FactsDeviceNodes}},
		{"environment", planner.LayerEnvironment, []string{planner.FactsCUDA, planner.FactsEnvironment, planner.FactsInit}},
		{"device.0", planner.LayerDevices, []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
		{"device.boot", planner.LayerDevices, []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
		{"container_toolkit", planner.LayerContainers, []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
		{"container_toolkit.engine.docker", planner.LayerContainers, []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
		{"index.apt", planner.LayerIndexes, nil},
	} {
		if got := k.Layer(tt.addr); got != tt.layer {
			t.Errorf("Layer(%q) = %v, want %v", tt.addr, got, tt.layer)
		}
		if tt.sections == nil {
			continue
		}
		if diff := cmp.Diff(tt.sections, k.Sections(tt.addr)); diff != "" {
			t.Errorf("Sections(%q) (-want +got):\n%s", tt.addr, diff)
		}
	}
	// Each kind's addresses are its own: no two descriptors share a
	// name, and a name of no descriptor places nothing.
	for _, d := range descriptors {
		for _, sk := range d.Steps {
			addr := sk.Address
			if addr == "" {
				addr = d.Name + ".other"
			}
			n, _, _ := strings.Cut(addr, ".")
			if n != d.Name {
				t.Errorf("%s describes %q, of the kind %q", d.Name, sk.Address, n)
			}
		}
	}
	for _, addr := range []string{"drivers", "groups.video", "devices.0", "containers", ""} {
		if k.Known(addr) {
			t.Errorf("%q is of a kind, and none plans it", addr)
		}
	}
}
