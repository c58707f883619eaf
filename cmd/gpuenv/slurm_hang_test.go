package main

import (
	"context"
	"os"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/providers/host"
)

// GPUENV_TEST_DOCTOR_HANGS makes the gpuenv of the test scripts run a
// doctor that never returns under slurm-health, as one stuck in a
// driver call would: nothing a root holds can stall observation.
func init() {
	if os.Getenv("GPUENV_TEST_DOCTOR_HANGS") != "" {
		slurmDoctor = func(context.Context, *globalOptions, *host.Host) (*doctor.Report, error) {
			select {}
		}
	}
}
