package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// planDocument is what plan --json prints: the plan itself, with the
// spec's and planner's diagnostics (warnings, or the errors that stopped
// it, with Plan nil and Errored true). FormatVersion is the plan's, and is
// there also when there is no plan.
type planDocument struct {
	FormatVersion string `json:"format_version"`
	Errored       bool   `json:"errored"`
	*plan.Plan
	Diagnostics []spec.JSONDiagnostic `json:"diagnostics"`
}

// ANSI styles for the human plan on a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[31m"
)

// humanPlan renders a plan for a person. It computes nothing: everything
// it prints is in the Plan value that --json prints.
type humanPlan struct {
	w     io.Writer
	color bool
}

func (h *humanPlan) style(s, code string) string {
	if !h.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (h *humanPlan) actionStyle(a plan.Action) string {
	switch a {
	case plan.Create:
		return ansiGreen
	case plan.Update, plan.Replace:
		return ansiYellow
	case plan.Delete:
		return ansiRed
	}
	return ""
}

var actionPhrases = map[plan.Action]string{
	plan.Create:  "will be created",
	plan.Update:  "will be updated in place",
	plan.Replace: "will be replaced",
	plan.Delete:  "will be removed",
}

// stickyWriter keeps the first write error and writes nothing after it:
// the view's many small writes are checked once, at the end, and a closed
// pipe is reported rather than ignored.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// render writes the whole plan: steps, inferred values, warnings and the
// closing line, and returns the first write error.
func (h *humanPlan) render(p *plan.Plan) error {
	sw := &stickyWriter{w: h.w}
	h.w = sw
	defer func() { h.w = sw.w }()
	if len(p.Steps) > 0 {
		fmt.Fprintln(h.w, "gpuenv will make these changes, in this order:")
		txs := map[int]*plan.Transaction{}
		for i := range p.Transactions {
			txs[p.Transactions[i].ID] = &p.Transactions[i]
		}
		for i := range p.Steps {
			fmt.Fprintln(h.w)
			h.step(&p.Steps[i], txs)
		}
		fmt.Fprintln(h.w)
	}
	if len(p.Inferred) > 0 {
		h.inferred(p.Inferred)
	}
	for _, w := range p.Warnings {
		h.warning(w)
	}
	h.closing(p)
	return sw.err
}

// inferred lists the values the spec leaves out, each with where it came
// from, and then, once, the table rows among those whose facts no source
// confirms yet.
func (h *humanPlan) inferred(ins []plan.Inference) {
	completed := "gpuenv's tables"
	if slices.ContainsFunc(ins, func(in plan.Inference) bool { return !tableRow.MatchString(in.From) }) {
		completed = "gpuenv's tables and the host's packages"
	}
	fmt.Fprintf(h.w, "Values the spec leaves out, completed from %s:\n", completed)
	var unverified []string
	for _, in := range ins {
		fmt.Fprintf(h.w, "  %s %s = %s\n      from %s\n", esc(in.Address), esc(in.Attr), esc(in.Value), esc(in.From))
		if in.Unverified != "" && !slices.Contains(unverified, in.Unverified) {
			unverified = append(unverified, in.Unverified)
		}
	}
	if len(unverified) > 0 {
		fmt.Fprintln(h.w)
		wrap(h.w, "  ", "Not yet confirmed in the sources these rows cite: "+strings.Join(unverified, "; ")+".")
	}
	fmt.Fprintln(h.w)
}

// tableRow matches the From of a value that a table row gave
// ("cuda_releases row 12.4.1 (…)"), as opposed to one read from the host.
var tableRow = lazyregexp.New(`^[a-z_]+ row `)

func (h *humanPlan) step(s *plan.Step, txs map[int]*plan.Transaction) {
	code := h.actionStyle(s.Action)
	addr := esc(s.Address)
	head := fmt.Sprintf("  # %s %s", addr, actionPhrases[s.Action])
	if f := flagWords(s.Flags); len(f) > 0 {
		head += " (" + strings.Join(f, ", ") + ")"
	}
	fmt.Fprintln(h.w, h.style(head, ansiBold))
	fmt.Fprintf(h.w, "%s %s\n", h.style(fmt.Sprintf("%3s", s.Action.Symbol()), code), h.style(addr, ansiBold))
	if s.Reason != "" {
		wrap(h.w, "      ", s.Reason)
	}
	h.values(s)
	for _, op := range s.Operations {
		fmt.Fprintf(h.w, "      %s %s\n", h.style("→", ansiBold), esc(operationText(op, s.Address, txs)))
	}
	if len(s.DependsOn) > 0 {
		fmt.Fprintf(h.w, "      after %s\n", esc(strings.Join(s.DependsOn, ", ")))
	}
}

// values prints the step's attributes: each with its old and new value,
// in name order. A created resource shows only what it will be and a
// removed one only what it was, whatever else the step carries.
func (h *humanPlan) values(s *plan.Step) {
	before, after := s.Before, s.After
	switch s.Action {
	case plan.Create:
		before = nil
	case plan.Delete:
		after = nil
	}
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	width := 0
	for _, k := range keys {
		width = max(width, len(esc(k)))
	}
	for _, k := range keys {
		old, hadOld := before[k]
		nu, hasNew := after[k]
		var sym, val, code string
		switch {
		case hadOld && hasNew && old == nu:
			sym, val = " ", valueText(nu)
		case hadOld && hasNew:
			sym, val, code = "~", valueText(old)+" → "+valueText(nu), ansiYellow
		case hasNew:
			sym, val, code = "+", valueText(nu), ansiGreen
		default:
			sym, val, code = "-", valueText(old), ansiRed
		}
		fmt.Fprintf(h.w, "      %s %-*s %s\n", h.style(sym, code), width, esc(k), val)
	}
}

func valueText(v string) string {
	if v == "" {
		return `""`
	}
	return esc(v)
}

func flagWords(f plan.Flags) []string {
	var out []string
	if f.NeedsReboot {
		out = append(out, "needs reboot")
	}
	if f.NeedsModuleReload {
		out = append(out, "needs module reload")
	}
	if f.InterruptsGPUProcesses {
		out = append(out, "interrupts GPU processes")
	}
	if f.BuildsKernelModule {
		out = append(out, "builds the kernel module")
	}
	return out
}

// operationText says what one operation does, in a line.
func operationText(op plan.Operation, addr string, txs map[int]*plan.Transaction) string {
	switch {
	case op.Packages != nil:
		return packagesText(op.Packages) + transactionNote(op.Transaction, addr, txs)
	case op.File != nil:
		f := op.File
		var s string
		switch {
		case f.Remove:
			s = "remove " + f.Path
		case f.Symlink != "":
			s = fmt.Sprintf("link %s to %s", f.Path, f.Symlink)
		case f.Key != nil:
			s = fmt.Sprintf("fetch the key %s, check that its fingerprint is %s, then write it to %s (mode %04o)", f.Key.URL, f.Key.Fingerprint, f.Path, f.Mode)
		default:
			owner := ""
			if f.UID != 0 || f.GID != 0 {
				// Root's is what gpuenv writes unless it keeps a
				// merged file's owner; only another is worth a word.
				owner = fmt.Sprintf(", owner %d:%d", f.UID, f.GID)
			}
			size := fmt.Sprintf("%d bytes", len(f.Content))
			if f.Generate != "" {
				size = "content made at apply from the host's files"
			}
			s = fmt.Sprintf("write %s (mode %04o%s, %s)", f.Path, f.Mode, owner, size)
		}
		if len(f.After) > 0 {
			s += ", then run " + strings.Join(f.After, " ")
		}
		return s
	case op.Group != nil:
		g := op.Group
		var parts []string
		if g.Create {
			parts = append(parts, "create it")
		}
		if len(g.Add) > 0 {
			parts = append(parts, "add "+strings.Join(g.Add, ", "))
		}
		if len(g.Remove) > 0 {
			parts = append(parts, "remove "+strings.Join(g.Remove, ", "))
		}
		if g.Delete {
			parts = append(parts, "delete it")
		}
		return "group " + g.Group + ": " + strings.Join(parts, "; ")
	case op.Kernel != nil:
		switch plan.KernelAction(op.Kernel.Action) {
		case plan.KernelRebuildInitramfs:
			return "rebuild the initramfs"
		case plan.KernelLoadModule:
			return "load module " + op.Kernel.Module
		case plan.KernelUnloadModule:
			return "unload module " + op.Kernel.Module
		case plan.KernelCheckVersion:
			return "check that the kernel and NVML report driver " + op.Kernel.Version
		case plan.KernelStopProcess:
			return fmt.Sprintf("stop GPU process %s (pid %d)", op.Kernel.Process, op.Kernel.PID)
		}
		return strings.TrimSpace(string(op.Kernel.Action) + " " + op.Kernel.Module)
	case op.Service != nil && op.Service.Run != "":
		return op.Service.Run + " " + op.Service.Unit
	case op.Service != nil:
		sv := op.Service
		verb, now := "disable ", " and stop it now"
		if sv.Enable {
			verb, now = "enable ", " and start it now"
		}
		if !sv.Now {
			now = ""
		}
		return verb + sv.Unit + now
	case op.Device != nil && op.Device.Instance != nil:
		d := op.Device
		verb := "create"
		if d.Value == plan.GPUInstanceAbsent {
			verb = "destroy"
		}
		return fmt.Sprintf("%s MIG instance %s at memory slice %d on GPU %d (%s)", verb, d.Instance.Profile, d.Instance.Start, d.Index, d.UUID)
	case op.Device != nil:
		d := op.Device
		return fmt.Sprintf("set %s = %s on GPU %d (%s)", d.Setting, d.Value, d.Index, d.UUID)
	case op.Refresh != nil:
		return fmt.Sprintf("fetch %s's package indexes (%s)", op.Refresh.Manager, strings.Join(plan.RefreshCommand(op.Refresh.Manager), " "))
	}
	return string(op.Kind)
}

func packagesText(p *plan.PackagesOp) string {
	var parts []string
	if len(p.Install) > 0 {
		pins := make([]string, len(p.Install))
		for i, pin := range p.Install {
			name := pin.Name
			if len(pin.Extras) > 0 {
				name += "[" + strings.Join(pin.Extras, ",") + "]"
			}
			sep := "="
			if plan.Manager(p.Manager) == plan.ManagerPip {
				sep = "=="
			}
			v := pin.Version
			if pin.KnownAfterApply() {
				v = plan.KnownAfterApply
			}
			pins[i] = name + sep + v
		}
		verb := "install "
		if p.Reinstall {
			verb = "reinstall "
		}
		parts = append(parts, verb+strings.Join(pins, " "))
	}
	if len(p.Remove) > 0 {
		verb := "remove "
		if p.Purge {
			verb = "purge "
		}
		parts = append(parts, verb+strings.Join(p.Remove, " "))
	}
	if len(p.Hold) > 0 {
		parts = append(parts, "hold "+strings.Join(p.Hold, " "))
	}
	if len(p.Unhold) > 0 {
		parts = append(parts, "unhold "+strings.Join(p.Unhold, " "))
	}
	s := string(p.Manager) + ": " + strings.Join(parts, "; ")
	if p.AllowDowngrade {
		s += " (a downgrade)"
	}
	if plan.Manager(p.Manager) == plan.ManagerPip {
		switch {
		case p.Venv != "":
			s += " in a new venv " + p.Venv
		case p.Python != "":
			s += " with " + p.Python
		}
		if p.IndexURL != "" {
			s += " from " + p.IndexURL
		}
	}
	return s
}

// transactionNote says which other steps share an operation's transaction.
func transactionNote(id int, addr string, txs map[int]*plan.Transaction) string {
	t := txs[id]
	if t == nil || len(t.Steps) < 2 {
		return ""
	}
	var others []string
	for _, a := range t.Steps {
		if a != addr {
			others = append(others, a)
		}
	}
	return fmt.Sprintf(" [transaction %d, with %s]", id, strings.Join(others, ", "))
}

func (h *humanPlan) warning(w finding.Finding) {
	fmt.Fprintf(h.w, "%s %s\n\n", h.style("Warning:", ansiBold+ansiYellow), h.style(esc(w.Summary), ansiBold))
	if w.Detail != "" {
		wrap(h.w, "  ", w.Detail)
		fmt.Fprintln(h.w)
	}
	if len(w.Evidence) > 0 {
		fmt.Fprintln(h.w, "  Evidence:")
		for _, e := range w.Evidence {
			fmt.Fprintf(h.w, "    - %s\n", esc(e))
		}
		fmt.Fprintln(h.w)
	}
	if f := w.Fix; f != nil {
		// Unwrapped, like the evidence: a fix names paths and commands.
		fmt.Fprintf(h.w, "  Fix: %s\n", esc(f.Text))
		for _, line := range strings.Split(f.Spec, "\n") {
			if line != "" {
				fmt.Fprintf(h.w, "      %s\n", esc(line))
			}
		}
		for _, c := range f.Commands {
			fmt.Fprintf(h.w, "    $ %s\n", esc(c))
		}
		fmt.Fprintln(h.w)
	}
}

func (h *humanPlan) closing(p *plan.Plan) {
	if p.Empty() {
		fmt.Fprintln(h.w, h.style("No changes.", ansiBold+ansiGreen)+" This host matches the spec.")
		return
	}
	line := fmt.Sprintf("Plan: %d to add, %d to change, %d to remove.", p.Summary.Add, p.Summary.Change, p.Summary.Remove)
	reload := false
	for _, s := range p.Steps {
		reload = reload || s.Flags.NeedsModuleReload
	}
	switch {
	case p.NeedsReboot:
		line += " A reboot is required."
	case reload:
		line += " The nvidia kernel modules will be reloaded."
	}
	fmt.Fprintln(h.w, h.style(line, ansiBold))
}

// wrap writes text as lines of at most diagnosticsWidth columns, each
// starting with indent; the text's own line breaks are kept, and control
// characters in it (a value from the host or a document) are escaped.
func wrap(w io.Writer, indent, text string) {
	for _, para := range strings.Split(escLines(text), "\n") {
		line := indent
		for _, word := range strings.Fields(para) {
			if len(line) > len(indent) && len(line)+1+len(word) > diagnosticsWidth {
				fmt.Fprintln(w, line)
				line = indent
			}
			if len(line) > len(indent) {
				line += " "
			}
			line += word
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// writePlan prints the plan in the format the flags chose, with diags:
// warnings before a human plan on stderr, or in the JSON document.
func writePlan(g *globalOptions, files map[string]*hcl.File, p *plan.Plan, diags hcl.Diagnostics) error {
	return newPlanView(g).Plan(files, p, diags)
}
