package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Test-only programs for the scripts about the lock and the state
// directory:
//
//	gpuenv-pauseat K FILE ARGS...  gpuenv that, right after journal record K
//	                               is durable, creates FILE.paused and waits
//	                               for FILE to exist before going on: a
//	                               gpuenv holding the lock mid-apply
//	gpuenv-waitfor FILE            waits (up to a minute) for FILE to exist
//	gpuenv-signal SIG PIDFILE      sends SIGTERM (TERM) or SIGINT (INT) to
//	                               the pid written in PIDFILE (a paused
//	                               gpuenv-pauseat writes its pid into
//	                               FILE.paused), and gives it 200 ms
//	                               to take the signal
func init() {
	extraTestCommands["gpuenv-pauseat"] = pauseAt
	extraTestCommands["gpuenv-waitfor"] = waitFor
	extraTestCommands["gpuenv-signal"] = sendSignal
}

func sendSignal() {
	if len(os.Args) != 3 {
		die(fmt.Errorf("usage: gpuenv-signal TERM|INT PIDFILE"))
	}
	sig := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT}[os.Args[1]]
	if sig == 0 {
		die(fmt.Errorf("unknown signal %q", os.Args[1]))
	}
	data, err := os.ReadFile(os.Args[2])
	if err != nil {
		die(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		die(fmt.Errorf("%s holds no pid: %w", os.Args[2], err))
	}
	if err := syscall.Kill(pid, sig); err != nil {
		die(err)
	}
	// The receiving runtime handles the signal on a goroutine of its own;
	// give it the moment it needs before the script goes on.
	time.Sleep(200 * time.Millisecond)
	os.Exit(0)
}

func pauseAt() {
	if len(os.Args) < 4 {
		die(fmt.Errorf("usage: gpuenv-pauseat K FILE ARGS..."))
	}
	k, err := strconv.Atoi(os.Args[1])
	if err != nil {
		die(err)
	}
	file := os.Args[2]
	applyHooks.journalPoint = func(n int) {
		if n != k {
			return
		}
		if err := os.WriteFile(file+".paused", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			die(err)
		}
		waitForFile(file)
	}
	os.Exit(run(context.Background(), os.Args[3:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
}

func waitFor() {
	if len(os.Args) != 2 {
		die(fmt.Errorf("usage: gpuenv-waitfor FILE"))
	}
	waitForFile(os.Args[1])
}

func waitForFile(p string) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	die(fmt.Errorf("%s did not appear within a minute", p))
}
