// Package facts holds the observation document: what gpuenv saw on a host,
// as plain data. It is what `gpuenv observe --json` prints, what the planner
// diffs a spec against, and what a generation records as "the host before".
//
// The types carry no behaviour and import nothing of gpuenv's own but the
// finding type (a leaf package), so that every other package can depend on
// them without cycles. Versions are kept as
// the strings the host wrote (a driver's "535.261.03" stays exactly that);
// interpreting them is the planner's job.
//
// The JSON encoding is a stable contract: fields are only added, never
// renamed or removed, without raising SchemaVersion. Each addition raises
// SchemaMinor and, for a top-level fact, is listed in Additions, so that a
// reader of saved documents (plan --facts) can say what an older one
// lacks rather than take a missing fact for an empty one.
package facts
