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
// made at apply (plan.GenerateCDI), run once the driver or toolkit step
// before it has put the new files in place.
func RegenerateCDI(ctx context.Context, h *host.Host) (string, error) {
	obs := &facts.Observation{}
	system.Observe(ctx, h, obs)
	driver.Observe(ctx, h, noNVML{}, obs)
	pkgs, _ := packages.Observe(ctx, h, obs.OS.Family)
	c, _ := Observe(ctx, h, pkgs, obs.Driver)
	s, err := cdi.GenerateCDI(&c, obs.DeviceNodes, nil)
	if err != nil {
		return "", err
	}
	return cdi.MarshalCDI(s)
}
