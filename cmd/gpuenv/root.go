package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// Exit codes, the same for every command (docs/README.md, "Exit codes").
const (
	exitOK        = 0 // success; nothing to do; healthy
	exitError     = 1 // invalid input, refused, could not run; an apply that failed and was fully reverted
	exitChanges   = 2 // something to do: changes planned, problems found, files to format
	exitAttention = 3 // an apply or rollback failed and its revert is incomplete
)

// defaultStateDir is where generations live, inside the root.
const defaultStateDir = "/var/lib/gpuenv"

// globalOptions are the flags every command shares, and the streams and
// environment it runs with (tests give their own).
type globalOptions struct {
	Root     string
	StateDir string // inside the root
	NoColor  bool
	JSON     bool
	// Debug is --debug: the debug log on stderr (also GPUENV_LOG=debug).
	Debug bool
	// started is when the command started, for the debug log's times.
	started time.Time

	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Env    []string
}

// Color reports whether human output may use colour: on a terminal, unless
// --no-color or NO_COLOR (https://no-color.org) says otherwise.
func (g *globalOptions) Color() bool {
	if g.NoColor || g.Getenv("NO_COLOR") != "" || g.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(g.Stdout)
}

// Getenv reads the environment the command was started with.
func (g *globalOptions) Getenv(name string) string {
	for i := len(g.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(g.Env[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// debugging reports whether the debug log is on: --debug, or
// GPUENV_LOG=debug as Terraform's TF_LOG is set.
func (g *globalOptions) debugging() bool {
	return g.Debug || strings.EqualFold(g.Getenv("GPUENV_LOG"), "debug")
}

// debugf writes a line of the debug log to stderr, with the time since
// the command started; nothing when the log is off.
func (g *globalOptions) debugf(format string, args ...any) {
	if !g.debugging() {
		return
	}
	fmt.Fprintf(g.Stderr, "[debug %7.3fs] %s\n", time.Since(g.started).Seconds(), esc(fmt.Sprintf(format, args...)))
}

// tookText is a duration for the debug log: to the millisecond, or to
// the microsecond under one.
func tookText(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

type debugKey struct{}

// debugFrom is the debug log of the command ctx belongs to: a function
// that writes nothing when the log is off.
func debugFrom(ctx context.Context) func(format string, args ...any) {
	if g, ok := ctx.Value(debugKey{}).(*globalOptions); ok {
		return g.debugf
	}
	return func(string, ...any) {}
}

// logCommand is the debug log's line for a command the host ran.
func (g *globalOptions) logCommand(argv []string, took time.Duration, err error) {
	outcome := "exit 0"
	if err != nil {
		outcome = err.Error()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			outcome = fmt.Sprintf("exit %d", ee.ExitCode())
		}
	}
	g.debugf("ran %s (%s, %s)", strings.Join(shellWords(argv), " "), outcome, tookText(took))
}

// stateDir is the state directory inside the root.
func (g *globalOptions) stateDir() string {
	if g.StateDir == "" {
		return defaultStateDir
	}
	return g.StateDir
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// terminalWidth is the width in columns of the terminal w writes to; 0
// when w is not one or does not say.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// commands are the constructors of every subcommand.
var commands = []func(g *globalOptions) *cobra.Command{
	newApplyCmd, newCUDACheckCmd, newDoctorCmd, newFmtCmd, newHistoryCmd, newInitCmd, newObserveCmd, newPlanCmd,
	newRollbackCmd, newShowCmd, newUnlockCmd, newValidateCmd, newVerifyCmd, newVersionCmd, newManCmd,
	newSlurmHealthCmd, newMIGRestoreCmd,
}

// exitCodeError ends a command with a given exit code after the command has
// already written what the user needs to see.
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newRootCmd builds the command tree for one invocation.
func newRootCmd(g *globalOptions) *cobra.Command {
	// The build is read once: the Go toolchain's record of it is parsed
	// at every call.
	build := buildVersion()
	root := &cobra.Command{
		Use:   "gpuenv",
		Short: "Declarative NVIDIA GPU environments: observe, plan, apply, roll back",
		Long: `gpuenv makes a Linux host's NVIDIA GPU stack — driver, kernel modules, CUDA
toolkit, cuDNN, PyTorch/TensorFlow/JAX, GPU groups and CUDA_VISIBLE_DEVICES —
match a spec written in HCL, and explains every change it would make.

Exit codes: 0 success or nothing to do; 1 error or refused; 2 something to do
(changes planned, problems found, files to format); 3 the host needs
attention (a failed apply or rollback whose revert is incomplete).`,
		Version:           build.Version,
		SilenceUsage:      true,
		SilenceErrors:     true,
		DisableAutoGenTag: true,
	}
	root.SetIn(g.Stdin)
	root.SetOut(g.Stdout)
	root.SetErr(g.Stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.Root, "root", "/", "the host's root directory; every host path is read and written under it")
	pf.StringVar(&g.StateDir, "state-dir", defaultStateDir, "where generations are kept, as a path inside --root")
	pf.BoolVar(&g.NoColor, "no-color", false, "never colour the output (also when NO_COLOR is set)")
	pf.BoolVar(&g.Debug, "debug", false, "write a debug log to stderr: each step of the command and every command run on the host, with timings (also GPUENV_LOG=debug)")
	// --version prints what "gpuenv version" prints; the template is
	// the text itself, as it has no field cobra would fill.
	var version strings.Builder
	(&versionHuman{w: &version}).Version(build)
	root.SetVersionTemplate(strings.ReplaceAll(version.String(), "{{", "{{`{{`}}"))
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if g.debugging() {
			g.debugf("gpuenv %s: %s %s (--root %s, --state-dir %s)", build.Version, cmd.CommandPath(), strings.Join(shellWords(args), " "), g.Root, g.stateDir())
		}
		if g.debugging() {
			cmd.SetContext(context.WithValue(cmd.Context(), debugKey{}, g))
		}
		if !path.IsAbs(g.StateDir) {
			return fmt.Errorf("--state-dir %q must be an absolute path inside the root", g.StateDir)
		}
		fi, err := os.Stat(g.Root)
		if err != nil {
			return fmt.Errorf("--root %s: %s", esc(g.Root), plainError(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("--root %s is not a directory", g.Root)
		}
		return nil
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nRun '%s --help' for usage", plainFlagError(err), cmd.CommandPath())
	})
	for _, newCmd := range commands {
		root.AddCommand(newCmd(g))
	}
	return root
}

// interruptible returns ctx cancelled by SIGINT or SIGTERM, for the
// commands that change the host: cancelled, they stop at the next safe
// point and revert instead of dying half done. Commands that only read
// leave the signals' default, ending at once, and so do without the
// goroutine and thread that watching for signals costs at start-up.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// repeatable adds to fs a flag that may be given many times, each time
// adding one value to *p. pflag's StringArrayVar does the same, but renders
// its default through a CSV writer with a 4 KiB buffer for every such flag
// of every command at every start, which a command that runs for a few
// milliseconds notices.
func repeatable(fs *pflag.FlagSet, p *[]string, name, usage string) {
	fs.Var((*stringList)(p), name, usage)
}

// stringList is the pflag.Value behind repeatable.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// Type names the flag's kind as pflag's own repeatable string flag does.
func (l *stringList) Type() string { return "stringArray" }

// addJSONFlag gives a command whose output is data the --json flag.
func addJSONFlag(cmd *cobra.Command, g *globalOptions) {
	cmd.Flags().BoolVar(&g.JSON, "json", false, "print the result as JSON")
}

// run executes one gpuenv invocation and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	g := &globalOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr, Env: env, started: time.Now()}
	root := newRootCmd(g)
	root.SetArgs(singleDashLongFlags(root, args))
	code := exitCode(g, root.ExecuteContext(ctx))
	g.debugf("exit status %d", code)
	return code
}

// exitCode is the exit status of a command that returned err, which it
// reports when the command has not said it already: on stderr, or with
// --json as an error document on stdout, so that a program reading the
// output always gets JSON.
func exitCode(g *globalOptions, err error) int {
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	if g.JSON {
		if werr := writeJSON(g, newErrorDocument(err, exitError)); werr == nil {
			return exitError
		}
	}
	fmt.Fprintf(g.Stderr, "Error: %v\n", err)
	return exitError
}

// plainFlagError says what is wrong with a flag's value in the flag's
// terms: pflag passes on the error of the Go function that parsed it
// ("strconv.ParseInt: parsing "x": invalid syntax").
func plainFlagError(err error) error {
	ive, ok := errors.AsType[*pflag.InvalidValueError](err)
	if !ok {
		return err
	}
	f := ive.GetFlag()
	var want string
	switch f.Value.Type() {
	case "int", "int64", "int32", "uint", "uint64":
		want = "a whole number"
	case "duration":
		want = "a duration such as 90s, 5m or 1h30m"
	case "bool":
		want = "true or false"
	default:
		return err
	}
	return fmt.Errorf("--%s %s: not %s", f.Name, esc(strconv.Quote(ive.GetValue())), want)
}
