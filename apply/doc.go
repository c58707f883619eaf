// Package apply carries out a Plan on a host and can take it back.
//
// Every operation of a plan is prepared first: apply reads the exact state
// the operation will change (the previous bytes of a file, the previous
// version and hold of each package, a group's members, a service's
// enablement, a device setting) and saves what restoring it needs into the
// generation (the file's bytes, the installed version's .deb, .rpm or wheel).
// The operation and its inverse are then written to the generation's
// journal and fsynced, and only then is the operation run; its outcome is
// journaled after. A file's content is in the plan, or, where only the
// steps before it can decide it (a CDI spec after a driver upgrade), made
// by the Generator cmd hands in when its turn comes, and journaled in the
// operation before it is written: apply itself observes nothing and
// imports no provider, only host access. A failure reverts the operations already done, newest
// first; a process killed at any point leaves a journal from which
// Rollback finishes the revert days later, from a new process, offline.
//
// Generations live in a state directory inside the root (Store); one apply
// or rollback runs at a time per root (Lock). Inverses are idempotent:
// each compares the host with the state it restores and changes only what
// differs, so running one twice, or after a half-finished forward
// operation, is safe.
package apply
