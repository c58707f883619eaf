package apply_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers"
)

const (
	cdiPath        = "/etc/cdi/nvidia.yaml"
	managementPath = "/etc/cdi/management.nvidia.com-gpu.yaml"
)

func generatedCDIOp() plan.Operation {
	return plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: cdiPath, Mode: 0o644, Generate: plan.GenerateCDI}}
}

// journalCheck runs each operation after checking, for a file operation,
// that the journal on disk already holds its begin record with the
// content it writes, and that the file does not yet: what apply writes is
// recorded first.
type journalCheck struct {
	apply.Executor
	t       *testing.T
	root    string
	checked map[string]string
}

func (x *journalCheck) Run(ctx context.Context, ws *apply.Workspace, op plan.Operation) error {
	if f := op.File; f != nil && !f.Remove {
		if f.Generate != "" {
			x.t.Errorf("%s runs with its content still to be made (%q)", f.Path, f.Generate)
		}
		recs, err := apply.ReadJournal(filepath.Join(ws.Path, "journal"), false)
		if err != nil {
			x.t.Fatal(err)
		}
		var journaled *plan.FileOp
		for _, r := range recs {
			if r.Event == apply.EventBegin && r.Operation != nil && r.Operation.File != nil && r.Operation.File.Path == f.Path {
				journaled = r.Operation.File
			}
		}
		switch {
		case journaled == nil:
			x.t.Errorf("%s is written before the journal records its operation", f.Path)
		case journaled.Content != f.Content:
			x.t.Errorf("the journal records %q for %s, apply writes %q", journaled.Content, f.Path, f.Content)
		}
		if on, err := os.ReadFile(filepath.Join(x.root, f.Path)); err == nil && string(on) == f.Content && f.Content != "" {
			x.t.Errorf("%s holds its new content before the operation ran", f.Path)
		}
		x.checked[f.Path] = f.Content
	}
	return x.Executor.Run(ctx, ws, op)
}

// A CDI step of a plan that changes the driver is written by apply from
// the files the driver step left, through the generator cmd hands in; the
// journal holds the spec written before the file does, and rollback
// restores the spec the host had, byte for byte. The management spec
// beside it, which the host lacked, is made the same way and removed by
// the rollback.
func TestApplyGeneratesCDISpec(t *testing.T) {
	fx := newFixture(t)
	write := func(p, content string) {
		t.Helper()
		full := filepath.Join(fx.Root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The new driver's files, as its packages left them.
	write("/proc/driver/nvidia/gpus/0000:18:00.0/information", "GPU UUID: \t GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\nDevice Minor: \t 0\n")
	write("/dev/nvidia0", "")
	write("/dev/nvidiactl", "")
	write("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06", "")
	if err := os.Symlink("libnvidia-ml.so.570.124.06", filepath.Join(fx.Root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")); err != nil {
		t.Fatal(err)
	}
	write("/var/lib/dpkg/info/libnvidia-ml1.list", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06\n")
	status, err := os.OpenFile(filepath.Join(fx.Root, "var/lib/dpkg/status"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	status.WriteString("\nPackage: libnvidia-ml1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 570.124.06-1\n")
	status.Close()
	// The spec of the driver before.
	old := "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: all\n    containerEdits:\n      deviceNodes:\n        - path: /dev/nvidia0\n"
	write(cdiPath, old)
	before := fx.snapshot()

	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "container_toolkit.cdi", Action: plan.Update, Reason: "the driver changes",
		Operations: []plan.Operation{generatedCDIOp()},
	}, {
		Address: "container_toolkit.cdi_management", Action: plan.Create, Reason: "the driver changes",
		Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: managementPath, Mode: 0o644, Generate: plan.GenerateManagementCDI}}},
	}}}
	x := &journalCheck{Executor: fx.executor(), t: t, root: fx.Root, checked: map[string]string{}}
	o := fx.opts(x)
	o.Generate = providers.GeneratorOf(fx.h)
	res := fx.apply(p, o)
	if res.Status != apply.StatusApplied {
		t.Fatalf("apply: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	got := fx.read(cdiPath)
	for _, want := range []string{"hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06", "name: GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", "- path: /dev/nvidiactl"} {
		if !strings.Contains(got, want) {
			t.Errorf("the written spec lacks %q:\n%s", want, got)
		}
	}
	if journaled, ok := x.checked[cdiPath]; !ok || journaled != got {
		t.Errorf("the journal recorded %q, the file holds %q", journaled, got)
	}
	mgmt := fx.read(managementPath)
	for _, want := range []string{"kind: management.nvidia.com/gpu", "- path: /dev/nvidiactl\n        - path: /dev/nvidia0\n", "hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.06"} {
		if !strings.Contains(mgmt, want) {
			t.Errorf("the written management spec lacks %q:\n%s", want, mgmt)
		}
	}
	if journaled, ok := x.checked[managementPath]; !ok || journaled != mgmt {
		t.Errorf("the journal recorded %q, the file holds %q", journaled, mgmt)
	}
	fx.rollsBack(before, "after writing the CDI spec")
	if _, err := os.Lstat(filepath.Join(fx.Root, managementPath)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rollback left the management spec: %v", err)
	}
	if fx.read(cdiPath) != old {
		t.Error("rollback did not restore the previous spec")
	}
}

// The generator runs when its operation's turn comes, on the host as the
// operations before it left it, and nowhere else: before it, the step
// that puts its input in place has run.
func TestApplyGeneratesAfterEarlierSteps(t *testing.T) {
	fx := newFixture(t)
	const profile = "/etc/profile.d/gpuenv.sh"
	calls := 0
	gen := func(_ context.Context, what string) (string, error) {
		calls++
		if what != plan.GenerateCDI {
			t.Errorf("asked to make %q", what)
		}
		in, err := os.ReadFile(filepath.Join(fx.Root, profile))
		if err != nil {
			return "", err
		}
		return "# made from: " + string(in), nil
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{
		{Address: "environment", Action: plan.Create, Reason: "missing",
			Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: profile, Content: "export A=1\n", Mode: 0o644}}}},
		{Address: "container_toolkit.cdi", Action: plan.Create, Reason: "made at apply",
			Operations: []plan.Operation{generatedCDIOp()}, DependsOn: []string{"environment"}},
	}}
	x := &journalCheck{Executor: fx.executor(), t: t, root: fx.Root, checked: map[string]string{}}
	o := fx.opts(x)
	o.Generate = gen
	if res := fx.apply(p, o); res.Status != apply.StatusApplied {
		t.Fatalf("apply: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
	}
	if calls != 1 {
		t.Errorf("the generator ran %d times, want once", calls)
	}
	if got, want := fx.read(cdiPath), "# made from: export A=1\n"; got != want {
		t.Errorf("%s holds %q, want %q", cdiPath, got, want)
	}
	if x.checked[cdiPath] != "# made from: export A=1\n" {
		t.Errorf("the journal recorded %q", x.checked[cdiPath])
	}
}

// A generator that fails, or panics, stops the apply before its file is
// touched, and what ran before it is reverted.
func TestApplyGeneratorFailureReverts(t *testing.T) {
	for name, gen := range map[string]apply.Generator{
		"error": func(context.Context, string) (string, error) { return "", errors.New("no GPU found") },
		"panic": func(context.Context, string) (string, error) { panic("observer bug") },
	} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			before := fx.snapshot()
			p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{
				{Address: "environment", Action: plan.Create, Reason: "missing",
					Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "export A=1\n", Mode: 0o644}}}},
				{Address: "container_toolkit.cdi", Action: plan.Create, Reason: "made at apply",
					Operations: []plan.Operation{generatedCDIOp()}},
			}}
			o := fx.opts(nil)
			o.Generate = gen
			res := fx.apply(p, o)
			if res.Status != apply.StatusReverted || res.Failed == nil || res.Failed.Step != "container_toolkit.cdi" || !strings.Contains(res.Failed.Error, cdiPath) {
				t.Fatalf("apply: status %s, failed %+v, want the CDI step failed and reverted\n%s", res.Status, res.Failed, fx.out.String())
			}
			fx.same(before, "after the revert")
		})
	}
}

// A plan whose content is made at apply is refused, before anything
// changes, by an apply given nothing to make it.
func TestApplyRefusesGeneratedContentWithoutGenerator(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "container_toolkit.cdi", Action: plan.Create, Reason: "made at apply",
		Operations: []plan.Operation{generatedCDIOp()},
	}}}
	res, err := apply.Apply(context.Background(), fx.h, p, fx.opts(nil))
	if err == nil || !strings.Contains(err.Error(), cdiPath) || !strings.Contains(err.Error(), "given nothing to make it") {
		t.Fatalf("apply: %+v, %v; want a refusal naming %s", res, err, cdiPath)
	}
	fx.same(before, "after the refusal")
}
