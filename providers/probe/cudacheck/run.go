package cudacheck

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
)

// Start runs one child (Child) that checks the devices from ordinal from
// on, its stdout going to stdout. It returns the process's error: nil, an
// *exec.ExitError for an exit status or a signal, or why it could not
// start. It must kill the child when ctx ends.
type Start func(ctx context.Context, from int, stdout, stderr io.Writer) error

// Report is the check of every device CUDA shows.
type Report struct {
	Library string `json:"library"`
	// DriverVersion is the newest CUDA version the driver supports
	// (cuDriverGetVersion), "12.4".
	DriverVersion string `json:"driver_cuda_version,omitempty"`
	// Count is how many devices CUDA shows; -1 until it said.
	Count int `json:"device_count"`
	// Failure ended the check before any device: the library missing,
	// cuInit refused (CUDA_ERROR_NO_DEVICE,
	// CUDA_ERROR_SYSTEM_DRIVER_MISMATCH …).
	Failure *Failure `json:"failure,omitempty"`
	// Crashed says how the child died before it reached a device, and
	// TimedOut that it was killed at the timeout; Failure.Step is where.
	Crashed  string `json:"crashed,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// NotStarted is why the child could not be started.
	NotStarted string   `json:"not_started,omitempty"`
	Devices    []Device `json:"devices"`
	// Peers are the copies between each ordered pair of devices that
	// passed, made when one child checked every device; PeersSkipped
	// says why none was made when the pairs could not be tried.
	Peers        []PeerCopy `json:"peers,omitempty"`
	PeersSkipped string     `json:"peers_skipped,omitempty"`
	// Stderr is the end of what the children wrote to stderr.
	Stderr string `json:"stderr,omitempty"`
}

// OK reports whether CUDA showed at least one device and every step
// passed on each.
func (r *Report) OK() bool {
	if r.Failure != nil || r.NotStarted != "" || len(r.Devices) == 0 {
		return false
	}
	for _, d := range r.Devices {
		if !d.OK() {
			return false
		}
	}
	for _, p := range r.Peers {
		if !p.OK() {
			return false
		}
	}
	return true
}

// Run checks every device, each child killed after timeout. When a child
// dies on a device, the next child starts at the device after it, so one
// GPU that crashes the driver does not hide the others; after a timeout
// the devices not yet checked are left out, since a hung GPU tends to hang
// the next call too.
func Run(ctx context.Context, start Start, timeout time.Duration) *Report {
	rep := &Report{Library: Library, Count: -1, Devices: []Device{}}
	var stderrs []string
	for from := 0; ; {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		var stdout bytes.Buffer
		var stderr childproc.Tail
		err := start(cctx, from, &stdout, &stderr)
		timedOut := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if s := stderr.Text(0); s != "" {
			stderrs = append(stderrs, s)
		}
		cur, known := rep.read(&stdout)
		cancelled := ctx.Err() != nil
		var exit *exec.ExitError
		switch {
		case err != nil && !errors.As(err, &exit) && !timedOut && !cancelled:
			rep.NotStarted = err.Error()
		case err == nil, exit != nil && exit.ExitCode() == 1 && rep.Failure != nil:
			// Ran to its end, or stopped at a failure it reported.
		default:
			how := ended(exit)
			switch {
			case cancelled:
				how = "interrupted"
			case timedOut:
				how = fmt.Sprintf("killed after %s without finishing", timeout)
			}
			if cur.pair != nil {
				// The devices passed; the copy between two of them is
				// what failed.
				p := PeerCopy{From: cur.pair[0], To: cur.pair[1], Access: true, Error: "the check's process " + how, TimedOut: timedOut}
				if !timedOut {
					p.Crashed = how
				}
				rep.Peers = append(rep.Peers, p)
				break
			}
			if cur.ordinal < 0 {
				rep.Crashed, rep.TimedOut = how, timedOut
				if rep.Failure == nil {
					rep.Failure = &Failure{Step: cur.step, Message: "the check's process " + how}
				}
				break
			}
			dev := Device{Ordinal: cur.ordinal}
			if known != nil && known.Ordinal == cur.ordinal {
				dev = *known
			}
			dev.Passed = slices.Clone(DeviceSteps[:max(slices.Index(DeviceSteps, cur.step), 0)])
			dev.TimedOut = timedOut
			dev.Failure = &Failure{Step: cur.step, Message: "the check's process " + how}
			if !timedOut {
				dev.Crashed = how
			}
			rep.Devices = append(rep.Devices, dev)
			if !timedOut && !cancelled && cur.ordinal+1 < rep.Count {
				from = cur.ordinal + 1
				continue
			}
		}
		break
	}
	rep.Stderr = childproc.LastLines(strings.Join(stderrs, "\n"), 0, 0)
	return rep
}

// position is the step a child last began, on a device (ordinal ≥ 0) or
// the driver.
type position struct {
	step    Step
	ordinal int
	// pair is the two devices of a peer step.
	pair *[2]int
}

// read takes a child's lines into rep and returns the step it began last
// and did not finish, and what the device of that step said about itself;
// a line cut short by a crash is ignored.
func (rep *Report) read(r io.Reader) (position, *Device) {
	cur := position{step: StepExit, ordinal: -1}
	var known *Device
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch {
		case l.Begin != "":
			cur = position{step: l.Begin, ordinal: -1}
			if l.Ordinal != nil {
				cur.ordinal = *l.Ordinal
			}
			cur.pair = l.Pair
		case l.Known != nil:
			known = l.Known
		case l.Driver != nil:
			rep.DriverVersion = fmt.Sprintf("%d.%d", l.Driver.Version/1000, l.Driver.Version%1000/10)
			rep.Count = l.Driver.Count
			cur = position{step: StepExit, ordinal: -1}
		case l.Device != nil:
			rep.Devices = append(rep.Devices, *l.Device)
			cur = position{step: StepExit, ordinal: -1}
		case l.Failure != nil:
			rep.Failure = l.Failure
			cur = position{step: StepExit, ordinal: -1}
		case l.Peer != nil:
			rep.Peers = append(rep.Peers, *l.Peer)
			cur = position{step: StepExit, ordinal: -1}
		case l.PeersSkipped != "":
			rep.PeersSkipped = l.PeersSkipped
		}
	}
	return cur, known
}

// ended says how a process that did not exit normally ended.
func ended(exit *exec.ExitError) string {
	if exit == nil {
		return "ended without a result"
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", exit.ExitCode())
}
