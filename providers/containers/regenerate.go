package containers

import (
	"context"
	"errors"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/cdi"
	"github.com/gpuenv/gpuenv/providers/observer/packages"
	"github.com/gpuenv/gpuenv/providers/observer/system"
)

// noNVML keeps NVML out of the observation apply makes for the CDI spec:
// the spec is made from files, and right after a driver upgrade NVML
// would only report the mismatch with the module still loaded.
type noNVML struct{}

var errNoNVML = errors.New("not started: the CDI spec is made from files")

func (noNVML) Init() error                         { return errNoNVML }
func (noNVML) Shutdown() error                     { return nil }
func (noNVML) System() (host.NVMLSystem, error)    { return host.NVMLSystem{}, errNoNVML }
func (noNVML) Devices() ([]host.NVMLDevice, error) { return nil, errNoNVML }

// RegenerateCDI makes the CDI spec's text from h's files as they are
// now: what apply is handed (providers.GeneratorOf) for a plan's CDI step
// made at apply (plan.GenerateCDI), run once the driver, toolkit or MIG
// step before it has done its work. The MIG devices come from h's NVML,
// when it answers for the driver whose files the spec names: after a MIG
// change the spec names the instances the plan made; right after a
// driver upgrade NVML refuses (the old module is loaded), and the spec
// gives each GPU whole until the next plan, after the reboot, writes it
// again.
func RegenerateCDI(ctx context.Context, h *host.Host) (string, error) {
	c, obs := observeForCDI(ctx, h)
	s, err := cdi.GenerateCDI(&c, obs.DeviceNodes, migDevices(h, obs, c.DriverVersion))
	if err != nil {
		return "", err
	}
	return cdi.MarshalCDI(s)
}

// RegenerateManagementCDI is RegenerateCDI for the management spec
// (plan.GenerateManagementCDI).
func RegenerateManagementCDI(ctx context.Context, h *host.Host) (string, error) {
	c, obs := observeForCDI(ctx, h)
	s, err := cdi.GenerateManagementCDI(&c, obs.DeviceNodes)
	if err != nil {
		return "", err
	}
	return cdi.MarshalCDI(s)
}

// observeForCDI observes what a CDI spec is made from, without NVML:
// the containers' facts, and the driver's in obs.
func observeForCDI(ctx context.Context, h *host.Host) (facts.Containers, *facts.Observation) {
	obs := &facts.Observation{}
	system.Observe(ctx, h, obs)
	driver.Observe(ctx, h, noNVML{}, obs)
	pkgs, _ := packages.Observe(ctx, h, obs.OS.Family)
	c, _ := Observe(ctx, h, pkgs, obs.Driver)
	return c, obs
}

// migDevices are the GPUs h's NVML lists, with their MIG state, when it
// runs the driver of version files; nil otherwise. obs holds the driver's
// facts observeForCDI read from the files, which NVML's are added to.
func migDevices(h *host.Host, obs *facts.Observation, files string) []facts.GPUDevice {
	n := h.NVML()
	if n == nil || files == "" {
		return nil
	}
	driver.ObserveNVML(h, n, obs)
	if obs.NVML.Status != "ok" || obs.NVML.DriverVersion != files {
		return nil
	}
	return obs.NVML.Devices
}
