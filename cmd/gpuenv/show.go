package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/internal/regular"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

func newShowCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show PLANFILE",
		Short: "Print a plan saved by gpuenv plan --out",
		Long: `Show prints the plan saved in PLANFILE by "gpuenv plan --out" as plan printed
it: every change in order, the values completed from gpuenv's tables, the
warnings, and the closing summary. Before the plan it says what the plan was
made from (the spec, --root, --state-dir and the planning flags it keeps),
and after it the command that applies exactly this plan.

Show reads the file only: it observes nothing and plans nothing, so it does
not say whether the plan still fits the host. "gpuenv apply PLANFILE" checks
that before it changes anything.

With --json it prints the plan document of "gpuenv plan --json", with the
saved plan's "planned_from" and the apply command as an argument list.

Exit status: 0 shown, 1 the file is not a saved plan or cannot be read.`,
		Example: `  gpuenv plan --out tonight.plan examples/pytorch-workstation
  gpuenv show tonight.plan
  gpuenv show --json tonight.plan | jq .summary`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShow(g, args[0])
		},
	}
	addJSONFlag(cmd, g)
	return cmd
}

func runShow(g *globalOptions, name string) error {
	sf, err := readSavedFile(name)
	if err != nil {
		return err
	}
	if sf == nil {
		if _, err := os.Stat(name); err != nil {
			return fmt.Errorf("cannot read the saved plan %s: %s", name, plainError(err))
		}
		return fmt.Errorf("%s is not a saved plan: a plan saved with gpuenv plan --out FILE is a JSON document with a %q marker; to see the plan of a spec, run gpuenv plan %s", name, "gpuenv_saved_plan", name)
	}
	sp := sf.plan
	if g.JSON {
		return writeJSON(g, showDocument{
			planDocument: planDocument{FormatVersion: plan.FormatVersion, Plan: &sp.Plan, Diagnostics: []spec.JSONDiagnostic{}},
			PlannedFrom:  sp.From,
			Apply:        applyArgv(name, sp.From),
		})
	}
	w := &stickyWriter{w: g.Stdout}
	fmt.Fprintf(w, "Saved plan %s\n", esc(name))
	if from := sp.From; from != nil {
		fmt.Fprintf(w, "  made from the spec %s for --root %s (state directory %s)\n", esc(from.Spec.Path), esc(from.Root), esc(from.StateDir))
		if flags := keptFlags(from); len(flags) > 0 {
			fmt.Fprintf(w, "  with %s\n", esc(strings.Join(flags, " ")))
		}
	}
	fmt.Fprintln(w)
	if err := (&humanPlan{w: w, color: g.Color()}).render(&sp.Plan); err != nil {
		return err
	}
	writeApplyHint(w, name, sp.From)
	return w.err
}

// showDocument is what show --json prints: the plan document, and what
// the saved plan keeps besides.
type showDocument struct {
	planDocument
	PlannedFrom *planner.PlannedFrom `json:"planned_from"`
	// Apply is the command line that applies the plan, as arguments.
	Apply []string `json:"apply_command"`
}

// writeApplyHint says how to apply the saved plan name exactly as it was
// made: with the --root and --state-dir it was planned for, and which
// planning flags it keeps, which apply takes from it (and refuses given
// again).
func writeApplyHint(w io.Writer, name string, from *planner.PlannedFrom) {
	fmt.Fprintf(w, "\nApply exactly this plan with:\n    %s\n", esc(strings.Join(shellWords(applyArgv(name, from)), " ")))
	if flags := keptFlags(from); len(flags) > 0 {
		fmt.Fprintf(w, "The plan keeps %s; apply plans again with them.\n", esc(strings.Join(flags, " ")))
	}
}

// applyArgv is the command that applies the saved plan name: --root and
// --state-dir are named when they are not the defaults, so that the line
// says where the plan applies (apply refuses another --root or
// --state-dir for it).
func applyArgv(name string, from *planner.PlannedFrom) []string {
	argv := []string{"gpuenv"}
	if from != nil {
		if from.Root != "/" {
			argv = append(argv, "--root", from.Root)
		}
		if from.StateDir != defaultStateDir {
			argv = append(argv, "--state-dir", from.StateDir)
		}
	}
	return append(argv, "apply", name)
}

// keptFlags are the planning flags a saved plan keeps, as they would be
// typed.
func keptFlags(from *planner.PlannedFrom) []string {
	if from == nil {
		return nil
	}
	var flags []string
	for _, k := range slices.Sorted(maps.Keys(from.Spec.Vars)) {
		flags = append(flags, "--var "+shellWord(k+"="+from.Spec.Vars[k]))
	}
	for _, f := range from.Spec.VarFiles {
		flags = append(flags, "--var-file "+shellWord(f.Name))
	}
	for _, k := range slices.Sorted(maps.Keys(from.Spec.Environment)) {
		flags = append(flags, spec.EnvPrefix+k+"="+shellWord(from.Spec.Environment[k]))
	}
	for _, p := range from.Pythons {
		flags = append(flags, "--python "+shellWord(p))
	}
	if from.InterruptGPUProcesses {
		flags = append(flags, "--interrupt-gpu-processes")
	}
	if from.RootBoots {
		flags = append(flags, "--root-boots")
	}
	for _, t := range from.Targets {
		flags = append(flags, "--target "+shellWord(t))
	}
	for _, r := range from.Replace {
		flags = append(flags, "--replace "+shellWord(r))
	}
	return flags
}

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./=:@%+,-]+$`)

// shellWord quotes s for a POSIX shell when it needs quoting, so that a
// hint can be pasted as it is printed.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellWords(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellWord(a)
	}
	return out
}

// readSavedFile reads target when it is a saved plan; nil when it is not
// one (a spec). A file that is meant as a plan but cannot be one is an
// error that says so: a plan document without the marker, a JSON
// document cut short or damaged, an empty file that is no spec either.
func readSavedFile(target string) (*savedFile, error) {
	fi, err := os.Stat(target)
	if err != nil || fi.IsDir() {
		// A spec directory, or a spec that cannot be read, which
		// loading the spec reports.
		return nil, nil
	}
	// A saved plan is read bounded, and a FIFO or a device is refused
	// at once rather than blocking apply or filling its memory.
	data, err := regular.ReadFile(target, planner.MaxSavedPlan, "saved plan or spec file")
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	isSpecName := strings.HasSuffix(target, spec.FileExt)
	switch {
	case len(trimmed) == 0 && !isSpecName:
		return nil, fmt.Errorf("%s is empty: it is neither a saved plan nor a spec. Save a plan with gpuenv plan --out FILE; a spec is a %s file or a directory of them", target, spec.FileExt)
	case len(trimmed) > 0 && trimmed[0] == '{' && !isSpecName && !json.Valid(trimmed):
		return nil, damagedPlanFile(target, data)
	case planner.IsPlanDocument(data):
		// Read as a spec, it would only get HCL's syntax errors.
		return nil, fmt.Errorf("%s is a plan document, not a saved plan: it lacks the %q marker of a plan saved with the fingerprint of the facts it was made from, so apply cannot tell whether it still fits the host. Save a plan to apply with `gpuenv plan --out FILE`, or apply the spec itself", target, "gpuenv_saved_plan")
	case !planner.IsSavedPlan(data):
		return nil, nil
	}
	sp, err := planner.ReadSavedPlan(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	return &savedFile{name: target, data: data, plan: sp}, nil
}

// damagedPlanFile says what is wrong with a file that starts as a JSON
// document, which no spec does, but is not one: cut short, as a copy or a
// full disk leaves it, or damaged at a byte it names.
func damagedPlanFile(name string, data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok && se.Offset < int64(len(data)) {
		line := 1 + bytes.Count(data[:se.Offset], []byte("\n"))
		return fmt.Errorf("%s is not a readable saved plan: its JSON is damaged on line %d (byte %d). Make the plan again with gpuenv plan --out FILE", name, line, se.Offset)
	}
	return fmt.Errorf("%s is not a whole saved plan: its JSON stops after %d bytes, before the document ends, as a file cut short does. Make the plan again with gpuenv plan --out FILE", name, len(data))
}

// plainError is err without the Go operation and path of an
// *os.PathError, which the message around it names already.
func plainError(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
