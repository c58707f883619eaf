package providers_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
)

// benchSpec is what the converged plan of today plans on the DGX: the
// GPUs' compute mode, which they have.
const benchSpec = "device \"all\" {\n  compute_mode = \"default\"\n}\n"

// benchLayout adds a MIG layout of four instances on each of the eight
// GPUs.
const benchLayout = benchSpec + "\nmig \"all\" {\n  instances = [\"3g.20gb\", \"2g.10gb\", \"1g.5gb\", \"1g.5gb\"]\n}\n"

// benchTeams gives three teams of the DGX's groups (ubuntu, ml, video)
// their GPUs, one by UUID, with the host-wide order: plan writes the
// team files and the profile script that reads them.
const benchTeams = benchSpec + `
environment {
  cuda_device_order = "PCI_BUS_ID"
}

team "ubuntu" {
  cuda_visible_devices = ["0", "1", "2", "3"]
}

team "ml" {
  cuda_visible_devices = ["4", "5"]
}

team "video" {
  cuda_visible_devices = ["GPU-00000000-0000-0000-0000-000000000006", "7"]
}
`

func benchLoad(b *testing.B, src string) *spec.Spec {
	p := filepath.Join(b.TempDir(), "gpuenv.hcl")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	s, diags := spec.Load(p, spec.LoadOptions{})
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	return s
}

// BenchmarkPlanMIG measures plan (observe and plan, every provider) on the
// working fixture with go-nvml's DGX A100 mock, eight MIG-capable GPUs:
// "converged" is today's spec, which the host meets; "layout" adds a MIG
// layout on every GPU, planned from MIG off (32 instances and 8 mode
// changes to make); "layout-converged" is the same layout once made;
// "teams" plans three teams' files and judges each on the end state.
func BenchmarkPlanMIG(b *testing.B) {
	for _, c := range []struct {
		name   string
		src    string
		layout bool
	}{
		{"converged", benchSpec, false},
		{"layout", benchLayout, false},
		{"layout-converged", benchLayout, true},
		{"teams", benchTeams, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := hosttest.NVMLServer("dgxa100")
			h := hosttest.Fixture(b, "ubuntu2204-working", host.WithNVML(host.NewNVML(srv)))
			s := benchLoad(b, c.src)
			pl := planner.New(providers.Planners()...)
			pl.Candidates = providers.Candidates(h)
			if c.layout {
				p, diags := pl.Plan(context.Background(), s, providers.Observe(context.Background(), h, providers.ObserveOptions{}))
				if diags.HasErrors() {
					b.Fatal(diags)
				}
				ds := host.NewDeviceSettings(srv)
				for _, st := range p.Steps {
					for _, op := range st.Operations {
						switch {
						case op.Device != nil && op.Device.Setting == plan.SettingMIGMode:
							ds.SetMIGMode(op.Device.UUID, op.Device.Value)
						case op.Device != nil && op.Device.Instance != nil:
							in := op.Device.Instance
							if err := ds.CreateGPUInstance(op.Device.UUID, host.MIGInstance{ProfileID: in.ProfileID, Start: uint32(in.Start), Size: uint32(in.Size), Compute: in.Compute}); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				if n := len(hosttest.MIGSnapshot(srv)[7].Instances); n != 4 {
					b.Fatalf("GPU 7 has %d instances", n)
				}
			}
			hosttest.Benchmark(b, h, func(h *host.Host) {
				obs := providers.Observe(context.Background(), h, providers.ObserveOptions{})
				if _, diags := pl.Plan(context.Background(), s, obs); diags.HasErrors() {
					b.Fatal(diags)
				}
			})
		})
	}
}
