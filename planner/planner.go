package planner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// Planner computes plans from a spec and an observation with a fixed set
// of providers.
type Planner struct {
	providers []Provider
	// kinds is kept in the planner itself: one allocation fewer for
	// every plan.
	kinds Kinds

	// Candidates answers the providers' package-version questions; nil
	// means no package manager can be asked (NoCandidates).
	Candidates Candidates
	// Resolve completes and resolves the spec's values before the
	// providers run (Request.Desired). New sets it to the package's
	// Resolve; nil leaves Desired nil, for providers that need none.
	Resolve ResolveFunc
	// Status is the state directory's status file, read before planning;
	// nil when there is none. StatusPath names it in the warning.
	Status     *planpkg.ApplyStatus
	StatusPath string
	// InterruptGPUProcesses is Request.InterruptGPUProcesses.
	InterruptGPUProcesses bool
	// Targets, when set, limit the plan to the steps at these addresses
	// and those they depend on (Target), as Terraform's -target does.
	Targets []string
	// Replace are -replace's addresses (Request.Replace).
	Replace []string
	// EndState predicts the host as the plan leaves it, over which the
	// plan runs doctor's rules of stage plan: it warns where doctor would
	// report, and refuses where the spec itself makes a problem. Nil
	// judges no end state.
	EndState EndStateFunc
	// User is whose programs must reach the GPU (doctor.Input.User):
	// plan judges whether they may open the device nodes the plan leaves.
	// Nil judges no user's access.
	User *doctor.User
}

// ResolveFunc computes the desired values of a spec on a host. Its
// diagnostics are reported with the plan's; errors stop the plan before
// any provider runs.
type ResolveFunc func(s *spec.Spec, obs *facts.Observation) (*Desired, hcl.Diagnostics)

// New returns a planner that resolves the spec with Resolve and asks
// providers for steps, in this order.
func New(providers ...Provider) *Planner {
	p := &Planner{providers: providers, Resolve: Resolve}
	p.kinds.init(providers)
	return p
}

// Kinds are the kinds of step the planner's providers make, for what
// orders and fingerprints a plan (Order, Save, CheckTargets).
func (p *Planner) Kinds() *Kinds { return &p.kinds }

// Plan computes what must change on the host obs describes for it to
// match s. The spec must have loaded without errors.
//
// Every problem is reported: the diagnostics of resolution and of every
// provider. When they hold errors the plan is nil. Warnings that concern
// the host rather than the spec are in the plan's Warnings.
func (p *Planner) Plan(ctx context.Context, s *spec.Spec, obs *facts.Observation) (*planpkg.Plan, hcl.Diagnostics) {
	if err := p.kinds.Err(); err != nil {
		return nil, hcl.Diagnostics{programmingError(err)}
	}
	diags := append(CheckTargets(p.Targets, &p.kinds), CheckReplace(p.Replace)...)
	if diags.HasErrors() {
		return nil, diags
	}
	cands := p.Candidates
	if cands == nil {
		cands = NoCandidates{}
	}
	if ic, ok := cands.(IndexCandidates); ok {
		ic.UseIndexes(&obs.PackageIndexes)
	}
	req := &Request{Spec: s, Facts: obs, Candidates: cands, InterruptGPUProcesses: p.InterruptGPUProcesses, Replace: p.Replace}
	if p.Resolve != nil {
		d, more := p.Resolve(s, obs)
		diags = append(diags, more...)
		if diags.HasErrors() {
			return nil, diags
		}
		req.Desired = d
	}

	plan := &planpkg.Plan{FormatVersion: planpkg.FormatVersion, SpecDigest: SpecDigest(s), Steps: []planpkg.Step{}}
	if req.Desired != nil {
		plan.Inferred = append(plan.Inferred, req.Desired.Inferred...)
		if w := noKernelWarning(req.Desired); w != nil {
			plan.Warnings = append(plan.Warnings, *w)
		}
	}
	var steps []planpkg.Step
	for _, prov := range p.providers {
		if err := ctx.Err(); err != nil {
			return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Planning was cancelled", Detail: err.Error()})
		}
		resp, more := callProvider(ctx, prov, req)
		diags = append(diags, more...)
		if resp == nil {
			continue
		}
		for _, st := range resp.Steps {
			// A step no kind describes would have no place in the order
			// and no facts in the fingerprint.
			if !p.kinds.Known(st.Address) {
				return nil, append(diags, programmingError(fmt.Errorf("the %s provider made the step %q, of no kind the planner knows", prov.Name(), st.Address)))
			}
		}
		steps = append(steps, resp.Steps...)
		plan.Inferred = append(plan.Inferred, resp.Inferred...)
		plan.Warnings = append(plan.Warnings, resp.Warnings...)
	}
	if !diags.HasErrors() {
		// A provider that could not plan a reinstall said why.
		diags = append(diags, checkReplaced(steps, p.Replace)...)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	steps = refreshSteps(steps, &obs.PackageIndexes)
	if err := planpkg.ValidateSteps(steps); err != nil {
		return nil, append(diags, programmingError(err))
	}
	for _, st := range steps {
		// A plan read back may lack a code (format 1.0); a new one may not.
		if st.ReasonCode == "" {
			return nil, append(diags, programmingError(fmt.Errorf("step %s has no action_reason", st.Address)))
		}
	}
	ordered, err := Order(steps, &p.kinds)
	if err != nil {
		return nil, append(diags, programmingError(err))
	}
	if len(p.Targets) > 0 {
		var w []finding.Finding
		ordered, w = Target(ordered, p.Targets)
		plan.Warnings = append(plan.Warnings, w...)
	}
	plan.Steps = ordered
	pruneDependencies(plan.Steps)
	markInterruptions(plan.Steps, obs)
	plan.Transactions = Batch(plan.Steps)
	// The plan must pass what a plan read back from a file must pass.
	if err := plan.Validate(); err != nil {
		return nil, append(diags, programmingError(err))
	}
	in := &checkInput{spec: s, obs: obs, steps: plan.Steps, status: p.Status, statusPath: p.StatusPath}
	if req.Desired != nil {
		in.noKernel = req.Desired.NoKernel
	}
	plan.Warnings = append(plan.Warnings, runChecks(in)...)
	if p.EndState != nil {
		ws, more := judgeEndState(s, obs, p.EndState(obs, plan.Steps), plan.Steps, p.User)
		if diags = append(diags, more...); diags.HasErrors() {
			return nil, diags
		}
		plan.Warnings = append(plan.Warnings, ws...)
	}
	for i := range plan.Warnings {
		// Every warning is a finding of the plan: what the rule that
		// raised it did not say of itself, it is.
		w := &plan.Warnings[i]
		if w.Status == "" {
			w.Status = finding.Warning
		}
		if w.Stage == finding.Doctor {
			w.Stage = finding.Plan
		}
	}
	plan.Summary, plan.NeedsReboot = summarize(plan.Steps)
	slices.SortStableFunc(plan.Inferred, func(a, b planpkg.Inference) int {
		return strings.Compare(a.Address+"\x00"+a.Attr, b.Address+"\x00"+b.Attr)
	})
	return plan, diags
}

// callProvider runs one provider, turning a panic into an error
// diagnostic: a provider's bug must not take the command down without
// saying which provider it was.
func callProvider(ctx context.Context, prov Provider, req *Request) (resp *Response, diags hcl.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			resp = nil
			diags = hcl.Diagnostics{&hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Provider failed",
				Detail:   fmt.Sprintf("The %s provider panicked while planning: %v. This is a bug in gpuenv.\n\n%s", prov.Name(), r, debug.Stack()),
			}}
		}
	}()
	resp = prov.Plan(ctx, req)
	if resp == nil {
		return nil, nil
	}
	return resp, resp.Diagnostics
}

func programmingError(err error) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Invalid plan",
		Detail:   fmt.Sprintf("The providers returned steps that cannot form a plan: %v. This is a bug in gpuenv.", err),
	}
}

// pruneDependencies drops dependencies on steps that are not in the plan
// (their resources already match) and sorts the rest, so that the plan
// shows only what orders it.
func pruneDependencies(steps []planpkg.Step) {
	present := make(map[string]bool, len(steps))
	for _, s := range steps {
		present[s.Address] = true
	}
	for i := range steps {
		var deps []string
		for _, d := range steps[i].DependsOn {
			if present[d] && !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		slices.Sort(deps)
		steps[i].DependsOn = deps
	}
}

// markInterruptions flags the steps that reload the nvidia modules while
// GPU processes run: unloading the modules needs every client gone.
func markInterruptions(steps []planpkg.Step, obs *facts.Observation) {
	if len(gpuProcesses(obs)) == 0 {
		return
	}
	for i := range steps {
		if steps[i].Flags.NeedsModuleReload {
			steps[i].Flags.InterruptsGPUProcesses = true
		}
	}
}

// summarize counts the steps and tells whether a reboot is needed.
func summarize(steps []planpkg.Step) (planpkg.Summary, bool) {
	var sum planpkg.Summary
	reboot := false
	for _, s := range steps {
		switch s.Action {
		case planpkg.Create:
			sum.Add++
		case planpkg.Update:
			sum.Change++
		case planpkg.Replace:
			sum.Add++
			sum.Remove++
		case planpkg.Delete:
			sum.Remove++
		}
		reboot = reboot || s.Flags.NeedsReboot
	}
	return sum, reboot
}

// SpecDigest is a SHA-256 over the spec's files (spec and variable files,
// by base name, in name order), so that a generation can say which spec it
// applied however its path was spelled.
func SpecDigest(s *spec.Spec) string {
	if s == nil || len(s.Files) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Files))
	for n := range s.Files {
		names = append(names, n)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.Base(n), len(s.Files[n].Bytes))
		h.Write(s.Files[n].Bytes)
	}
	return hex.EncodeToString(h.Sum(nil))
}
