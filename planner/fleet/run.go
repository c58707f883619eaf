package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/spec"
)

// Input is one place observation documents come from: a document's file,
// or a stream of documents one per line (JSON lines), such as standard
// input.
type Input struct {
	// File is the document's path.
	File string
	// Stream, when set, is read instead: each non-blank line is one
	// document, named Name:LINE.
	Stream io.Reader
	Name   string
	// Refused, when set, is why File is not read: it is a refused row.
	Refused error
}

// Inputs expands the arguments of plan --facts: a file is one document
// (gzip-compressed or not), or with a name ending in .tar, .tar.gz or
// .tgz an archive of documents; a directory is every *.json and
// *.json.gz file in it and below, in lexical order; and "-" is standard
// input: JSON lines, or a tar archive, either of them gzip-compressed or
// not. Every argument must name something: a path that does not exist,
// or a directory with no document, is an error naming it. A symlink in
// a directory is not followed: it is an input refused, which plans as a
// refused row naming it.
func Inputs(args []string, stdin io.Reader) ([]Input, error) {
	var out []Input
	stdinUsed := false
	for _, a := range args {
		if a == "-" {
			if stdinUsed {
				return nil, errors.New(`--facts -: standard input is named twice`)
			}
			stdinUsed = true
			out = append(out, Input{Stream: stdin, Name: "-"})
			continue
		}
		fi, err := os.Stat(a)
		if err != nil {
			return nil, fmt.Errorf("--facts %s: %w", a, err)
		}
		if !fi.IsDir() {
			out = append(out, Input{File: a})
			continue
		}
		n := 0
		err = filepath.WalkDir(a, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				if name == a {
					return err
				}
				// A subdirectory that cannot be listed is a row, not
				// the end of the run.
				out = append(out, Input{File: name, Refused: err})
				n++
				return fs.SkipDir
			}
			if d.IsDir() || !isDocumentName(name) {
				return nil
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				out = append(out, Input{File: name, Refused: errSymlink})
			default:
				// Not a regular file: reading it says what it is.
				out = append(out, Input{File: name})
			}
			n++
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("--facts %s: %w", a, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("--facts %s: the directory holds no observation document (*.json or *.json.gz, in it or below)", a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--facts: no observation document named")
	}
	return out, nil
}

// isDocumentName tells whether a file in a directory or an archive is a
// document by its name.
func isDocumentName(name string) bool {
	return strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".json.gz")
}

// isArchiveName tells whether a file named on the command line is an
// archive of documents.
func isArchiveName(name string) bool {
	return strings.HasSuffix(name, ".tar") || strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz")
}

// hostOf is the host's name a document's file gives.
func hostOf(file string) string {
	base := path.Base(filepath.ToSlash(file))
	return strings.TrimSuffix(strings.TrimSuffix(base, ".gz"), ".json")
}

// Options are what every host of one run is planned with.
type Options struct {
	// Spec is loaded once, without errors, and only read.
	Spec *spec.Spec
	// Planner returns a planner for one host. Its Candidates must answer
	// from the observation alone (the hosts are not this machine);
	// planners are used by several goroutines at once, one each.
	Planner func() *planner.Planner
	// Workers is how many hosts are planned at once; GOMAXPROCS when 0.
	Workers int
	// Canaries is how many hosts each group names to try the spec on
	// first; none when 0.
	Canaries int
}

// gcPercent is the collector's GOGC while a run lasts.
const gcPercent = 400

// maxCached bounds the verdicts kept by digest. A fleet of more distinct
// hosts than this still plans each host right: those past it are
// planned on their own, as if each were the only one of its kind.
const maxCached = 1024

// job is one document to plan: data, or the file to read it from.
type job struct {
	seq     int
	file    string
	name    string
	data    []byte
	refused error
}

type result struct {
	seq int
	row Host
}

// Plan plans o.Spec against every document of inputs and hands each
// host's row to emit, in the order of inputs, as soon as it and those
// before it are ready. It returns the summary of all rows. A document
// that cannot be read or planned is a refused row, not an error, and so
// is a stream or an archive that breaks off: what it held up to there
// is planned, and the run goes on with the next input. The error is
// emit's, or ctx's.
func Plan(ctx context.Context, o Options, inputs []Input, emit func(*Host) error) (*Summary, error) {
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interpreters := o.Spec.Interpreters()
	// Each host allocates a few hundred kilobytes and leaves almost
	// nothing live, so at the default the collector would run every
	// dozen hosts for a heap of a megabyte or two: a fifth of the CPU.
	// Letting the heap grow to five times what is live costs a few
	// megabytes, however many hosts.
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))

	jobs := make(chan job, workers)
	results := make(chan result, workers)
	go func() {
		defer close(jobs)
		produce(ctx, inputs, jobs)
	}()
	cache := &verdicts{m: map[digest]*cached{}}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				row := plan(ctx, o, interpreters, cache, j)
				select {
				case results <- result{j.seq, row}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(results)
	}()

	sum := newSummary(o.Canaries)
	// Rows finished ahead of an earlier one wait here; workers take jobs
	// in order, so at most a few do.
	pending := map[int]*Host{}
	next := 0
	var emitErr error
	for r := range results {
		row := r.row
		pending[r.seq] = &row
		for {
			h, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			sum.add(h)
			if emitErr == nil && emit != nil {
				if emitErr = emit(h); emitErr != nil {
					cancel()
				}
			}
		}
	}
	if emitErr != nil {
		return nil, emitErr
	}
	// Workers leave early only when ctx is done.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sum.finish()
	return sum, nil
}

// verdicts are the verdicts of a run by digest: the first worker to meet
// a digest plans it, and the others of that digest wait for its verdict.
type verdicts struct {
	mu            sync.Mutex
	m             map[digest]*cached
	scanned, hits int
	off           atomic.Bool
}

type cached struct {
	ready chan struct{}
	v     verdict
}

// scanning tells whether documents are still worth scanning: not once
// the cache is full and fewer than one document in four scanned found
// its digest there. Such a fleet is one of hosts each unlike the others
// (as hosts whose documents name their GPUs' UUIDs are), where the scan
// is a tenth of each host's time spent for nothing.
func (c *verdicts) scanning() bool { return !c.off.Load() }

// get returns the entry of digest and whether the caller is to fill it
// (and close ready); nil when the cache is full.
func (c *verdicts) get(digest digest) (*cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scanned++
	if e, ok := c.m[digest]; ok {
		c.hits++
		return e, false
	}
	if len(c.m) >= maxCached {
		if c.hits*4 < c.scanned {
			c.off.Store(true)
		}
		return nil, false
	}
	e := &cached{ready: make(chan struct{})}
	c.m[digest] = e
	return e, true
}

// drop forgets digest, whose verdict is its first document's alone.
func (c *verdicts) drop(digest digest) {
	c.mu.Lock()
	delete(c.m, digest)
	c.mu.Unlock()
}

// plan reads the document of j, when it is a file's, and plans it, or
// takes the verdict of a document of its digest planned before.
func plan(ctx context.Context, o Options, interpreters []string, cache *verdicts, j job) Host {
	if j.refused != nil {
		return Host{Name: j.name, File: j.file, Outcome: Refused, Reason: ReasonUnreadable, Error: fmt.Sprintf("%s: %v", j.file, j.refused), key: unreadableKey}
	}
	data := j.data
	if data == nil {
		var err error
		if data, err = readDocument(j.file); err != nil {
			return Host{Name: j.name, File: j.file, Outcome: Refused, Reason: ReasonUnreadable, Error: err.Error(), key: unreadableKey}
		}
	}
	data, err := gunzipped(data)
	if err != nil {
		return Host{Name: j.name, File: j.file, Outcome: Refused, Reason: ReasonUnreadable, Error: fmt.Sprintf("%s: %v", j.file, err), key: unreadableKey}
	}
	alone := func() Host {
		v, hostname, last := judge(ctx, o.Spec, interpreters, o.Planner, data)
		h := v.host(j.file, j.name, hostname)
		h.key = v.key
		h.LastApply = lastApplyOf(data, last)
		return h
	}
	if !cache.scanning() {
		return alone()
	}
	sc := scanDocument(data)
	if !sc.ok {
		return alone()
	}
	e, mine := cache.get(sc.digest)
	switch {
	case e == nil:
		return alone()
	case mine:
		e.v, _, _ = judge(ctx, o.Spec, interpreters, o.Planner, data)
		close(e.ready)
		if !e.v.shared {
			cache.drop(sc.digest)
			// A document that does not decode names no host.
			h := e.v.host(j.file, j.name, "")
			h.key = e.v.key
			return h
		}
	default:
		select {
		case <-e.ready:
		case <-ctx.Done():
			return Host{}
		}
		if !e.v.shared {
			return alone()
		}
	}
	h := e.v.host(j.file, j.name, sc.hostname)
	h.key = e.v.key
	h.LastApply = lastApplyOf(nil, sc.lastApply)
	return h
}

// produce sends a job for every document of inputs, in order.
func produce(ctx context.Context, inputs []Input, jobs chan<- job) {
	seq := 0
	send := func(j job) bool {
		j.seq = seq
		seq++
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, in := range inputs {
		switch {
		case in.Stream != nil:
			if !readStream(in.Stream, in.Name, send) {
				return
			}
		case in.Refused == nil && isArchiveName(in.File):
			if !readArchiveFile(in.File, send) {
				return
			}
		default:
			if !send(job{file: in.File, name: hostOf(in.File), refused: in.Refused}) {
				return
			}
		}
	}
}
