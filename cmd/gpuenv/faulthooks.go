//go:build faultinject

// A gpuenv built with -tags faultinject fills the disk at a chosen journal
// point. The real-system tier's fault matrix (cmd/gpuenv/realsys) builds it
// for its disk-full cells only; no flag of a normal build reaches this code.
//
//	GPUENV_FAULT_FILL_AT=n      the journal point: after the n-th record this
//	                            process made durable (0: once the journal is
//	                            open, before its first record)
//	GPUENV_FAULT_STATE_DIR=dir  the state directory whose filesystem is
//	                            filled (default /var/lib/gpuenv)
//
// At that point a filler file, faultFillerName in the state directory, is
// written until the filesystem reports ENOSPC and left there; gpuenv goes on
// and meets the full disk at its next write. The test removes the filler.
//
//	GPUENV_FAULT_RUNNING_SYSTEM=1  the root gpuenv runs on, a chroot of
//	                               the test's, stands for the running
//	                               system (host.AsRunningSystem), so that
//	                               a driver change plans and runs a module
//	                               reload through the root's fake kernel;
//	                               NVML is not asked (the root has none)
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/providers/host"
)

// faultFillerName is the filler file's name in the state directory.
const faultFillerName = "gpuenv-fault-filler"

func init() {
	runningSystemHook()
	at, ok := os.LookupEnv("GPUENV_FAULT_FILL_AT")
	if !ok {
		return
	}
	n, err := strconv.Atoi(at)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "gpuenv (faultinject): GPUENV_FAULT_FILL_AT=%q is not a journal point\n", at)
		os.Exit(2)
	}
	dir := os.Getenv("GPUENV_FAULT_STATE_DIR")
	if dir == "" {
		dir = "/var/lib/gpuenv"
	}
	applyHooks.journalPoint = func(count int) {
		if count != n {
			return
		}
		filler := filepath.Join(dir, faultFillerName)
		written, err := fillDisk(filler)
		fmt.Fprintf(os.Stderr, "gpuenv (faultinject): journal point %d: wrote %d bytes to %s until: %v\n", count, written, filler, err)
	}
}

// runningSystemHook makes every root this process opens stand for the
// running system when GPUENV_FAULT_RUNNING_SYSTEM=1. The kernel of a
// chroot's tests is the machine's: the root's modprobe, lsmod and
// systemctl are fakes acting on files, and the check of a reload reads
// the fake /proc/driver/nvidia/version alone.
func runningSystemHook() {
	switch v := os.Getenv("GPUENV_FAULT_RUNNING_SYSTEM"); v {
	case "":
		return
	case "1":
	default:
		fmt.Fprintf(os.Stderr, "gpuenv (faultinject): GPUENV_FAULT_RUNNING_SYSTEM=%q: want 1\n", v)
		os.Exit(2)
	}
	hostOptions = append(hostOptions, host.AsRunningSystem())
	newDriverVersion = func(*host.Host) apply.DriverVersion { return nil }
}

// fillDisk appends zeros to path until the filesystem has no room left,
// and returns how much it wrote and the error that stopped it: ENOSPC when
// it did its job.
func fillDisk(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Write(buf)
		total += int64(n)
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			return total, err
		}
		// A short write may leave part of a block: fill it byte by
		// byte too, so that nothing is left for the next writer.
		if len(buf) > 1 {
			buf = buf[:len(buf)/2]
			continue
		}
		f.Sync()
		return total, err
	}
}
