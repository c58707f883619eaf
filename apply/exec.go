package apply

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/gpuenv/gpuenv/planner"
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
//     any point (killed).
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
	Prepare(ctx context.Context, ws *Workspace, seq int, op planner.Operation) (*Inverse, error)
	Run(ctx context.Context, ws *Workspace, op planner.Operation) error
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
	Op      *planner.PackagesOp
	Inverse *PackagesInverse
}

func (e Expectation) manager() string {
	if e.Op != nil {
		return e.Op.Manager
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
	// Say reports progress a person waits on (a lock being waited for).
	Say func(format string, args ...any)
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
	// PackageLockTimeout bounds the wait for dpkg's lock (held by
	// unattended-upgrades, say). Zero: DefaultPackageLockTimeout.
	PackageLockTimeout time.Duration
}

// DefaultPackageLockTimeout is how long a package transaction waits for
// another package manager to finish.
const DefaultPackageLockTimeout = 5 * time.Minute

var _ Executor = (*HostExecutor)(nil)

// Prepare implements Executor.
func (x *HostExecutor) Prepare(ctx context.Context, ws *Workspace, seq int, op planner.Operation) (*Inverse, error) {
	if err := validateOp(op); err != nil {
		return nil, err
	}
	var inv Inverse
	var err error
	inv.Kind = op.Kind
	switch op.Kind {
	case planner.OpFile:
		inv.File, err = x.prepareFile(ws, seq, op.File)
	case planner.OpGroup:
		inv.Group, err = x.prepareGroup(op.Group)
	case planner.OpPackages:
		inv.Packages, err = x.preparePackages(ctx, ws, seq, op.Packages)
	case planner.OpKernel:
		inv.Kernel, err = x.prepareKernel(op.Kernel)
	case planner.OpService:
		inv.Service, err = x.prepareService(ctx, ws, op.Service)
	case planner.OpDevice:
		inv.Device, err = x.prepareDevice(op.Device)
	}
	if err != nil {
		return nil, err
	}
	return &inv, nil
}

// Run implements Executor.
func (x *HostExecutor) Run(ctx context.Context, ws *Workspace, op planner.Operation) error {
	switch op.Kind {
	case planner.OpFile:
		return x.runFile(ctx, ws, op.File)
	case planner.OpGroup:
		return x.runGroup(ctx, ws, op.Group)
	case planner.OpPackages:
		return x.runPackages(ctx, ws, op.Packages)
	case planner.OpKernel:
		return x.runKernel(ctx, ws, op.Kernel)
	case planner.OpService:
		return x.runService(ctx, ws, op.Service)
	case planner.OpDevice:
		return x.Devices.Set(op.Device.UUID, op.Device.Setting, op.Device.Value)
	}
	return fmt.Errorf("unknown operation kind %q", op.Kind)
}

// Undo implements Executor.
func (x *HostExecutor) Undo(ctx context.Context, ws *Workspace, inv *Inverse) error {
	if err := validateInverse(inv); err != nil {
		return err
	}
	switch inv.Kind {
	case planner.OpFile:
		return x.undoFile(ctx, ws, inv.File)
	case planner.OpGroup:
		return x.undoGroup(ctx, ws, inv.Group)
	case planner.OpPackages:
		return x.undoPackages(ctx, ws, inv.Packages)
	case planner.OpKernel:
		return x.undoKernel(ctx, ws, inv.Kernel)
	case planner.OpService:
		return x.undoService(ctx, ws, inv.Service)
	case planner.OpDevice:
		return x.undoDevice(inv.Device)
	}
	return fmt.Errorf("unknown inverse kind %q", inv.Kind)
}

// Recover implements Executor.
func (x *HostExecutor) Recover(ctx context.Context, ws *Workspace, manager string) error {
	if manager == "dnf" {
		return x.recoverDnf(ctx, ws)
	}
	if manager != "apt" {
		return nil
	}
	// dpkg's own recovery (`dpkg --configure -a`) cannot repair a package
	// a power cut left half-unpacked, and stops there; undoing the
	// transaction repairs dpkg from the package files saved for it (see
	// undoApt). Here what dpkg left is only recorded in the log.
	_ = x.run(ctx, ws, nil, "dpkg", "--audit")
	return nil
}

// Check implements Executor. apt transactions are checked against dpkg's
// database; dnf and pip transactions are checked by their undo, which
// compares each package with its prior version.
func (x *HostExecutor) Check(ctx context.Context, ws *Workspace, want []Expectation) error {
	byName := map[string]expectedDeb{}
	var order, before []string
	apt := false
	for _, e := range want {
		if e.manager() != "apt" {
			continue
		}
		apt = true
		if e.Inverse != nil {
			before = append(before, e.Inverse.Unfinished...)
		}
		var exp []expectedDeb
		if e.Op != nil {
			exp = expectOp(e.Op)
			// A hold or release of a package the transaction does not
			// pin changes only the hold of what an earlier one left.
			for _, names := range [][]string{e.Op.Hold, e.Op.Unhold} {
				for _, n := range names {
					if d, ok := byName[n]; ok && d.Version != "" && !slices.ContainsFunc(exp, func(x expectedDeb) bool { return x.Name == n }) {
						held := slices.Contains(e.Op.Hold, n)
						d.Held = &held
						byName[n] = d
					}
				}
			}
		} else {
			exp = expectPrior(e.Inverse.Packages)
		}
		for _, d := range exp {
			if _, ok := byName[d.Name]; !ok {
				order = append(order, d.Name)
			}
			byName[d.Name] = d
		}
	}
	if !apt {
		return nil
	}
	exp := make([]expectedDeb, 0, len(order))
	for _, n := range order {
		exp = append(exp, byName[n])
	}
	return x.checkApt(exp, before)
}

// validateOp checks an operation before it is prepared: exactly its own
// field set, and every value in it one the planner could have produced
// (planner.CheckOperation). A plan may come from a file anyone could edit,
// and its values reach commands run as root.
func validateOp(op planner.Operation) error {
	var own bool
	switch op.Kind {
	case planner.OpPackages:
		own = op.Packages != nil
	case planner.OpFile:
		own = op.File != nil
	case planner.OpGroup:
		own = op.Group != nil
	case planner.OpKernel:
		own = op.Kernel != nil
	case planner.OpService:
		own = op.Service != nil
	case planner.OpDevice:
		own = op.Device != nil
	default:
		return fmt.Errorf("unknown operation kind %q", op.Kind)
	}
	set := 0
	for _, p := range []bool{op.Packages != nil, op.File != nil, op.Group != nil, op.Kernel != nil, op.Service != nil, op.Device != nil} {
		if p {
			set++
		}
	}
	if !own || set != 1 {
		return fmt.Errorf("operation of kind %q must set exactly its own field", op.Kind)
	}
	return planner.CheckOperation(op)
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
	switch inv.Kind {
	case planner.OpFile:
		ok = inv.File != nil
		if ok {
			if err := planner.CheckManagedFile(inv.File.Path); err != nil {
				return fmt.Errorf("inverse of a file operation: %w", err)
			}
			if err := planner.CheckFollowUp(inv.File.After); err != nil {
				return fmt.Errorf("inverse of a file operation on %s: %w", inv.File.Path, err)
			}
			for _, d := range inv.File.CreatedDirs {
				if d != path.Clean(d) || !strings.HasPrefix(inv.File.Path, d+"/") {
					return fmt.Errorf("inverse of a file operation on %s: %q is not a directory above it", inv.File.Path, d)
				}
			}
		}
	case planner.OpGroup:
		ok = inv.Group != nil
		if ok {
			names = append([]string{inv.Group.Group}, inv.Group.Members...)
		}
	case planner.OpPackages:
		ok = inv.Packages != nil
		if ok {
			for _, p := range inv.Packages.Packages {
				names = append(names, p.Name, p.Version)
			}
		}
	case planner.OpKernel:
		ok = inv.Kernel != nil
		if ok {
			names = []string{inv.Kernel.Module}
		}
	case planner.OpService:
		ok = inv.Service != nil
		if ok {
			names = []string{inv.Service.Unit}
		}
	case planner.OpDevice:
		ok = inv.Device != nil
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

// run runs argv inside the root with its output appended to the log,
// after a line saying what ran.
func (x *HostExecutor) run(ctx context.Context, ws *Workspace, env []string, argv ...string) error {
	fmt.Fprintf(ws.Log, "$ %s\n", strings.Join(argv, " "))
	err := x.Host.Run(ctx, host.Command{Argv: argv, Env: env, Stdout: ws.Log, Stderr: ws.Log})
	if err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: %v\n", err)
	}
	return err
}

// output runs argv inside the root and returns its standard output; its
// standard error goes to the log.
func (x *HostExecutor) output(ctx context.Context, ws *Workspace, env []string, argv ...string) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(ws.Log, "$ %s\n", strings.Join(argv, " "))
	err := x.Host.Run(ctx, host.Command{Argv: argv, Env: env, Stdout: &out, Stderr: ws.Log})
	if err != nil {
		fmt.Fprintf(ws.Log, "%sgpuenv: %v\n", out.String(), err)
	}
	return out.Bytes(), err
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
