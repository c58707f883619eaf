// Package spec reads gpuenv specs: HCL files that declare the GPU stack a
// host should have. Load parses a file or a directory of *.hcl files,
// resolves variables and locals, evaluates expressions with a curated set of
// functions, and decodes every block into typed values that keep their
// source ranges, so that later stages can point diagnostics at the text the
// user wrote. Every problem Load can find without looking at a host is
// reported at once as hcl.Diagnostics; checks that need facts about the host
// belong to the planner. Format rewrites a spec in canonical layout.
package spec
