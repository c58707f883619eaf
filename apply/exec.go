package apply

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Executor carries out operations and their inverses. The engine calls
// Prepare, journals the inverse it returns, then calls Run; Undo runs an
// inverse recorded by Prepare, possibly in another process, days later.
//
// Contract:
//   - Prepare only reads the host; it may write into the workspace (saved
//     bytes and package files). It returns a *SkipError for an operation
//     that must not run on this host, with the reason.
//   - Run changes the host as the operation says. It may be interrupted at
//     any point (killed). It returns a *PrepareAgainError, having changed
//     nothing, when the operation must be prepared again first.
//   - Undo is idempotent: it compares the host with the inverse and
//     changes only what differs, so it is safe to run after a Run that
//     finished, failed half-way or never started, and safe to run twice.
//   - Recover brings a package manager interrupted mid-transaction back to
//     a consistent state, before any Undo of such a transaction.
//   - Check confirms, at the end of an apply, a revert or a rollback, that
//     the package databases show what the journal expects and that no
//     package manager left anything half-done.
//   - All of them honour ctx and run commands as argv, never via a shell.
type Executor interface {
	Prepare(ctx context.Context, ws *Workspace, seq int, op plan.Operation) (*Inverse, error)
	Run(ctx context.Context, ws *Workspace, op plan.Operation) error
	Undo(ctx context.Context, ws *Workspace, inv *Inverse) error
	Recover(ctx context.Context, ws *Workspace, manager string) error
	Check(ctx context.Context, ws *Workspace, want []Expectation) error
}

// Expectation is what one package transaction must have left: its
// operation's result (Op) once it ran, or the state before it (Inverse)
// once it was undone. A list of them is read in order, a later one
// saying what becomes of a package an earlier one named. An Op may come
// with its Inverse, for what the inverse recorded of the host before it.
type Expectation struct {
	Op      *plan.PackagesOp
	Inverse *PackagesInverse
}

func (e Expectation) manager() string {
	if e.Op != nil {
		return string(e.Op.Manager)
	}
	return e.Inverse.Manager
}

// Workspace is what an executor may use of the generation being run.
type Workspace struct {
	// Dir is the generation's directory inside the root, Path the same on
	// this machine.
	Dir  string
	Path string
	// Log receives the output of every command run.
	Log io.Writer
	// Say tells the run's hook, as a note, what a person waits on or
	// should know while the operation runs (a lock being waited for, a
	// fallback taken); the log gets it too.
	Say func(format string, args ...any)
	// progress follows the operation running; nil when nobody does.
	progress *tracker
}

func (ws *Workspace) say(format string, args ...any) {
	if ws.Say != nil {
		ws.Say(format, args...)
	}
}

// SkipError is an operation that is not run on this host, with why; it is
// journaled as skipped and reported, never an error of the apply.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

// HostExecutor runs operations on a host through its command runner.
type HostExecutor struct {
	Host *host.Host
	// Devices sets NVML device settings; nil when NVML is not available,
	// which fails device operations on a live root.
	Devices DeviceSettings
	// Driver asks NVML which driver version it reports, to check a
	// module reload; nil where NVML is not available, when the kernel's
	// answer alone is checked.
	Driver DriverVersion
	// ReloadWait bounds how long a reload's check waits for NVML to
	// answer. Zero: DefaultReloadWait.
	ReloadWait time.Duration
	// PackageLockTimeout bounds the wait for dpkg's lock (held by
	// unattended-upgrades, say). Zero: DefaultPackageLockTimeout.
	PackageLockTimeout time.Duration
	// Indexes reads the root's package indexes as a plan's observation
	// does. An apt transaction reads them afresh, after the operations
	// before it (a refresh, a new repository) ran: to pin a version the
	// plan left to apply, to pin what its pins depend on at one exact
	// version, and to take the package files it saves for rollback from
	// the package cache where their checksum is the index's. Nil: apt is
	// asked in a child process instead, and every file is downloaded.
	Indexes func(ctx context.Context) (*facts.PackageIndexes, error)

	// indexes are what Indexes read for the transaction indexesOp.
	indexes   *facts.PackageIndexes
	indexesOp *plan.PackagesOp
	// trivialOp is the apt transaction prepared without a dry run, which
	// apt is told to refuse if it would change more than its pins;
	// fullOp the one that must be prepared with a dry run, apt having
	// refused it so.
	trivialOp, fullOp *plan.PackagesOp
}

// PrepareAgainError is what Run returns for an operation that changed
// nothing and must be prepared again before it runs: its preparation
// assumed less than the package manager then wanted to do. The engine
// prepares it once more, journals the new inverse, and runs it again.
type PrepareAgainError struct{ Reason string }

func (e *PrepareAgainError) Error() string { return e.Reason }

// DefaultPackageLockTimeout is how long a package transaction waits for
// another package manager to finish.
const DefaultPackageLockTimeout = 5 * time.Minute

var _ Executor = (*HostExecutor)(nil)

// Prepare implements Executor.
func (x *HostExecutor) Prepare(ctx context.Context, ws *Workspace, seq int, op plan.Operation) (*Inverse, error) {
	if err := validateOp(op); err != nil {
		return nil, err
	}
	inv := &Inverse{Kind: op.Kind}
	if err := x.kind(op.Kind).prepare(ctx, ws, seq, op, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

// Run implements Executor.
func (x *HostExecutor) Run(ctx context.Context, ws *Workspace, op plan.Operation) error {
	k := x.kind(op.Kind)
	if k == nil {
		return fmt.Errorf("unknown operation kind %q", op.Kind)
	}
	return k.run(ctx, ws, op)
}

// Undo implements Executor.
func (x *HostExecutor) Undo(ctx context.Context, ws *Workspace, inv *Inverse) error {
	if err := validateInverse(inv); err != nil {
		return err
	}
	return x.kind(inv.Kind).undo(ctx, ws, inv)
}

// Recover implements Executor.
func (x *HostExecutor) Recover(ctx context.Context, ws *Workspace, manager string) error {
	m, ok := x.manager(manager)
	if !ok {
		return nil
	}
	return m.recover(ctx, ws)
}

// Check implements Executor: each package manager checks the
// expectations of its own transactions.
func (x *HostExecutor) Check(ctx context.Context, ws *Workspace, want []Expectation) error {
	byManager := map[string][]Expectation{}
	var order []string
	for _, e := range want {
		n := e.manager()
		if _, ok := byManager[n]; !ok {
			order = append(order, n)
		}
		byManager[n] = append(byManager[n], e)
	}
	for _, n := range order {
		m, ok := x.manager(n)
		if !ok {
			continue
		}
		if err := m.check(ctx, ws, byManager[n]); err != nil {
			return err
		}
	}
	return nil
}

// kindExecutor carries out the operations of one kind and their
// inverses, with the contract of Executor. Its methods read and fill only
// their own kind's field of the operation and the inverse.
type kindExecutor interface {
	// owns reports whether op carries this kind's data.
	owns(op plan.Operation) bool
	// inverseNames checks the kind's data of an inverse read back from a
	// journal: ok is false when it is missing, names are the values the
	// inverse passes to commands as names.
	inverseNames(inv *Inverse) (names []string, ok bool, err error)
	prepare(ctx context.Context, ws *Workspace, seq int, op plan.Operation, inv *Inverse) error
	run(ctx context.Context, ws *Workspace, op plan.Operation) error
	undo(ctx context.Context, ws *Workspace, inv *Inverse) error
}

// kindOps are the operations of one kind, typed: O is the kind's data in
// an Operation, I in an Inverse. typedKind makes them a kindExecutor.
type kindOps[O, I any] interface {
	// opField and invField are the kind's fields of Operation and Inverse.
	opField(op *plan.Operation) **O
	invField(inv *Inverse) **I
	// names checks an inverse read back from a journal and returns the
	// values it passes to commands as names.
	names(inv *I) ([]string, error)
	prepare(ctx context.Context, ws *Workspace, seq int, op *O) (*I, error)
	run(ctx context.Context, ws *Workspace, op *O) error
	undo(ctx context.Context, ws *Workspace, inv *I) error
}

// typedKind is the kindExecutor of one kind's kindOps.
type typedKind[O, I any] struct{ ops kindOps[O, I] }

func (k typedKind[O, I]) owns(op plan.Operation) bool { return *k.ops.opField(&op) != nil }

func (k typedKind[O, I]) inverseNames(inv *Inverse) ([]string, bool, error) {
	data := *k.ops.invField(inv)
	if data == nil {
		return nil, false, nil
	}
	names, err := k.ops.names(data)
	return names, true, err
}

func (k typedKind[O, I]) prepare(ctx context.Context, ws *Workspace, seq int, op plan.Operation, inv *Inverse) (err error) {
	*k.ops.invField(inv), err = k.ops.prepare(ctx, ws, seq, *k.ops.opField(&op))
	return err
}

func (k typedKind[O, I]) run(ctx context.Context, ws *Workspace, op plan.Operation) error {
	return k.ops.run(ctx, ws, *k.ops.opField(&op))
}

func (k typedKind[O, I]) undo(ctx context.Context, ws *Workspace, inv *Inverse) error {
	return k.ops.undo(ctx, ws, *k.ops.invField(inv))
}

// kinds is the executor of each operation kind.
var kinds = map[plan.OpKind]func(*HostExecutor) kindExecutor{
	plan.OpFile:  func(x *HostExecutor) kindExecutor { return typedKind[plan.FileOp, FileInverse]{fileExecutor{x}} },
	plan.OpGroup: func(x *HostExecutor) kindExecutor { return typedKind[plan.GroupOp, GroupInverse]{groupExecutor{x}} },
	plan.OpPackages: func(x *HostExecutor) kindExecutor {
		return typedKind[plan.PackagesOp, PackagesInverse]{packagesExecutor{x}}
	},
	plan.OpKernel: func(x *HostExecutor) kindExecutor {
		return typedKind[plan.KernelOp, KernelInverse]{kernelExecutor{x}}
	},
	plan.OpService: func(x *HostExecutor) kindExecutor {
		return typedKind[plan.ServiceOp, ServiceInverse]{serviceExecutor{x}}
	},
	plan.OpDevice: func(x *HostExecutor) kindExecutor {
		return typedKind[plan.DeviceOp, DeviceInverse]{deviceExecutor{x}}
	},
	plan.OpRefresh: func(x *HostExecutor) kindExecutor {
		return typedKind[plan.RefreshOp, RefreshInverse]{refreshExecutor{x}}
	},
}

// kind is the executor of operations of kind k, nil for a kind gpuenv
// does not know.
func (x *HostExecutor) kind(k plan.OpKind) kindExecutor {
	if mk, ok := kinds[k]; ok {
		return mk(x)
	}
	return nil
}

// validateOp checks an operation before it is prepared: exactly its own
// field set, and every value in it one the planner could have produced
// (plan.CheckOperation). A plan may come from a file anyone could edit,
// and its values reach commands run as root.
func validateOp(op plan.Operation) error {
	k := (*HostExecutor)(nil).kind(op.Kind)
	if k == nil {
		return fmt.Errorf("unknown operation kind %q", op.Kind)
	}
	set := 0
	for _, p := range []bool{op.Packages != nil, op.File != nil, op.Group != nil, op.Kernel != nil, op.Service != nil, op.Device != nil, op.Refresh != nil} {
		if p {
			set++
		}
	}
	if !k.owns(op) || set != 1 {
		return fmt.Errorf("operation of kind %q must set exactly its own field", op.Kind)
	}
	return plan.CheckOperation(op)
}

// validateInverse checks an inverse read back from a journal before it
// runs: its data is there, the file it restores is one gpuenv manages, its
// follow-up command is one gpuenv runs, and no name it passes to a command
// could be read as an option.
func validateInverse(inv *Inverse) error {
	if inv == nil {
		return fmt.Errorf("no inverse recorded")
	}
	ok := false
	var names []string
	if k := (*HostExecutor)(nil).kind(inv.Kind); k != nil {
		var err error
		if names, ok, err = k.inverseNames(inv); err != nil {
			return err
		}
	}
	if !ok {
		return fmt.Errorf("inverse of kind %q lacks its data", inv.Kind)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "-") || strings.ContainsFunc(n, unicode.IsSpace) {
			return fmt.Errorf("inverse of kind %q names %q, which a command would not read as a name", inv.Kind, n)
		}
	}
	return nil
}

// aptEnv keeps Debian's tools from asking questions nobody will answer.
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none"}

// command runs argv inside the root with its output appended to the log,
// after a line saying what ran.
func (x *HostExecutor) command(ctx context.Context, ws *Workspace, env []string, argv ...string) error {
	err := x.run(ctx, ws, env, nil, argv)
	if err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
	}
	return err
}

// output runs argv inside the root and returns its standard output; its
// standard error goes to the log.
func (x *HostExecutor) output(ctx context.Context, ws *Workspace, env []string, argv ...string) ([]byte, error) {
	var out bytes.Buffer
	err := x.run(ctx, ws, env, &out, argv)
	if err != nil {
		fmt.Fprintf(ws.Log, "%sgpuenv: %v\n", out.String(), err)
	}
	return out.Bytes(), err
}

// run runs argv inside the root, its standard output to stdout (nil: the
// log) and its standard error to the log. A package manager that reports
// its progress (status.go) is asked to, on a pipe of its own, and the
// operation's tracker follows it and the last line it prints; the log
// gets the same output as without.
func (x *HostExecutor) run(ctx context.Context, ws *Workspace, env []string, stdout io.Writer, argv []string) error {
	rep := reportOf(argv)
	t := ws.progress
	t.begin(rep.phase, rep.argv != nil)
	stderr := ws.Log
	if t != nil {
		stderr = io.MultiWriter(ws.Log, &lastLine{t: t})
	}
	if stdout == nil {
		// One writer for both: exec then copies them in one goroutine,
		// keeping their lines whole and in order.
		stdout = stderr
	}
	c := host.Command{Argv: argv, Env: env, Stdout: stdout, Stderr: stderr}
	var done func()
	if rep.argv != nil {
		// Progress is a help, not a need: without a pipe the command
		// runs as it would without gpuenv asking.
		if r, w, err := os.Pipe(); err == nil {
			c.Argv, c.ExtraFiles = rep.argv, []*os.File{w}
			done = follow(r, w, rep.read(t, x.Host.Resolve))
		}
	}
	fmt.Fprintf(ws.Log, "$ %s\n", strings.Join(c.Argv, " "))
	err := x.Host.Run(ctx, c)
	if done != nil {
		done()
	}
	return err
}

// follow reads a command's status lines from r, the pipe whose other end
// w the command is given, until the command has exited: done closes
// gpuenv's w, reads what is left and stops.
func follow(r, w *os.File, sr statusReader) (done func()) {
	read := make(chan struct{})
	go func() {
		defer close(read)
		readStatus(r, sr)
	}()
	return func() {
		w.Close()
		// A process the command left running (a daemon a maintainer
		// script started) may hold its copy of w open: what it has not
		// written by now is not the command's.
		r.SetReadDeadline(time.Now().Add(time.Second))
		<-read
		r.Close()
		sr.end()
	}
}

// real is where p, a path inside the root, lives on this machine, with
// symlinks followed in its directories but not in its last component: a
// write replaces the entry itself.
func (x *HostExecutor) real(p string) (string, error) {
	p = path.Clean(p)
	dir, err := x.Host.Resolve(path.Dir(p))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, path.Base(p)), nil
}
