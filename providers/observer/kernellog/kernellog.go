// Package kernellog reads what the kernel logged about the NVIDIA GPUs
// and driver in the current boot: /dev/kmsg on the running system, the
// syslog files or the journal in a root. Logs are read from their end
// and bounded in bytes, lines and time, however large they are.
package kernellog

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Limits bound a read.
type Limits struct {
	// Bytes is how much of each file is scanned from its end.
	Bytes int64
	// Lines is how many of the driver's lines are kept, in all.
	Lines int
	// Time is how long the whole read may take.
	Time time.Duration
}

// DefaultLimits hold a boot's driver messages many times over: the
// kernel's own buffer is a few MiB at most, and a boot whose syslog file
// grew past 32 MiB is read from its end.
var DefaultLimits = Limits{Bytes: 32 << 20, Lines: 20000, Time: 2 * time.Second}

// textLogs are the syslog daemons' files that hold the kernel's
// messages, most specific first, each followed by the file logrotate
// moved the earlier part of it to. Only the first that exists is read.
var textLogs = [][2]string{
	{"/var/log/kern.log", "/var/log/kern.log.1"},
	{"/var/log/messages", "/var/log/messages.1"},
	{"/var/log/syslog", "/var/log/syslog.1"},
}

// JournalDir is where a persistent journal keeps its files.
const JournalDir = "/var/log/journal"

// Observe reads the kernel's log on h. On the running system that is
// /dev/kmsg, which holds only this boot; when it cannot be read (no
// permission, a container without it) and on another root, the first
// syslog file that holds the kernel's messages, back to the last boot
// it records, continued into its rotated predecessor when that boot
// started earlier; and failing any, the journal's files, through this
// machine's journalctl (gpuenv does not read the journal's binary format
// itself, and never starts a program of the root it observes). It returns nil when no log was found.
func Observe(ctx context.Context, h *host.Host, lim Limits) *facts.KernelLog {
	deadline := time.Now().Add(lim.Time)
	log := &facts.KernelLog{}
	var lines []line // newest first
	if h.Live() {
		src := facts.KernelLogSource{Path: host.KmsgPath, BootStart: true}
		var kept []line
		stopped, err := h.ReadKmsg(1<<20, deadline, func(rec []byte) {
			src.Bytes += int64(len(rec))
			text := kmsgText(rec)
			if bytes.Contains(text, nvrm) {
				if len(kept) == lim.Lines {
					// The newest lines matter most: the oldest goes.
					kept = kept[1:]
					src.Truncated = true
				}
				kept = append(kept, line{text: bytes.Clone(text), source: host.KmsgPath})
			}
		})
		src.Truncated = src.Truncated || stopped
		if err == nil {
			log.Sources = append(log.Sources, src)
			log.Events, log.Module = events(kept)
			return log
		}
		src.Error, src.BootStart = err.Error(), false
		log.Sources = append(log.Sources, src)
	}
	found := false
	for _, files := range textLogs {
		for _, p := range files {
			t, err := readFile(h, p, lim, len(lines), deadline)
			if errors.Is(err, fs.ErrNotExist) {
				break
			}
			found = true
			src := facts.KernelLogSource{Path: p, Bytes: t.bytes, BootStart: t.boot, Truncated: t.truncated}
			if err != nil {
				src.Error = err.Error()
			}
			log.Sources = append(log.Sources, src)
			for _, l := range t.lines {
				lines = append(lines, line{text: l, source: p})
			}
			if err != nil || t.boot || t.truncated {
				break
			}
		}
		if found {
			break
		}
	}
	if !found {
		src, jl, ok := readJournal(ctx, h, lim, deadline)
		if !ok {
			if len(log.Sources) == 0 {
				return nil
			}
		} else {
			log.Sources = append(log.Sources, src)
			lines = jl
		}
	}
	slices.Reverse(lines)
	log.Events, log.Module = events(lines)
	return log
}

// readFile scans the log at p from its end; kept is how many lines the
// files before it kept.
func readFile(h *host.Host, p string, lim Limits, kept int, deadline time.Time) (tail, error) {
	f, err := h.Open(p)
	if err != nil {
		return tail{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return tail{}, err
	}
	return scanTail(f, fi.Size(), lim.Bytes, lim.Lines-kept, deadline)
}

// kmsgText is the text of a /dev/kmsg record, "prio,seq,usec,flags;text"
// followed by dictionary lines that start with a space.
func kmsgText(rec []byte) []byte {
	if i := bytes.IndexByte(rec, ';'); i >= 0 {
		rec = rec[i+1:]
	}
	if i := bytes.IndexByte(rec, '\n'); i >= 0 {
		rec = rec[:i]
	}
	return rec
}

// journalDirs lists the journal's machine directories in the root.
func journalDirs(h *host.Host) []string {
	ents, err := h.ReadDir(JournalDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, path.Join(JournalDir, e.Name()))
		}
	}
	return out
}
