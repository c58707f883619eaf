package planner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// samplePlan has every kind of operation and every field set, so that a
// round trip through JSON exercises the whole document.
func samplePlan() *plan.Plan {
	steps := []plan.Step{
		{
			Address: "repository.cuda", Action: plan.Create, ReasonCode: plan.ReasonMissing,
			After:  map[string]string{"url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/", "priority": "600"},
			Reason: "The spec names the repository, and the host has no such source.",
			Operations: []plan.Operation{
				{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/apt/sources.list.d/gpuenv-cuda.list", Content: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/ /\n", Mode: 0o644, After: []string{"apt-get", "update"}}},
			},
		},
		{
			Address: "kernel.nouveau", Action: plan.Create, ReasonCode: plan.ReasonMissing,
			After:  map[string]string{"blacklisted": "true"},
			Reason: "nouveau is bound to the GPU.",
			Operations: []plan.Operation{
				{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/modprobe.d/gpuenv-nouveau.conf", Content: "blacklist nouveau\n", Mode: 0o644}},
				{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "rebuild_initramfs"}},
			},
			Flags: plan.Flags{NeedsReboot: true},
		},
		{
			Address: "driver", Action: plan.Replace, ReasonCode: plan.ReasonVariantMismatch,
			Before:    map[string]string{"version": "535.161.07", "kernel_modules": "proprietary"},
			After:     map[string]string{"version": "550.54.15-0ubuntu1", "kernel_modules": "open"},
			Reason:    "The spec asks for >= 550.54.15, < 551.",
			DependsOn: []string{"repository.cuda"},
			Operations: []plan.Operation{
				{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "nvidia-driver-550-open", Version: "550.54.15-0ubuntu1"}}, Remove: []string{"nvidia-driver-535"}, Purge: true, Hold: []string{"nvidia-driver-550-open"}, Unhold: []string{"nvidia-driver-535"}, AllowDowngrade: true}},
				{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true, Now: true}},
			},
			Flags: plan.Flags{NeedsReboot: true, NeedsModuleReload: true, InterruptsGPUProcesses: true, BuildsKernelModule: true},
		},
		{
			Address: "framework.pytorch", Action: plan.Create, ReasonCode: plan.ReasonMissing,
			After: map[string]string{"version": "2.5.1+cu124", "index_url": "https://download.pytorch.org/whl/cu124", "extras": "x"},
			Operations: []plan.Operation{
				{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "pip", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1+cu124", Extras: []string{"x"}}}, Python: "/usr/bin/python3", Venv: "/opt/pytorch", IndexURL: "https://download.pytorch.org/whl/cu124"}},
			},
		},
		{
			Address: "group.video", Action: plan.Update, ReasonCode: plan.ReasonMembersDiffer,
			Before: map[string]string{"members": "alice"}, After: map[string]string{"members": "alice, bob"},
			Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Create: true, Add: []string{"bob"}, Remove: []string{"mallory"}}}},
		},
		{
			Address: "device.0", Action: plan.Update, ReasonCode: plan.ReasonSettingDiffers,
			Operations: []plan.Operation{{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-8b29c1a0-5b3e-4f7a-9d3c-2e1f0a9b8c7d", Index: 0, Setting: "compute_mode", Value: "exclusive_process"}}},
		},
		{
			Address: "environment", Action: plan.Delete, ReasonCode: plan.ReasonNotRequested,
			Before:     map[string]string{"CUDA_VISIBLE_DEVICES": "0"},
			Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Remove: true, UID: 0, GID: 0}}},
		},
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, SpecDigest: "abc", Steps: steps}
	p.Transactions = Batch(p.Steps)
	p.Summary, p.NeedsReboot = summarize(p.Steps)
	p.Inferred = []plan.Inference{{Address: "framework.pytorch", Attr: "cuda", Value: "12.4", From: "torch_variants row 2.5 cu124"}}
	p.Warnings = []finding.Finding{{ID: "pci.gpus", Status: finding.Warning, Stage: finding.Plan, Summary: "No NVIDIA GPU on the PCI bus", Detail: "d", Evidence: []string{"e"}}}
	return p
}

func TestPlanJSONRoundTrip(t *testing.T) { roundTrip(t, samplePlan()) }

// roundTrip checks that p comes back from JSON equal, and valid.
func roundTrip(t *testing.T, p *plan.Plan) {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back plan.Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, &back); diff != "" {
		t.Errorf("plan after a JSON round trip (-want +got):\n%s", diff)
	}
	if err := back.Validate(); err != nil {
		t.Errorf("round-tripped plan does not validate: %v", err)
	}
}

func TestActionJSON(t *testing.T) {
	for a := plan.NoOp; a <= plan.Delete; a++ {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back plan.Action
		if err := json.Unmarshal(b, &back); err != nil || back != a {
			t.Errorf("%v: round trip gave %v, %v", a, back, err)
		}
	}
	if _, err := json.Marshal(plan.Action(42)); err == nil {
		t.Error("an invalid action encoded without error")
	}
	var a plan.Action
	if err := json.Unmarshal([]byte(`"destroy"`), &a); err == nil {
		t.Error(`"destroy" decoded as an action`)
	}
	if got := plan.Replace.Symbol(); got != "-/+" {
		t.Errorf("Replace.Symbol() = %q", got)
	}
}

func TestPlanValidate(t *testing.T) {
	checkRefused(t, samplePlan, "valid plan", []planEdit{
		{"a no-op step", func(p *plan.Plan) { p.Steps[0].Action = plan.NoOp }, "is not a change"},
		{"a package operation without its transaction", func(p *plan.Plan) { p.Steps[2].Operations[0].Transaction = 0 }, "no transaction 0"},
		{"a transaction that does not list the step", func(p *plan.Plan) { p.Transactions[0].Steps = []string{"cuda"} }, "does not list the step"},
		{"a kind without its field", func(p *plan.Plan) { p.Steps[0].Operations[0].Kind = plan.OpGroup }, `kind "group" without its group field`},
		{"two fields", func(p *plan.Plan) { p.Steps[4].Operations[0].File = &plan.FileOp{Path: "/x"} }, "also carries a file field"},
		{"an unknown kind", func(p *plan.Plan) { p.Steps[0].Operations[0].Kind = "shell" }, `unknown kind "shell"`},
		{"duplicate addresses", func(p *plan.Plan) { p.Steps[1].Address = "repository.cuda" }, "two steps have the address"},
		{"misnumbered transactions", func(p *plan.Plan) { p.Transactions[0].ID = 7 }, "is numbered 7"},
		{"an unknown reason code", func(p *plan.Plan) { p.Steps[1].ReasonCode = "whim" }, `step kernel.nouveau: unknown action_reason "whim"`},
	})
}

// planEdit is a change to a valid plan that Validate must refuse, with
// what its error must say.
type planEdit struct {
	name   string
	change func(p *plan.Plan)
	want   string
}

// checkRefused checks that Validate accepts the plan made by valid
// (described as what) and refuses each of the edits of it.
func checkRefused(t *testing.T, valid func() *plan.Plan, what string, edits []planEdit) {
	t.Helper()
	for _, tt := range edits {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.change(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := valid().Validate(); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

func TestSummary(t *testing.T) {
	p := samplePlan()
	want := plan.Summary{Add: 4, Change: 2, Remove: 2}
	if p.Summary != want || !p.NeedsReboot {
		t.Errorf("summary %+v reboot %v, want %+v and a reboot", p.Summary, p.NeedsReboot, want)
	}
}

func TestReadApplyStatus(t *testing.T) {
	st, err := plan.ReadApplyStatus(strings.NewReader(`{"unfinished": true, "generation": 7, "command": "apply", "pid": 42, "journal": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := (plan.ApplyStatus{Unfinished: true, Generation: 7, Command: "apply", PID: 42}); *st != want {
		t.Errorf("got %+v, want %+v", *st, want)
	}
	if _, err := plan.ReadApplyStatus(bytes.NewReader([]byte("{"))); err == nil {
		t.Error("a truncated status file read without error")
	}
}
