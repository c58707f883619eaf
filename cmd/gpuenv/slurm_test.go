package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// fakeScontrolOnPath writes script as scontrol into a directory of its
// own and returns an environment with that directory first on PATH.
func fakeScontrolOnPath(t *testing.T, script string) []string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "PATH="+dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
}

// runSlurmHealthProcess runs gpuenv slurm-health as a process of its own
// on a root with nothing but its os-release, and returns what it printed on stderr, its exit code
// and its peak resident memory.
func runSlurmHealthProcess(t *testing.T, env []string) (stderr string, code int, maxRSS int64) {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=debian\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gpuenv", "--root", root, "slurm-health", "--node", "gpu07")
	cmd.Env = env
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru == nil {
		t.Fatal("no resource usage for the process")
	}
	return errb.String(), cmd.ProcessState.ExitCode(), ru.Maxrss * 1024
}

// TestScontrolOutputBounded: an scontrol that prints 204 MB (3 million lines) and fails is
// quoted by its last lines, and slurm-health's memory stays small.
func TestScontrolOutputBounded(t *testing.T) {
	// On a loaded machine the 200 MB may take longer than scontrol is
	// given: a timeout is then the error, and the bounds are the same.
	env := fakeScontrolOnPath(t, `echo 'scontrol: error: the first word' >&2
yes 'NodeName=gpu07 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1' | head -n 3000000
exit 1
`)
	stderr, code, rss := runSlurmHealthProcess(t, env)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if len(stderr) > 16<<10 {
		t.Errorf("slurm-health printed %d bytes on stderr", len(stderr))
	}
	if !strings.Contains(stderr, "scontrol show node gpu07: ") || !strings.Contains(stderr, " bytes before]\nNodeName=gpu07 Arch=x86_64") ||
		!strings.HasSuffix(strings.TrimSpace(stderr), "\nNodeName=gpu07 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1") {
		t.Errorf("stderr does not quote scontrol's last lines:\n%.2000s", stderr)
	}
	if rss > 150<<20 {
		t.Errorf("slurm-health's peak memory was %d MiB", rss>>20)
	}
	t.Logf("stderr %d bytes, peak memory %d MiB", len(stderr), rss>>20)

	// An answer longer than any node's description is refused, not parsed.
	env = fakeScontrolOnPath(t, "yes '   State=IDLE ThreadsPerCore=1' | head -c 2000000\n")
	stderr, code, _ = runSlurmHealthProcess(t, env)
	if code != 1 || !strings.Contains(stderr, "scontrol show node gpu07: it printed 2000000 bytes, more than the 1048576 a node's description takes: […") || len(stderr) > 16<<10 {
		t.Errorf("exit %d, stderr %d bytes:\n%.2000s", code, len(stderr), stderr)
	}
}

// TestScontrolTimeoutEndsItsGroup: an scontrol that hangs is killed with
// the processes it started, and slurm-health ends soon after its timeout.
func TestScontrolTimeoutEndsItsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	env := fakeScontrolOnPath(t, `sleep 300 &
echo $! > "$FAKE_SCONTROL_PID"
sleep 300
`)
	env = append(env, "FAKE_SCONTROL_PID="+pidFile)
	start := time.Now()
	stderr, code, _ := runSlurmHealthProcess(t, env)
	took := time.Since(start)
	if code != 1 || !strings.Contains(stderr, "scontrol show node gpu07: no answer within 5s") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if took > 20*time.Second {
		t.Errorf("slurm-health took %s", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("scontrol's child %d outlived slurm-health", pid)
	}
}

// processGone reports whether pid has exited within a second (a zombie
// waiting for its new parent to reap it counts).
func processGone(pid int) bool {
	for range 50 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z") {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
