package apply

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Event is what a journal record says happened.
type Event string

const (
	// EventStart opens a journal: the generation's kind and how many
	// operations it will run.
	EventStart Event = "start"
	// EventBegin is written, with the operation and its inverse, before
	// the operation runs.
	EventBegin Event = "begin"
	// EventDone and EventFailed are an operation's outcome.
	EventDone   Event = "done"
	EventFailed Event = "failed"
	// EventSkipped is an operation not run, with the reason (a kernel or
	// NVML operation on a root that is not the live system).
	EventSkipped Event = "skipped"
	// EventAudit is dpkg's own recovery, run before the inverses of an
	// interrupted package transaction.
	EventAudit Event = "audit"
	// EventUndo is written before an inverse runs; EventUndone and
	// EventUndoFailed are its outcome. They name the generation and
	// operation undone.
	EventUndo       Event = "undo"
	EventUndone     Event = "undone"
	EventUndoFailed Event = "undo-failed"
	// EventEnd closes a finished journal with the generation's status.
	EventEnd Event = "end"
)

// Record is one line of a journal.
type Record struct {
	// N numbers the records from 1; a gap or repeat is corruption.
	N     int       `json:"n"`
	Time  time.Time `json:"time"`
	Event Event     `json:"event"`
	// Op numbers the operation, from 1, in its generation's plan.
	Op int `json:"op,omitempty"`
	// Generation is the generation whose operation an undo record
	// concerns.
	Generation int             `json:"generation,omitempty"`
	Step       string          `json:"step,omitempty"`
	Operation  *plan.Operation `json:"operation,omitempty"`
	Inverse    *Inverse        `json:"inverse,omitempty"`
	// Kind and Ops are set on the start record.
	Kind   Kind   `json:"kind,omitempty"`
	Ops    int    `json:"ops,omitempty"`
	Status Status `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	Note   string `json:"note,omitempty"`
	// Check is the CRC-32 (IEEE) of the record's JSON with Check empty,
	// so that a flipped byte is found rather than acted on.
	Check string `json:"check"`
}

func checksum(r Record) (string, error) {
	r.Check = ""
	data, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%08x", crc32.ChecksumIEEE(data)), nil
}

// journal appends records to a generation's journal file, each written in
// one write and fsynced before Append returns: a record on disk means the
// step it announces may have happened.
type journal struct {
	f    *os.File
	next int
	// point is called after every record is durable, with the count of
	// records written by this process; tests kill the process there.
	point func(int)
	count int
}

func openJournal(p string, existing []Record, point func(int)) (*journal, error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if len(existing) == 0 {
		if err := syncDir(filepath.Dir(p)); err != nil {
			f.Close()
			return nil, err
		}
	}
	// A journal continued after a write that failed half-way (the disk
	// was full) ends in a torn record: cut it off, so that the records
	// appended now follow the last whole one.
	if err := cutTornTail(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("repairing the journal's torn last record: %w", err)
	}
	j := &journal{f: f, next: len(existing) + 1, point: point}
	if point != nil {
		// Point 0: the journal is open and nothing is written yet.
		point(0)
	}
	return j, nil
}

// cutTornTail truncates f after its last newline: whatever follows it is
// a record whose write did not finish.
func cutTornTail(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	const chunk = 64 * 1024
	buf := make([]byte, chunk)
	end := fi.Size()
	for end > 0 {
		start := max(end-chunk, 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && n < int(end-start) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			whole := start + int64(i) + 1
			if whole == fi.Size() {
				return nil
			}
			if err := f.Truncate(whole); err != nil {
				return err
			}
			return f.Sync()
		}
		end = start
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	return f.Sync()
}

func (j *journal) append(r Record) error {
	r.N = j.next
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	sum, err := checksum(r)
	if err != nil {
		return err
	}
	r.Check = sum
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := j.f.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing the journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("syncing the journal: %w", err)
	}
	j.next++
	j.count++
	if j.point != nil {
		j.point(j.count)
	}
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// CorruptJournalError says a journal cannot be trusted; nothing is done
// from it.
type CorruptJournalError struct {
	Path   string
	Line   int
	Reason string
}

func (e *CorruptJournalError) Error() string {
	return fmt.Sprintf("journal %s is corrupt at line %d: %s; nothing was changed — inspect the file; the generation's plan.json and saved files are kept beside it", e.Path, e.Line, e.Reason)
}

// ReadJournal reads and verifies a journal. Every line must be a complete
// record with the right number and checksum: a record is written in one
// write, so a kill cannot leave half of one. Only a write that failed
// (the disk full) can: a generation that did not finish may end in bytes
// without a newline, the torn record of that write, and it is left out —
// the operation it announced was not started, or its outcome is unknown
// and the operation counts as interrupted. Anything else means the file
// was damaged. finished says the generation's meta claims it ended, in
// which case the journal must end with an end record and nothing torn.
func ReadJournal(p string, finished bool) ([]Record, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) && !finished {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	if i := bytes.LastIndexByte(data, '\n'); !finished && i+1 < len(data) {
		data = data[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		var r Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, &CorruptJournalError{p, line, fmt.Sprintf("not a journal record (%v)", err)}
		}
		want, err := checksum(r)
		if err != nil {
			return nil, &CorruptJournalError{p, line, err.Error()}
		}
		if r.Check != want {
			return nil, &CorruptJournalError{p, line, "checksum mismatch"}
		}
		if r.N != line {
			return nil, &CorruptJournalError{p, line, fmt.Sprintf("record number %d out of sequence", r.N)}
		}
		out = append(out, r)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, &CorruptJournalError{p, line, "the last record is cut short (truncated file)"}
	}
	if len(out) > 0 && out[0].Event != EventStart {
		return nil, &CorruptJournalError{p, 1, "the first record is not a start record"}
	}
	if finished && (len(out) == 0 || out[len(out)-1].Event != EventEnd) {
		return nil, &CorruptJournalError{p, line, "the generation finished but its journal has no end record (truncated file)"}
	}
	return out, nil
}
