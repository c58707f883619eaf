package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

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

// Inputs expands the arguments of plan --facts: a file is one document,
// a directory every *.json file in it (not below), by name, and "-" the
// JSON lines of stdin. Every argument must name something: a path that
// does not exist, or a directory with no document, is an error naming it.
// A symlink in a directory is not followed: it is an input refused, which
// plans as a refused row naming it.
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
		names, err := filepath.Glob(filepath.Join(globEscape(a), "*.json"))
		if err != nil {
			return nil, fmt.Errorf("--facts %s: %w", a, err)
		}
		n := 0
		for _, name := range names {
			fi, err := os.Lstat(name)
			switch {
			case err != nil:
				out = append(out, Input{File: name, Refused: err})
			case fi.Mode()&os.ModeSymlink != 0:
				out = append(out, Input{File: name, Refused: errSymlink})
			case fi.IsDir():
				// A directory named like a document is not one.
				continue
			default:
				// Not a regular file: reading it says what it is.
				out = append(out, Input{File: name})
			}
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("--facts %s: the directory holds no observation document (*.json)", a)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--facts: no observation document named")
	}
	return out, nil
}

// globEscape quotes the characters filepath.Glob gives a meaning to, so
// that a directory's own name matches only itself.
func globEscape(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
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
}

// gcPercent is the collector's GOGC while a run lasts.
const gcPercent = 400

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
// that cannot be read or planned is a refused row, not an error; the
// error is emit's, a stream's that could not be read, or ctx's.
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
	var readErr error
	go func() {
		defer close(jobs)
		readErr = produce(ctx, inputs, jobs)
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				row := plan(ctx, o, interpreters, j)
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

	sum := newSummary()
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
	// Workers leave early only when ctx is done, and may leave the
	// producer running; otherwise they ranged over every job, so the
	// producer has returned and readErr is set.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if readErr != nil {
		return nil, readErr
	}
	sum.finish()
	return sum, nil
}

// plan reads the document of j, when it is a file's, and plans it.
func plan(ctx context.Context, o Options, interpreters []string, j job) Host {
	if j.refused != nil {
		return Host{Name: j.name, File: j.file, Outcome: Refused, Reason: ReasonUnreadable, Error: fmt.Sprintf("%s: %v", j.file, j.refused)}
	}
	data := j.data
	if data == nil {
		var err error
		if data, err = readDocument(j.file); err != nil {
			return Host{Name: j.name, File: j.file, Outcome: Refused, Reason: ReasonUnreadable, Error: err.Error()}
		}
	}
	return planHost(ctx, o.Spec, interpreters, o.Planner, data, j.file, j.name)
}

// produce sends a job for every document of inputs, in order.
func produce(ctx context.Context, inputs []Input, jobs chan<- job) error {
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
		if in.Stream == nil {
			base := filepath.Base(in.File)
			if !send(job{file: in.File, name: strings.TrimSuffix(base, ".json"), refused: in.Refused}) {
				return nil
			}
			continue
		}
		r := bufio.NewReaderSize(in.Stream, 256<<10)
		for line := 1; ; line++ {
			data, err := readLine(r)
			if len(bytes.TrimSpace(data)) > 0 {
				where := fmt.Sprintf("%s:%d", in.Name, line)
				if !send(job{file: where, name: where, data: data}) {
					return nil
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("reading %s at line %d: %w", in.Name, line, err)
			}
		}
	}
	return nil
}

// readLine reads one line, without its newline, into memory of its own:
// the job outlives the reader's buffer.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxDocument {
			return nil, fmt.Errorf("a line longer than %d MiB is no observation document", maxDocument>>20)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}
