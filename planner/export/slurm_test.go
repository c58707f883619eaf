package export

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// showNode is `scontrol show node` of Slurm 22.05 (Debian 12) for a node
// an administrator drained; the OS line holds spaces and a "#", the
// reason a space and scontrol's stamp.
const showNode = `NodeName=gpu07 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.12
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu07 Version=22.05.8
   OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) 
   RealMemory=1 AllocMem=0 FreeMem=N/A Sockets=2 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   BootTime=2026-12-01T09:00:00 SlurmdStartTime=2026-12-01T09:01:00
   LastBusyTime=2026-12-01T09:01:00
   CfgTRES=cpu=2,mem=1M,billing=2
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=replace PSU 2 [root@2026-12-01T10:00:00]

`

func TestParseSlurmNode(t *testing.T) {
	n, err := ParseSlurmNode(showNode)
	if err != nil {
		t.Fatal(err)
	}
	if n != (SlurmNode{Name: "gpu07", State: "IDLE+DRAIN", Reason: "replace PSU 2"}) {
		t.Errorf("parsed %+v", n)
	}
	if !n.Drained() || n.DrainedByGpuenv() {
		t.Errorf("%+v: drained %v, by gpuenv %v", n, n.Drained(), n.DrainedByGpuenv())
	}

	idle := strings.Replace(showNode, "IDLE+DRAIN", "IDLE", 1)
	idle = strings.Replace(idle, "   Reason=replace PSU 2 [root@2026-12-01T10:00:00]\n", "", 1)
	if n, err := ParseSlurmNode(idle); err != nil || n.Drained() || n.Reason != "" {
		t.Errorf("idle node: %+v, %v", n, err)
	}
	// A reason may hold brackets of its own; only scontrol's stamp goes.
	ours := strings.Replace(showNode, "replace PSU 2", "gpuenv: nvidia [module] missing", 1)
	if n, _ := ParseSlurmNode(ours); n.Reason != "gpuenv: nvidia [module] missing" || !n.DrainedByGpuenv() {
		t.Errorf("gpuenv's drain: %+v", n)
	}
	if _, err := ParseSlurmNode("slurm_load_node error: Unable to contact slurm controller\n"); err == nil ||
		!strings.Contains(err.Error(), `printed no NodeName and State: "slurm_load_node error`) {
		t.Errorf("unparsable output: %v", err)
	}
}

func TestSlurmNodeDrained(t *testing.T) {
	for state, want := range map[string]bool{
		"IDLE": false, "MIXED": false, "DOWN+NOT_RESPONDING": false,
		"IDLE+DRAIN": true, "MIXED+DRAIN": true, "ALLOCATED+DRAIN+COMPLETING": true, "DRAINED": true, "DRAINING": true,
		"IDLE+NOT_DRAIN": false,
	} {
		if got := (SlurmNode{State: state}).Drained(); got != want {
			t.Errorf("%s: drained %v, want %v", state, got, want)
		}
	}
}

func TestDecideSlurm(t *testing.T) {
	const why = "gpuenv: NVML does not answer"
	idle := SlurmNode{Name: "n", State: "IDLE"}
	ours := SlurmNode{Name: "n", State: "IDLE+DRAIN", Reason: why}
	oursOld := SlurmNode{Name: "n", State: "MIXED+DRAIN", Reason: "gpuenv: no GPU on the PCI bus"}
	admin := SlurmNode{Name: "n", State: "IDLE+DRAIN", Reason: "replace PSU 2"}
	adminNoReason := SlurmNode{Name: "n", State: "IDLE+DRAIN"}
	// An admin reason that merely mentions gpuenv later is not gpuenv's.
	mention := SlurmNode{Name: "n", State: "IDLE+DRAIN", Reason: "upgrade, then gpuenv: check"}
	for _, tc := range []struct {
		name    string
		node    SlurmNode
		healthy bool
		want    SlurmAction
		reason  string
	}{
		{"healthy in service", idle, true, SlurmNone, ""},
		{"healthy, drained by gpuenv", ours, true, SlurmResume, ""},
		{"healthy, drained by an admin", admin, true, SlurmNone, ""},
		{"healthy, drained without a reason", adminNoReason, true, SlurmNone, ""},
		{"healthy, reason mentions gpuenv", mention, true, SlurmNone, ""},
		{"broken in service", idle, false, SlurmDrain, why},
		{"broken, drained by gpuenv for this", ours, false, SlurmNone, ""},
		{"broken, drained by gpuenv for another cause", oursOld, false, SlurmDrain, why},
		{"broken, drained by an admin", admin, false, SlurmNone, ""},
		{"broken, down and not responding", SlurmNode{State: "DOWN+NOT_RESPONDING"}, false, SlurmDrain, why},
	} {
		d := DecideSlurm(tc.node, tc.healthy, why)
		if d.Action != tc.want || d.Reason != tc.reason || d.Why == "" {
			t.Errorf("%s: %+v, want %s with reason %q", tc.name, d, tc.want, tc.reason)
		}
	}
}

func TestSlurmReason(t *testing.T) {
	r := &doctor.Report{Checks: []doctor.Check{
		{Status: doctor.OK, Summary: "a GPU"},
		{Status: doctor.Problem, Summary: "The nvidia module is not loaded:\nnouveau holds the GPU"},
		{Status: doctor.Problem, Summary: "second"},
		{Status: doctor.Problem, Summary: "third"},
	}, Counts: doctor.Counts{Problems: 3}}
	if got, want := SlurmReason(r), "gpuenv: The nvidia module is not loaded: nouveau holds the GPU (and 2 more problems)"; got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	r.Checks, r.Counts.Problems = r.Checks[:3], 2
	if got := SlurmReason(r); !strings.HasSuffix(got, " (and 1 more problem)") {
		t.Errorf("reason %q", got)
	}

	long := CleanReason("gpuenv: " + strings.Repeat("é", 200))
	if len(long) > slurmReasonMax || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("long reason: %d bytes, valid %v: %q", len(long), utf8.ValidString(long), long)
	}
}

func TestScontrolArgs(t *testing.T) {
	got := strings.Join(ScontrolDrain("gpu07", "gpuenv: a b"), "|")
	if got != "update|NodeName=gpu07|State=DRAIN|Reason=gpuenv: a b" {
		t.Errorf("drain: %s", got)
	}
	if got := strings.Join(ScontrolResume("gpu07"), "|"); got != "update|NodeName=gpu07|State=RESUME" {
		t.Errorf("resume: %s", got)
	}
}
