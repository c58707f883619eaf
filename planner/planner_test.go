package planner

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// testProvider is a Provider whose answer a test sets; it records the
// requests it was given.
type testProvider struct {
	name string
	// steps are what Steps returns; nil: the stack's kind of that name
	// (stackSteps), or the last layer for a name outside the stack.
	steps    []StepKind
	PlanFn   func(ctx context.Context, req *Request) *Response
	requests []*Request
}

func (p *testProvider) Name() string { return p.name }

func (p *testProvider) Steps() []StepKind {
	if p.steps != nil {
		return p.steps
	}
	if sks, ok := stackSteps[p.name]; ok {
		return sks
	}
	return []StepKind{{Layer: LayerContainers}}
}

func (p *testProvider) Plan(ctx context.Context, req *Request) *Response {
	p.requests = append(p.requests, req)
	return p.PlanFn(ctx, req)
}

var _ Provider = (*testProvider)(nil)

func respond(r *Response) func(context.Context, *Request) *Response {
	return func(context.Context, *Request) *Response { return r }
}

// countingCandidates records the package questions asked.
type countingCandidates struct{ asked []string }

func (c *countingCandidates) Versions(_ context.Context, manager plan.Manager, name string) ([]string, error) {
	c.asked = append(c.asked, string(manager)+":"+name)
	return []string{"550.54.15-0ubuntu1"}, nil
}

// newTestPlanner plans with ps, knowing every kind of the stack.
func newTestPlanner(ps ...Provider) *Planner {
	var names []string
	for _, p := range ps {
		names = append(names, p.Name())
	}
	pl := New(append(ps, stackProviders(names...)...)...)
	pl.Resolve = nil
	return pl
}

func TestPlannerCombinesProviders(t *testing.T) {
	cands := &countingCandidates{}
	driver := &testProvider{name: "driver", PlanFn: func(ctx context.Context, req *Request) *Response {
		v, _ := req.Candidates.Versions(ctx, "apt", "nvidia-driver-550")
		return &Response{
			Steps: []plan.Step{
				{Address: "driver", Action: plan.Update, ReasonCode: plan.ReasonMissing, DependsOn: []string{"repository.cuda", "kernel.headers"},
					Before: map[string]string{"version": "535.161.07-0ubuntu1"}, After: map[string]string{"version": "550.54.15-0ubuntu1"},
					Operations: []plan.Operation{aptOp("nvidia-driver-550", v[0])}, Flags: plan.Flags{NeedsReboot: true, NeedsModuleReload: true}},
				{Address: "driver.hold", Action: plan.Create, ReasonCode: plan.ReasonMissing, DependsOn: []string{"driver"},
					Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550"}})}},
			},
			Inferred: []plan.Inference{{Address: "driver", Attr: "kernel_modules", Value: "open", From: "architectures row hopper"}},
			Warnings: []finding.Finding{{Summary: "from the driver provider"}},
		}
	}}
	cuda := &testProvider{name: "cuda", PlanFn: respond(&Response{
		Steps: []plan.Step{
			{Address: "cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing, DependsOn: []string{"driver"}, After: map[string]string{"package": "cuda-toolkit-12-4=12.4.1-1", "version": "12.4.1"},
				Operations: []plan.Operation{aptOp("cuda-toolkit-12-4", "12.4.1-1")}},
			{Address: "environment", Action: plan.Create, ReasonCode: plan.ReasonMissing, DependsOn: []string{"cuda"}, Operations: []plan.Operation{fileOp("/etc/profile.d/gpuenv.sh")}},
		},
		Inferred: []plan.Inference{{Address: "cuda", Attr: "path", Value: "/usr/local/cuda-12.4", From: "defaults"}},
	})}
	repo := &testProvider{name: "repository", PlanFn: respond(&Response{
		Steps: []plan.Step{{Address: "repository.cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing, Operations: []plan.Operation{fileOp("/etc/apt/sources.list.d/gpuenv-cuda.list")}}},
	})}
	obs := gpuFacts(1)
	obs.NVML.Devices[0].Processes = []facts.GPUProcess{{PID: 10, Name: "python3", UsedMemory: 1 << 30}}

	pl := newTestPlanner(cuda, driver, repo)
	pl.Candidates = cands
	p, diags := pl.Plan(context.Background(), &spec.Spec{}, obs)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if diff := cmp.Diff([]string{"repository.cuda", "driver", "driver.hold", "cuda", "environment"}, addresses(p.Steps)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// kernel.headers is not in the plan: the dependency is met.
	if diff := cmp.Diff([]string{"repository.cuda"}, p.Step("driver").DependsOn); diff != "" {
		t.Errorf("driver's dependencies (-want +got):\n%s", diff)
	}
	if !p.Step("driver").Flags.InterruptsGPUProcesses {
		t.Error("a module reload with a GPU process running is not flagged as interrupting it")
	}
	if len(p.Transactions) != 1 || !cmp.Equal(p.Transactions[0].Steps, []string{"driver", "driver.hold", "cuda"}) {
		t.Errorf("transactions: %+v", p.Transactions)
	}
	if want := (plan.Summary{Add: 4, Change: 1}); p.Summary != want || !p.NeedsReboot {
		t.Errorf("summary %+v reboot %v", p.Summary, p.NeedsReboot)
	}
	if got := []string{p.Inferred[0].Address, p.Inferred[1].Address}; !cmp.Equal(got, []string{"cuda", "driver"}) {
		t.Errorf("inferred values not sorted by address: %v", got)
	}
	var checks []string
	for _, w := range p.Warnings {
		checks = append(checks, w.ID+"/"+w.Summary)
	}
	want := []string{"/from the driver provider", CheckGPUProcesses + "/Applying this plan interrupts running GPU processes"}
	if diff := cmp.Diff(want, checks); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if !cmp.Equal(cands.asked, []string{"apt:nvidia-driver-550"}) {
		t.Errorf("candidates asked: %v", cands.asked)
	}
	for _, prov := range []*testProvider{cuda, driver, repo} {
		if len(prov.requests) != 1 || prov.requests[0].Facts != obs {
			t.Errorf("%s: requests %v", prov.name, prov.requests)
		}
	}
	if err := p.Validate(); err != nil {
		t.Errorf("planned plan does not validate: %v", err)
	}
}

func TestPlannerNoChanges(t *testing.T) {
	quiet := &testProvider{name: "driver", PlanFn: respond(nil)}
	pl := newTestPlanner(quiet)
	p, diags := pl.Plan(context.Background(), &spec.Spec{}, gpuFacts(1))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	if !p.Empty() || p.Steps == nil || p.NeedsReboot || p.Summary != (plan.Summary{}) {
		t.Errorf("plan %+v, want an empty one with a non-nil step list", p)
	}
	if _, ok := pl.Candidates.(NoCandidates); pl.Candidates != nil && !ok {
		t.Errorf("default candidates %T", pl.Candidates)
	}
	if quiet.requests[0].Candidates == nil {
		t.Error("a provider was given nil Candidates")
	}
}

func TestPlannerReportsEveryProblem(t *testing.T) {
	bad := func(name, summary string) *testProvider {
		return &testProvider{name: name, PlanFn: respond(&Response{
			Steps:       []plan.Step{{Address: name, Action: plan.Create}},
			Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary}},
		})}
	}
	warn := &testProvider{name: "groups", PlanFn: respond(&Response{
		Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "w"}},
	})}
	p, diags := newTestPlanner(bad("cuda", "a"), warn, bad("cudnn", "b")).Plan(context.Background(), &spec.Spec{}, &facts.Observation{})
	if p != nil {
		t.Error("a plan came back with errors")
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	if diff := cmp.Diff([]string{"a", "w", "b"}, got); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

func TestPlannerProgrammingErrors(t *testing.T) {
	tests := []struct {
		name string
		prov *testProvider
		want string
	}{
		{"a panic", &testProvider{name: "cuda", PlanFn: func(context.Context, *Request) *Response { panic("boom") }},
			"The cuda provider panicked while planning: boom"},
		{"a cycle", &testProvider{name: "x", PlanFn: respond(&Response{Steps: []plan.Step{
			{Address: "cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing, DependsOn: []string{"driver"}},
			{Address: "driver", Action: plan.Create, ReasonCode: plan.ReasonMissing, DependsOn: []string{"cuda"}},
		}})}, "steps depend on each other in a cycle: driver → cuda → driver"},
		{"a no-op step", &testProvider{name: "x", PlanFn: respond(&Response{Steps: []plan.Step{{Address: "cuda"}}})},
			"step cuda: action no-op is not a change"},
		{"a malformed operation", &testProvider{name: "x", PlanFn: respond(&Response{Steps: []plan.Step{
			{Address: "cuda", Action: plan.Create, Operations: []plan.Operation{{Kind: plan.OpFile}}},
		}})}, `step cuda operation 1: kind "file" without its file field`},
		{"a step without a reason code", &testProvider{name: "x", PlanFn: respond(&Response{Steps: []plan.Step{{Address: "cuda", Action: plan.Create}}})},
			"step cuda has no action_reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, diags := newTestPlanner(tt.prov).Plan(context.Background(), &spec.Spec{}, &facts.Observation{})
			if p != nil || !diags.HasErrors() {
				t.Fatalf("plan %v, diagnostics %v", p, diags)
			}
			if !strings.Contains(diags[0].Detail, tt.want) {
				t.Errorf("detail %q lacks %q", diags[0].Detail, tt.want)
			}
		})
	}
}

func TestPlannerCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	prov := &testProvider{name: "x", PlanFn: respond(nil)}
	p, diags := newTestPlanner(prov).Plan(ctx, &spec.Spec{}, &facts.Observation{})
	if p != nil || !diags.HasErrors() || len(prov.requests) != 0 {
		t.Errorf("cancelled plan: %v %v, provider called %d times", p, diags, len(prov.requests))
	}
}

func TestPlannerResolve(t *testing.T) {
	prov := &testProvider{name: "x", PlanFn: respond(nil)}
	pl := newTestPlanner(prov)
	want := &Desired{Inferred: []plan.Inference{{Address: "driver", Attr: "version", Value: ">= 550", From: "cuda_releases"}}}
	pl.Resolve = func(*spec.Spec, *facts.Observation) (*Desired, hcl.Diagnostics) { return want, nil }
	p, _ := pl.Plan(context.Background(), &spec.Spec{}, &facts.Observation{})
	if prov.requests[0].Desired != want {
		t.Error("the provider did not get the resolved values")
	}
	if diff := cmp.Diff(want.Inferred, p.Inferred); diff != "" {
		t.Errorf("inferred (-want +got):\n%s", diff)
	}

	pl.Resolve = func(*spec.Spec, *facts.Observation) (*Desired, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Conflicting versions"}}
	}
	p, diags := pl.Plan(context.Background(), &spec.Spec{}, &facts.Observation{})
	if p != nil || len(diags) != 1 || len(prov.requests) != 1 {
		t.Errorf("a resolution error still planned: %v %v", p, diags)
	}
}

func TestSpecDigest(t *testing.T) {
	mk := func(name, content string) *spec.Spec {
		return &spec.Spec{Files: map[string]*hcl.File{name: {Bytes: []byte(content)}}}
	}
	a := SpecDigest(mk("examples/x/gpuenv.hcl", "driver {}\n"))
	if a == "" || a != SpecDigest(mk("./examples/x/gpuenv.hcl", "driver {}\n")) {
		t.Error("the digest depends on how the spec's path was written")
	}
	if a == SpecDigest(mk("examples/x/gpuenv.hcl", "cuda {}\n")) {
		t.Error("the digest does not change with the content")
	}
}

// BenchmarkPlannerEngine is the planner's own work on a fresh machine's
// dozen steps: ordering, batching, the checks and the summary, with
// providers that only return their steps.
func BenchmarkPlannerEngine(b *testing.B) {
	steps := samplePlan().Steps
	for i := range steps {
		for j := range steps[i].Operations {
			steps[i].Operations[j].Transaction = 0
		}
	}
	steps = append(steps,
		withOps("kernel.headers", aptOp("linux-headers-5.15.0-105-generic", "5.15.0-105.115")),
		withOps("cuda", aptOp("cuda-toolkit-12-4", "12.4.1-1")),
		withOps("cudnn", aptOp("libcudnn9-cuda-12", "9.1.0.70-1")),
		withOps("driver.hold", pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550-open"}})),
		withOps("driver.purge", pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"nvidia-driver-535"}, Purge: true})),
	)
	prov := &testProvider{name: "all", PlanFn: func(context.Context, *Request) *Response {
		out := make([]plan.Step, len(steps))
		copy(out, steps)
		for i := range out {
			out[i].Operations = make([]plan.Operation, len(steps[i].Operations))
			copy(out[i].Operations, steps[i].Operations)
		}
		return &Response{Steps: out}
	}}
	obs := fingerprintFacts()
	obs.Kernel.SecureBoot = "enabled"
	pl := newTestPlanner(prov)
	b.ReportAllocs()
	for b.Loop() {
		prov.requests = prov.requests[:0]
		if _, diags := pl.Plan(context.Background(), &spec.Spec{}, obs); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// BenchmarkFingerprint digests the facts of a plan that touches every
// layer, as plan --out and apply do once each.
func BenchmarkFingerprint(b *testing.B) {
	p, obs, kinds := samplePlan(), fingerprintFacts(), stackKinds()
	b.ReportAllocs()
	for b.Loop() {
		Fingerprint(p, obs, kinds)
	}
}
