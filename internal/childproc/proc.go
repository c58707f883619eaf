package childproc

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Group makes cmd the leader of a process group of its own and, when its
// context ends, kills the whole group rather than the leader alone: the
// helpers a timed-out program started (a compiler, a data loader, a
// script's sleep) must not outlive it, nor keep its output pipes open.
// Wait gives up on the pipes waitDelay after the kill, or after the
// leader exited, whoever still holds them.
func Group(cmd *exec.Cmd, waitDelay time.Duration) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.Cancel = func() error {
		// The group's id is the leader's pid, which Wait has not yet
		// released, so it names no one else.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	cmd.WaitDelay = waitDelay
}

// KillGroup kills what is left of the group of cmd, started with Group,
// after Wait: processes the leader left behind are its.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// CloseOnExec marks every open descriptor above 2 close-on-exec, so that
// a program started afterwards gets standard input, output and error and
// only the descriptors its starter hands it on purpose (os/exec places
// ExtraFiles and pipes without the flag). Go opens its own files
// close-on-exec, but not those gpuenv inherited from whoever started it
// (a root shell's `9</etc/shadow`, a cron job's, an agent's), nor those a
// C library opened: without this a program run as another user could
// read them.
func CloseOnExec() error {
	// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11) does it in one
	// call; older kernels walk /proc/self/fd.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing open descriptors: %w", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("listing open descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd <= 2 || fd == int(dir.Fd()) {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("marking descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
}
