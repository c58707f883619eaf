package kernellog

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// maxJournalOutput bounds what journalctl may print.
const maxJournalOutput = 16 << 20

// readJournal asks the root's journalctl for the kernel's messages of the
// last boot its journal records, the newest lim.Lines of them, and keeps
// the driver's. ok is false when the root keeps no journal. The command
// runs inside the root (host.Run), as a root's commands do, and only
// reads its files.
func readJournal(ctx context.Context, h *host.Host, lim Limits, deadline time.Time) (facts.KernelLogSource, []line, bool) {
	if len(journalDirs(h)) == 0 {
		return facts.KernelLogSource{}, nil, false
	}
	src := facts.KernelLogSource{Path: JournalDir, BootStart: true}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out := &capped{max: maxJournalOutput}
	var stderr capped
	stderr.max = 4096
	err := h.Run(ctx, host.Command{
		Argv: []string{"journalctl", "--directory=" + JournalDir, "--boot=-0", "--output=short",
			"--no-pager", "--quiet", "--lines=" + strconv.Itoa(lim.Lines*4), "_TRANSPORT=kernel"},
		Stdout: out, Stderr: &stderr,
	})
	src.Bytes = int64(out.buf.Len())
	src.Truncated = out.over || errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err != nil {
		msg := err.Error()
		if s := bytes.TrimSpace(stderr.buf.Bytes()); len(s) > 0 {
			msg += ": " + string(s)
		}
		src.Error, src.BootStart = msg, false
		return src, nil, true
	}
	var lines []line // newest first
	data := out.buf.Bytes()
	for end := len(data); end > 0 && len(lines) < lim.Lines; {
		start := bytes.LastIndexByte(data[:end], '\n') + 1
		if l := data[start:end]; bytes.Contains(l, nvrm) {
			lines = append(lines, line{text: bytes.Clone(l), source: JournalDir})
		}
		end = start - 1
	}
	return src, lines, true
}

// capped keeps what is written to it up to max bytes and drops the rest.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}
