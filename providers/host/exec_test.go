package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A command whose context ends is killed with the processes it started.
func TestExecRunnerEndsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	err := ExecRunner{}.Run(ctx, Command{Argv: []string{"sh", "-c", `sleep 60 & echo $! > "$1"; wait`, "sh", pidFile}, Stdout: &out, Stderr: &out})
	if err == nil || time.Since(start) > 30*time.Second {
		t.Fatalf("run: %v after %s; want it killed at its timeout", err, time.Since(start))
	}
	pid := readPid(t, pidFile)
	if !exited(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the command's child %d outlived it", pid)
	}
}

// A command that succeeded is not failed, nor waited for without end,
// because a process it left running holds its output.
func TestExecRunnerLeftoverHoldsOutput(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	var out bytes.Buffer
	start := time.Now()
	err := ExecRunner{}.Run(context.Background(), Command{Argv: []string{"sh", "-c", `sleep 60 & echo $! > "$1"; echo done`, "sh", pidFile}, Stdout: &out})
	took := time.Since(start)
	syscall.Kill(readPid(t, pidFile), syscall.SIGKILL)
	if err != nil || out.String() != "done\n" || took > 30*time.Second {
		t.Errorf("run: %v after %s, output %q", err, took, out.String())
	}
}

func readPid(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// exited reports whether pid has exited within a second (a zombie waiting
// for its new parent counts).
func exited(pid int) bool {
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
