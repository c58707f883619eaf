// Package compat is gpuenv's compatibility knowledge: which driver a CUDA
// release needs, which GPUs a driver branch supports and with which kernel
// modules, what PyTorch, TensorFlow, JAX and cuDNN were built for, and what
// the packages are called in each repository. The facts live in data files
// embedded in the binary (data/*.tsv), each row with its source, so that
// the planner can say "inferred from cuda_releases row 12.4.1 (cuda-rn)"
// and a maintainer can update a fact without touching Go code.
//
// # Tables
//
//	sources.tsv          citation for every source id the other tables use
//	cuda_releases.tsv    CUDA toolkit release (GA, update) → its driver
//	cuda_families.tsv    CUDA major → minor-version compatibility floor, skipped minors (12.7)
//	driver_branches.tsv  driver branch → CUDA it reports, open modules, default flavour
//	container_toolkit.tsv CDI hook or driver branch → oldest container toolkit with it
//	architectures.tsv    architecture → compute capabilities, open-module support, first/last branch
//	gpus.tsv             PCI device id → model, architecture, compute capability, minimum driver
//	torch_releases.tsv   PyTorch release → patches, Python range, default PyPI variant
//	torch_variants.tsv   PyTorch release × CUDA variant → CUDA, cuDNN, compute capabilities carried
//	tensorflow.tsv       TensorFlow release → tested CUDA, cuDNN, Python; and-cuda
//	jax.tsv              JAX release × CUDA major → plugin, extras, CUDA/cuDNN/driver floors
//	cudnn.tsv            cuDNN releases × CUDA major → CUDA range, driver floor, capabilities
//	packages.tsv         OS × repository × component → package name and version templates
//	distro_packages.tsv  package versions seen in distribution archives
//
// # Format
//
// Each table is one tab-separated file. Lines starting with "#" are
// comments and say what the columns mean; the first other line is the
// header, which must name exactly the columns the loader reads, in any
// order. Cells are trimmed of spaces, so columns may be padded for
// reading; an empty cell means "not known" or "not applicable" as the
// file's comment says, and a row may leave trailing empty cells out.
// Lists inside a cell are comma-separated. Versions are written as the
// version package parses them ("535.261.03", "12.4.1").
//
// TSV was chosen over JSON and HCL: a fact is one line, so a change is a
// one-line diff that reviews well and a spreadsheet opens the file; it
// parses with the standard library alone (this package may import only the
// standard library and the leaves spec/version and spec/lazyregexp), and
// parsing every table takes well
// under a millisecond, so the lazily loaded tables cost a plan nothing
// noticeable.
//
// Every row ends with two columns. source lists ids from sources.tsv,
// comma-separated. unverified is empty for a row whose every field a
// source confirms; otherwise it names the fields written from memory, and
// the source list must then include the id "unverified" (and only then).
// Queries return rows carrying a Source that keeps both, so callers can
// tell a sourced fact from a remembered one.
//
// # Adding a row
//
// Add the line where its key sorts (each file's comment says the order;
// the loaders reject unsorted or duplicate keys), cite a source id or add
// the source to sources.tsv first, and run
//
//	go test ./planner/compat/
//
// which loads every row of every table and checks the invariants across
// them: versions parse, keys are unique and sorted, sources exist, driver
// floors rise with CUDA versions, every GPU's capability belongs to its
// architecture, every PyTorch and TensorFlow build's cuDNN has a build for
// its CUDA, every package template expands. A row the loaders reject makes
// Check fail and the queries panic, so a broken table cannot ship.
//
// # Loading
//
// Each table is parsed on first use (sync.OnceValues), so a plan that only
// asks about drivers never parses the framework tables. Returned rows share
// their slices with the tables: callers must not modify them.
package compat
