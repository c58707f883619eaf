package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/providers/devices"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// newMIGRestoreCmd is what gpuenv-mig.service runs at boot. Its
// arguments are the numbers the plan wrote into the unit, never spec
// text.
func newMIGRestoreCmd(g *globalOptions) *cobra.Command {
	var gpu string
	var instances []string
	cmd := &cobra.Command{
		Use:    "mig-restore --gpu GPU-UUID [--instance PROFILE:START:SIZE:SLICES]...",
		Short:  "Set MIG mode and create a GPU's MIG instances again (run by gpuenv-mig.service at boot)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !spec.IsGPUUUID(gpu) {
				return fmt.Errorf("--gpu %q is not a GPU UUID (GPU-…)", gpu)
			}
			var in []host.MIGInstance
			for _, a := range instances {
				i, err := devices.ParseMIGInstanceArg(a)
				if err != nil {
					return err
				}
				in = append(in, i)
			}
			h, err := openHost(g)
			if err != nil {
				return err
			}
			n, ok := newDeviceSettings(h).(devices.MIGRestorer)
			if !ok {
				return fmt.Errorf("MIG changes need NVML on the running system; the root %s is not it", h.Root())
			}
			if err := devices.RestoreMIG(n, gpu, in); err != nil {
				return err
			}
			fmt.Fprintf(g.Stdout, "GPU %s: MIG mode enabled, %d GPU instance(s) in place.\n", gpu, len(in))
			return nil
		},
	}
	cmd.Flags().StringVar(&gpu, "gpu", "", "the GPU, by UUID")
	repeatable(cmd.Flags(), &instances, "instance", "a GPU instance: NVML profile id, first memory slice, memory slices, compute slices of each compute instance (2:4:4:3)")
	return cmd
}
