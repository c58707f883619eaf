package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
func init() {
	extraTestCommands["gpuenv-pauseat"] = pauseAt
	extraTestCommands["gpuenv-waitfor"] = waitFor
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
		if err := os.WriteFile(file+".paused", nil, 0o644); err != nil {
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
