package apply

import (
	"path/filepath"
	"slices"
)

// reconcile brings the generations' summaries in line with their journals,
// which are written first and are the record of what happened: meta.json
// is rewritten after the journal's end record, and a write that failed
// there (the disk full) would otherwise leave a cleanly ended generation
// shown as running, or an apply undone by a finished rollback shown as
// still applied. It changes only the copies in gens; repair writes them
// back.
func (s *Store) reconcile(gens []Meta) {
	for i := range gens {
		m := &gens[i]
		if m.Finished != nil || m.Status == StatusDamaged {
			// A damaged generation has no summary to correct: it is
			// shown as damaged until a person looks at it.
			continue
		}
		if end, ok := journalEnd(filepath.Join(s.genAbs(m.ID), journalName)); ok {
			t := end.Time
			m.Status, m.Finished = end.Status, &t
		}
	}
	for _, rb := range gens {
		if rb.Kind != KindRollback || rb.Status != StatusDone {
			continue
		}
		for i := range gens {
			m := &gens[i]
			if m.Kind != KindApply || !slices.Contains(rb.Undoes, m.ID) || m.UndoneBy != 0 {
				continue
			}
			m.UndoneBy = rb.ID
			if m.Status.Unfinished() {
				m.Status = StatusReverted
			}
		}
	}
}

// journalEnd returns the end record of the journal at p (on this machine),
// if it has one: the generation it belongs to ended, with that status.
func journalEnd(p string) (Record, bool) {
	recs, err := ReadJournal(p, false)
	if err != nil || len(recs) == 0 {
		return Record{}, false
	}
	last := recs[len(recs)-1]
	return last, last.Event == EventEnd && last.Status != ""
}

// repair writes back what reconcile found, while the lock is held, so
// that meta.json and status.json (read by plan, run by any user) tell the
// truth again. gens are as Generations returns them.
func (s *Store) repair(gens []Meta) error {
	for _, m := range gens {
		if m.Status == StatusDamaged {
			continue
		}
		raw, err := s.Meta(m.ID)
		if err != nil {
			return err
		}
		if raw.Status == m.Status && raw.UndoneBy == m.UndoneBy && (raw.Finished == nil) == (m.Finished == nil) {
			continue
		}
		if err := s.writeMeta(m); err != nil {
			return err
		}
	}
	return nil
}
