package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuenv/gpuenv/providers/probe/cudacheck"
	"github.com/gpuenv/gpuenv/providers/probe/verify"
)

// verifyStart is what verify is about to do.
type verifyStart struct {
	Root      string // --root as the user wrote it
	User      *verify.User
	Workloads []verify.Workload
	CUDACheck bool
	Device    verify.Device
	Timeout   time.Duration
	Spec      bool // the environment of a spec is added
}

// verifyView shows verify's progress and result, for a person or as JSON;
// the flags choose one, once, in newVerifyView. Each method returns the
// first write error.
type verifyView interface {
	// NothingToVerify says that there is nothing to run: no framework
	// found, and no framework-free check possible. rep is the empty
	// report and pythons are the interpreters looked at besides the
	// system's.
	NothingToVerify(rep *verifyReport, pythons []string) error
	// Start comes before anything runs.
	Start(s verifyStart) error
	// Checked comes after the framework-free check.
	Checked(c *cudacheck.Report) error
	// Running says what starts: the framework-free check (w nil) or a
	// workload, on targets; Finished says that the run on targets[i]
	// ended. A live view shows them; the others ignore them.
	Running(w *verify.Workload, targets []*verify.Target)
	Finished(i int, r verify.Result)
	// Result comes after each workload, with its results on every GPU.
	Result(rs []verify.Result) error
	// Report comes last, with the whole report.
	Report(rep *verifyReport) error
}

// newVerifyView chooses verify's view from the flags: the report as one
// JSON document at the end with --json, else lines for a person as each
// part finishes, and the table at the end.
func newVerifyView(g *globalOptions) verifyView {
	if g.JSON {
		return &verifyJSON{g: g}
	}
	v := &verifyHuman{out: printer{w: g.Stdout}, errw: g.Stderr, color: g.Color()}
	if v.color {
		// The results' ✗ are in table cells whose widths are counted
		// without escapes: coloured as they are written, the columns
		// stay aligned.
		v.out.w = &crossColor{w: g.Stdout}
	}
	if g.Live() {
		v.live = newVerifyLive(g.Stdout, func() int { return terminalWidth(g.Stdout) })
	}
	return v
}

// verifyJSON prints the report, and nothing before it.
type verifyJSON struct {
	g *globalOptions
}

var _ verifyView = (*verifyJSON)(nil)

func (v *verifyJSON) Running(*verify.Workload, []*verify.Target) {}
func (v *verifyJSON) Finished(int, verify.Result)                {}

func (v *verifyJSON) NothingToVerify(rep *verifyReport, _ []string) error {
	return writeJSON(v.g, rep)
}

func (v *verifyJSON) Start(verifyStart) error         { return nil }
func (v *verifyJSON) Checked(*cudacheck.Report) error { return nil }
func (v *verifyJSON) Result([]verify.Result) error    { return nil }
func (v *verifyJSON) Report(rep *verifyReport) error  { return writeJSON(v.g, rep) }

// verifyHuman prints a line as each part finishes, then the table of every
// GPU and check, the failures, and doctor's explanation.
type verifyHuman struct {
	// out is stdout; it keeps the first write error.
	out printer
	// errw is stderr, for saying that there is nothing to verify.
	errw io.Writer
	// color marks ✗ in red; live, on a terminal, is the line that says
	// what runs while it runs.
	color bool
	live  *verifyLive
}

func (v *verifyHuman) Running(w *verify.Workload, targets []*verify.Target) {
	if v.live != nil {
		v.live.running(w, targets)
	}
}

func (v *verifyHuman) Finished(i int, r verify.Result) {
	if v.live != nil {
		v.live.finished(i, r)
	}
}

var _ verifyView = (*verifyHuman)(nil)

func (v *verifyHuman) NothingToVerify(_ *verifyReport, pythons []string) error {
	p := &printer{w: v.errw}
	p.printf("Nothing to verify: no PyTorch, TensorFlow or JAX in the system's Python%s.\n", pythonsText(pythons))
	p.printf("Name a virtual environment's interpreter with --python.\n")
	return p.err
}

func (v *verifyHuman) Start(s verifyStart) error {
	var what []string
	if s.CUDACheck {
		what = append(what, "the CUDA driver")
	}
	if len(s.Workloads) > 0 {
		what = append(what, countWord(len(s.Workloads), "workload"))
	}
	line := "Verifying " + strings.Join(what, " and ") + " in " + s.Root
	if s.Device == verify.CPU {
		line += " on the CPU"
	}
	if u := s.User; u != nil {
		line += fmt.Sprintf(" as %s (uid %d, groups %s)", u.Name, u.UID, strings.Join(u.GroupNames, ", "))
	}
	if s.Spec {
		line += " with the spec's environment"
	}
	v.out.printf("%s (timeout %s each)\n", line, s.Timeout)
	return v.out.err
}

func (v *verifyHuman) Checked(c *cudacheck.Report) error {
	v.live.clear()
	ok := 0
	for _, d := range c.Devices {
		if d.OK() {
			ok++
		}
	}
	switch {
	case c.Failure != nil && len(c.Devices) == 0:
		v.out.printf("  ✗ CUDA driver (%s): %s\n", c.Library, c.Failure)
	case c.NotStarted != "":
		v.out.printf("  ✗ CUDA driver check did not start: %s\n", c.NotStarted)
	default:
		mark := "✓"
		if !c.OK() {
			mark = "✗"
		}
		v.out.printf("  %s CUDA driver %s (%s): vector_add on %d of %s\n", mark, c.DriverVersion, c.Library, ok, countWord(max(c.Count, len(c.Devices)), "GPU"))
	}
	return v.out.err
}

func (v *verifyHuman) Result(rs []verify.Result) error {
	v.live.clear()
	if len(rs) == 0 {
		return nil
	}
	ok := 0
	for _, r := range rs {
		if r.OK() {
			ok++
		}
	}
	mark := "✓"
	if ok < len(rs) {
		mark = "✗"
	}
	var what string
	switch {
	case rs[0].Config.Device == verify.CPU && ok == 1:
		what = "trained on the CPU"
	case rs[0].Config.Device == verify.CPU:
		what = "did not train on the CPU"
	case rs[0].Target != nil:
		what = fmt.Sprintf("trained on %d of %s", ok, countWord(len(rs), "GPU"))
	case ok == 1:
		what = "trained on the GPU it sees"
	default:
		what = "did not train on a GPU"
	}
	v.out.printf("  %s %s: %s\n", mark, workloadName(rs[0]), what)
	return v.out.err
}

func (v *verifyHuman) Report(rep *verifyReport) error {
	v.live.clear()
	if rep.Report == nil {
		return v.out.err
	}
	v.out.printf("\n")
	writeVerifyTable(&v.out, rep)
	writeVerifyFailures(&v.out, rep)
	writeLinks(&v.out, rep.Links)
	writePeers(&v.out, rep.Peers)
	if len(rep.CreatedDeviceNodes) > 0 {
		v.out.printf("\nThe workloads created device files that were not there: %s (the driver's libraries make them when they run as root).\n", strings.Join(rep.CreatedDeviceNodes, ", "))
	}
	if rep.Verified {
		return v.out.err
	}
	if len(rep.Explanation) == 0 {
		v.out.printf("\ngpuenv doctor finds nothing on the host that explains it; the output above is the framework's own.\n")
	} else {
		v.out.printf("\nWhy, according to gpuenv doctor:\n")
		for _, c := range rep.Explanation {
			writeCheck(&v.out, c, v.color)
		}
	}
	return v.out.err
}

func pythonsText(pythons []string) string {
	if len(pythons) == 0 {
		return ""
	}
	return " or in " + strings.Join(pythons, ", ")
}

// workloadName is "pytorch 2.5.1+cu124 in /opt/venv/bin/python", with the
// version the framework gave or else the one observed.
func workloadName(r verify.Result) string {
	v := r.Version
	if v == "" {
		v = r.Workload.Version
	}
	return strings.TrimSpace(r.Framework+" "+v) + " in " + r.Interpreter
}

// writeVerifyTable prints a row per GPU and check: the framework-free
// check's, then each workload's.
func writeVerifyTable(p *printer, rep *verifyReport) {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	row := func(cells ...string) {
		if p.err == nil {
			_, p.err = fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	row("GPU", "DEVICE", "CHECK", "CUDA", "CUDNN", "AMP", "STEPS", "LOSS", "STEP", "PEAK", "FREE", "RESULT")
	if c := rep.CUDACheck; c != nil {
		check := "cuda driver " + c.DriverVersion
		if len(c.Devices) == 0 {
			row("-", "-", strings.TrimSpace(check), orDash(c.DriverVersion), "-", "-", "-", "-", "-", "-", "-", "✗ "+cmp.Or(cudaFailure(c.Failure, c.NotStarted), "no GPU"))
		}
		for _, d := range c.Devices {
			result := "✓ vector_add"
			if !d.OK() {
				result = "✗ " + cudaFailure(d.Failure, "")
			}
			step := "-"
			if d.KernelSeconds > 0 {
				step = seconds(d.KernelSeconds)
			}
			row(strconv.Itoa(d.Ordinal), deviceText(d.Name, d.Capability), check, orDash(c.DriverVersion), "-", "-", "-", "-", step, "-", bytesOrDash(d.FreeMemory), result)
		}
	}
	for _, r := range rep.Results {
		gpu, device, capability := "-", r.Device, r.Capability
		if t := r.Target; t != nil {
			gpu = strconv.Itoa(t.Index)
			if device == "" {
				device, capability = t.Name, t.Capability
			}
		}
		if r.Config.Device == verify.CPU {
			gpu = "cpu"
		}
		// Before the model, the workload has not said what it uses.
		cudnn, amp := "-", "-"
		if len(r.Losses) > 0 || r.Phase != "" && r.Phase != "import" && r.Phase != "device" {
			cudnn, amp = "off", "off"
			if r.CuDNN {
				cudnn = cmp.Or(r.CuDNNVersion, "on")
			}
			if r.AMP != "" {
				amp = r.AMP
			}
		}
		steps, loss, step := "-", "-", "-"
		if len(r.Losses) > 0 {
			steps = strconv.Itoa(cmp.Or(r.Steps, len(r.Losses)))
			loss = fmt.Sprintf("%.3f → %.3f", r.Losses[0], r.Losses[len(r.Losses)-1])
		}
		if r.StepSeconds > 0 {
			step = seconds(r.StepSeconds)
		}
		row(gpu, deviceText(device, capability), checkName(r), orDash(r.BuildCUDA), cudnn, amp, steps, loss, step, bytesOrDash(r.MemoryPeak), bytesOrDash(r.MemoryFree), resultText(r))
	}
	if p.err == nil {
		p.err = tw.Flush()
	}
}

// checkName is a workload's name in the table: framework and version.
func checkName(r verify.Result) string {
	v := r.Version
	if v == "" {
		v = r.Workload.Version
	}
	return strings.TrimSpace(r.Framework + " " + v)
}

func deviceText(name, capability string) string {
	switch {
	case name == "":
		return "-"
	case capability != "":
		return name + " (" + capability + ")"
	}
	return name
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func bytesOrDash(n uint64) string {
	if n == 0 {
		return "-"
	}
	return verify.Bytes(n)
}

func seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.1f ms", 1000*s)
	}
	return fmt.Sprintf("%.2f s", s)
}

// cudaFailure is a failed framework-free check in a table cell: the step
// and the error's name, or how the child ended.
func cudaFailure(f *cudacheck.Failure, notStarted string) string {
	switch {
	case notStarted != "":
		return "did not start"
	case f == nil:
		return "did not finish"
	case f.Name != "":
		return string(f.Step) + ": " + f.Name
	case strings.Contains(f.Message, "killed after"):
		return string(f.Step) + ": timed out"
	case strings.HasPrefix(f.Message, "the check's process"):
		return string(f.Step) + ": crashed"
	}
	return string(f.Step) + ": failed"
}

// resultText is a result's last column: what happened, and for a failure
// the layer it follows.
func resultText(r verify.Result) string {
	switch r.Outcome {
	case verify.OnGPU:
		return "✓ trained"
	case verify.OnCPU:
		return "✓ trained on the CPU"
	}
	s := "✗ " + outcomeText[r.Outcome]
	if r.Kind == verify.KindOutOfMemory {
		s = "✗ out of memory"
	}
	if r.Narrowing != nil {
		s += " (" + strings.TrimPrefix(layerText[r.Narrowing.Layer], "the ") + ")"
	}
	return s
}

var outcomeText = map[verify.Outcome]string{
	verify.NotOnGPU:   "not on a GPU",
	verify.Failed:     "failed",
	verify.Crashed:    "crashed",
	verify.TimedOut:   "timed out",
	verify.NotStarted: "did not start",
}

// outcomeLine is how a failure reads after the workload's name.
var outcomeLine = map[verify.Outcome]string{
	verify.NotOnGPU:   "ran, but not on a GPU",
	verify.Failed:     "failed",
	verify.Crashed:    "crashed",
	verify.TimedOut:   "timed out",
	verify.NotStarted: "did not start",
}

var layerText = map[verify.Layer]string{
	verify.LayerDriver:  "the driver",
	verify.LayerDevice:  "the device",
	verify.LayerRuntime: "the CUDA runtime",
	verify.LayerCuDNN:   "cuDNN",
	verify.LayerAMP:     "mixed precision",
}

// writeVerifyFailures explains each failure below the table: a failure
// that is the same on several GPUs is written once, with the GPUs.
func writeVerifyFailures(p *printer, rep *verifyReport) {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if c := rep.CUDACheck; c != nil && !c.OK() {
		switch {
		case c.NotStarted != "":
			add("  ✗ the CUDA driver check did not start: %s", c.NotStarted)
		case c.Failure != nil:
			add("  ✗ CUDA driver (%s): %s", c.Library, c.Failure)
		case len(c.Devices) == 0:
			add("  ✗ CUDA driver (%s): CUDA shows no GPU", c.Library)
		}
		for _, d := range c.Devices {
			if d.OK() {
				continue
			}
			add("  ✗ CUDA driver (%s) on GPU %d (%s): %s", c.Library, d.Ordinal, orDash(d.Name), cudaFailure(d.Failure, ""))
			if f := d.Failure; f != nil {
				if f.Name == "" || f.Message != "" {
					add("      %s", f.Message)
				}
				for _, l := range nonEmptyLines(f.Log) {
					add("      JIT: %s", l)
				}
			}
		}
		if c.Stderr != "" {
			for _, l := range nonEmptyLines(c.Stderr) {
				add("      stderr: %s", l)
			}
		}
		if len(rep.CUDACheckExplainedBy) > 0 {
			add("      explained below by: %s", strings.Join(rep.CUDACheckExplainedBy, ", "))
		}
	}
	type group struct {
		first verify.Result
		gpus  []string
		index int
	}
	var groups []*group
	for i, r := range rep.Results {
		if r.OK() {
			continue
		}
		gpu := ""
		if r.Target != nil {
			gpu = strconv.Itoa(r.Target.Index)
		}
		j := slices.IndexFunc(groups, func(g *group) bool { return sameFailure(g.first, r) })
		if j < 0 {
			groups = append(groups, &group{first: r, index: i})
			j = len(groups) - 1
		}
		if gpu != "" {
			groups[j].gpus = append(groups[j].gpus, gpu)
		}
	}
	for _, g := range groups {
		r := g.first
		add("  ✗ %s %s: %s", workloadName(r), outcomeLine[r.Outcome], r.Error)
		if len(g.gpus) > 0 {
			where := "on GPU " + g.gpus[0]
			if len(g.gpus) > 1 {
				where = "on GPUs " + strings.Join(g.gpus, ", ")
			}
			if r.Phase != "" {
				where += ", in the " + r.Phase + " phase"
			}
			add("      %s", where)
		}
		if r.BuildCUDA != "" {
			add("      built for CUDA %s", r.BuildCUDA)
		}
		for _, l := range nonEmptyLines(r.Stderr) {
			add("      stderr: %s", l)
		}
		if n := r.Narrowing; n != nil {
			add("      narrowed to %s: %s", layerText[n.Layer], n.Reason)
			for _, rr := range n.Reruns {
				what := "trained"
				if !(rr.Outcome == verify.OnGPU || rr.Outcome == verify.OnCPU) {
					what = outcomeText[rr.Outcome] + ": " + rr.Error
				}
				add("        with %s: %s", rr.Change, what)
			}
		}
		if om := r.OutOfMemory; om != nil {
			add("      out of memory: %s free of %s", verify.Bytes(om.FreeBytes), verify.Bytes(om.TotalBytes))
			for _, h := range om.Holders {
				add("        held by pid %d (%s): %s, %s", h.PID, orDash(h.User), orDash(h.Command), verify.Bytes(h.UsedBytes))
			}
			add("      try: %s", strings.Join(om.Advice, "; "))
		}
		if ids := rep.ExplainedBy[g.index]; len(ids) > 0 {
			add("      explained below by: %s", strings.Join(ids, ", "))
		}
	}
	if len(lines) == 0 {
		return
	}
	p.printf("\nFailures:\n")
	for _, l := range lines {
		p.printf("%s\n", l)
	}
}

// sameFailure reports whether two failed results of one workload read the
// same, so that they are written once.
func sameFailure(a, b verify.Result) bool {
	same := a.Interpreter == b.Interpreter && a.Framework == b.Framework && a.Outcome == b.Outcome &&
		a.Error == b.Error && a.Stderr == b.Stderr && a.Phase == b.Phase &&
		(a.Narrowing == nil) == (b.Narrowing == nil) && (a.OutOfMemory == nil) == (b.OutOfMemory == nil)
	if same && a.Narrowing != nil {
		same = a.Narrowing.Layer == b.Narrowing.Layer && a.Narrowing.Reason == b.Narrowing.Reason && slices.Equal(a.Narrowing.Reruns, b.Narrowing.Reruns)
	}
	if same && a.OutOfMemory != nil {
		x, y := a.OutOfMemory, b.OutOfMemory
		same = x.FreeBytes == y.FreeBytes && x.TotalBytes == y.TotalBytes && slices.Equal(x.Holders, y.Holders) && slices.Equal(x.Advice, y.Advice)
	}
	return same
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// writeLinks shows each GPU's copy bandwidth against its link, and a
// finding for each direction below half of what the link allows.
func writeLinks(out *printer, links []linkReport) {
	if len(links) == 0 {
		return
	}
	out.printf("\nCopy bandwidth against each GPU's PCIe link:\n")
	for _, l := range links {
		var dirs []string
		for _, v := range l.Verdicts {
			dirs = append(dirs, fmt.Sprintf("%s %.1f GB/s", strings.ReplaceAll(v.Direction, "_", " "), v.Measured))
		}
		out.printf("  GPU %d (%s): %s of %.1f GB/s each way\n", l.Ordinal, escape(l.PCIAddress, false), strings.Join(dirs, ", "), l.Verdicts[0].Expected)
		for _, v := range l.Verdicts {
			if v.Slow {
				out.printf("    ! %s is below half of what the link allows: %s\n", strings.ReplaceAll(v.Direction, "_", " "), v.Why)
			}
		}
	}
}

// writePeers shows the copies between pairs of GPUs against what their
// links allow, a finding for each pair below half of it, and the pairs
// that cannot reach each other's memory.
func writePeers(out *printer, peers []cudacheck.PeerVerdict) {
	if len(peers) == 0 {
		return
	}
	out.printf("\nPeer-to-peer copies between GPUs:\n")
	var none []string
	for _, p := range peers {
		pair := fmt.Sprintf("GPU %d → GPU %d", p.From, p.To)
		switch {
		case !p.OK():
			out.printf("  ! %s: the copy failed: %s\n", pair, p.Error)
		case !p.Access:
			none = append(none, pair)
		case p.Slow:
			out.printf("  %s: %.1f GB/s\n    ! below half of what the link allows: %s\n", pair, p.GBs, p.Why)
		case p.Expected > 0:
			out.printf("  %s: %.1f GB/s of %.1f GB/s (%s)\n", pair, p.GBs, p.Expected, p.Basis)
		default:
			out.printf("  %s: %.1f GB/s (the link between them is not known)\n", pair, p.GBs)
		}
	}
	if len(none) > 0 {
		out.printf("  no peer access (copies go through host memory; not a failure): %s\n", strings.Join(none, ", "))
	}
}
