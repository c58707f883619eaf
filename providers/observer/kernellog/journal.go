package kernellog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// maxJournalOutput bounds what journalctl may print.
const maxJournalOutput = 16 << 20

// maxJournalFiles bounds how many of the journal's files are handed to
// journalctl: the newest, by name, which journald gives in time order.
const maxJournalFiles = 64

// readJournal asks journalctl for the kernel's messages of the last boot
// the root's journal records, the newest lim.Lines of them, and keeps the
// driver's. ok is false when the root keeps no journal. The journalctl is
// this machine's (host.RunTool), never the root's: observing a root starts
// no program it brought. gpuenv opens the journal's regular files inside
// the root itself and hands them over as descriptors, so a link in the
// root cannot point journalctl at a file of this machine.
func readJournal(ctx context.Context, h *host.Host, lim Limits, deadline time.Time) (facts.KernelLogSource, []line, bool) {
	names := journalFiles(h)
	if len(names) == 0 {
		return facts.KernelLogSource{}, nil, false
	}
	src := facts.KernelLogSource{Path: JournalDir, BootStart: true}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, n := range names {
		if f, err := h.Open(n); err == nil {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		src.Error, src.BootStart = "no journal file could be opened", false
		return src, nil, true
	}
	argv := []string{"journalctl"}
	for i := range files {
		// ExtraFiles are descriptors 3, 4, … in the child.
		argv = append(argv, "--file=/proc/self/fd/"+strconv.Itoa(3+i))
	}
	argv = append(argv, "--boot=-0", "--output=short", "--no-pager", "--quiet",
		"--lines="+strconv.Itoa(lim.Lines*4), "_TRANSPORT=kernel")
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	out := &childproc.Head{Max: maxJournalOutput}
	stderr := &childproc.Head{Max: 4096}
	err := h.RunTool(ctx, host.Command{Argv: argv, Stdout: out, Stderr: stderr, ExtraFiles: files})
	data := out.Bytes()
	src.Bytes = int64(len(data))
	src.Truncated = out.Truncated() || errors.Is(ctx.Err(), context.DeadlineExceeded)
	if err != nil {
		msg := err.Error()
		if s := bytes.TrimSpace(stderr.Bytes()); len(s) > 0 {
			msg += ": " + string(s)
		}
		src.Error, src.BootStart = msg, false
		return src, nil, true
	}
	var lines []line // newest first
	for end := len(data); end > 0 && len(lines) < lim.Lines; {
		start := bytes.LastIndexByte(data[:end], '\n') + 1
		if l := data[start:end]; bytes.Contains(l, nvrm) {
			lines = append(lines, line{text: bytes.Clone(l), source: JournalDir})
		}
		end = start - 1
	}
	return src, lines, true
}

// journalFiles lists the journal's files in the root, newest last, at
// most maxJournalFiles of them.
func journalFiles(h *host.Host) []string {
	var out []string
	for _, d := range journalDirs(h) {
		ents, err := h.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			n := e.Name()
			if e.Type().IsRegular() && (strings.HasSuffix(n, ".journal") || strings.HasSuffix(n, ".journal~")) {
				out = append(out, path.Join(d, n))
			}
		}
	}
	// system.journal is the one being written: the newest.
	slices.SortStableFunc(out, func(a, b string) int {
		ac, bc := path.Base(a) == "system.journal", path.Base(b) == "system.journal"
		switch {
		case ac && !bc:
			return 1
		case bc && !ac:
			return -1
		}
		return strings.Compare(a, b)
	})
	if len(out) > maxJournalFiles {
		out = out[len(out)-maxJournalFiles:]
	}
	return out
}
