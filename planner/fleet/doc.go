// Package fleet plans one spec against many hosts' saved observations
// (gpuenv plan --facts): the documents `gpuenv observe --json` printed on
// each host, gathered by a collector. It answers before a rollout which
// hosts the spec would change, which would need a reboot, and which it
// would refuse, without reaching those hosts or reading anything of the
// machine it runs on besides the documents: every fact a plan needs comes
// from the document, and a plan that needs one the document lacks is
// refused with the reason.
//
// The spec is loaded once; documents are read, decoded and planned by a
// pool of workers, and each host leaves behind only a small row, handed
// out in input order as soon as it is ready, and its part of the summary.
// Memory therefore stays the same however many hosts are planned, but for
// the names of a directory's documents, listed to be read in order.
package fleet
