package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// scontrol is a stand-in for Slurm's scontrol for the slurm-health
// scripts: one node whose state and reason live in $SCONTROL_STATE
// ("STATE\tREASON"), shown and updated as scontrol 22.05 does, with every
// call appended to $SCONTROL_LOG.
func init() {
	extraTestCommands["scontrol"] = fakeScontrol
}

func fakeScontrol() {
	args := os.Args[1:]
	if log := os.Getenv("SCONTROL_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			die(err)
		}
		fmt.Fprintf(f, "%q\n", args)
		f.Close()
	}
	stateFile := os.Getenv("SCONTROL_STATE")
	data, err := os.ReadFile(stateFile)
	if err != nil {
		die(err)
	}
	state, reason, _ := strings.Cut(strings.TrimRight(string(data), "\n"), "\t")
	node := os.Getenv("SCONTROL_NODE")
	switch {
	case len(args) == 3 && args[0] == "show" && args[1] == "node":
		if args[2] != node {
			fmt.Fprintf(os.Stderr, "Node %s not found\n", args[2])
			os.Exit(1)
		}
		fmt.Printf("NodeName=%s Arch=x86_64 CoresPerSocket=1\n   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.00\n", node)
		fmt.Printf("   OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)\n")
		fmt.Printf("   State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n   Partitions=debug\n", state)
		if reason != "" {
			fmt.Printf("   Reason=%s [root@2026-12-01T10:00:00]\n", reason)
		}
	case len(args) >= 3 && args[0] == "update" && args[1] == "NodeName="+node:
		switch args[2] {
		case "State=DRAIN":
			if len(args) != 4 || !strings.HasPrefix(args[3], "Reason=") {
				fmt.Fprintln(os.Stderr, "You must specify a reason when DOWNING or DRAINING a node. Request denied")
				os.Exit(1)
			}
			state, reason = "IDLE+DRAIN", strings.TrimPrefix(args[3], "Reason=")
		case "State=RESUME":
			state, reason = "IDLE", ""
		default:
			die(fmt.Errorf("fake scontrol: unexpected %q", args))
		}
		if err := os.WriteFile(stateFile, []byte(state+"\t"+reason+"\n"), 0o644); err != nil {
			die(err)
		}
	default:
		die(fmt.Errorf("fake scontrol: unexpected %q", args))
	}
	os.Exit(0)
}

// slurmd runs HealthCheckProgram and Prolog with no arguments: gpuenv
// run through a link named gpuenv-slurm-health is slurm-health, and by any
// other name is itself.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct{ argv, want []string }{
		{[]string{"/usr/local/sbin/gpuenv-slurm-health"}, []string{"slurm-health"}},
		{[]string{"gpuenv-slurm-health", "--root", "/srv/node"}, []string{"slurm-health", "--root", "/srv/node"}},
		{[]string{"/usr/bin/gpuenv", "doctor"}, []string{"doctor"}},
		{[]string{"/usr/bin/gpuenv-slurm-health.sh"}, []string{}},
	} {
		if got := commandLine(tc.argv); !slices.Equal(got, tc.want) {
			t.Errorf("commandLine(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}
