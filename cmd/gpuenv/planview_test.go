package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// viewPlan has a step of each action and an operation of each kind, the
// way the planner returns them (ordered, batched, summarised).
func viewPlan() *plan.Plan {
	p := &plan.Plan{
		FormatVersion: plan.FormatVersion,
		Steps: []plan.Step{
			{
				Address: "repository.cuda", Action: plan.Create,
				After:  map[string]string{"url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/", "priority": "600"},
				Reason: "The spec names this repository, and the host has no such package source.",
				Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{
					Path: "/etc/apt/sources.list.d/gpuenv-cuda.list", Content: "deb [signed-by=/k.gpg] https://x/ /\n", Mode: 0o644, After: []string{"apt-get", "update"},
				}}},
			},
			{
				Address: "driver", Action: plan.Replace,
				Before:    map[string]string{"version": "535.161.07", "kernel_modules": "proprietary", "source": "nvidia"},
				After:     map[string]string{"version": "550.54.15", "kernel_modules": "open", "source": "nvidia"},
				Reason:    "The spec asks for >= 550.54.15, < 551 with open kernel modules; 535.161.07 with proprietary modules is installed.",
				DependsOn: []string{"repository.cuda"},
				Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
					Manager: "apt", Remove: []string{"nvidia-driver-535"}, Purge: true,
					Install: []plan.PackagePin{{Name: "nvidia-driver-550-open", Version: "550.54.15-0ubuntu1"}},
				}}},
				Flags: plan.Flags{NeedsReboot: true, NeedsModuleReload: true, InterruptsGPUProcesses: true},
			},
			{
				Address: "cuda", Action: plan.Update,
				Before: map[string]string{"version": "12.3.2", "set_environment": "false"},
				After:  map[string]string{"version": "12.4.1", "set_environment": "true"},
				Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
					Manager: "apt", Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"}},
				}}},
			},
			{
				Address: "framework.pytorch", Action: plan.Create,
				After: map[string]string{"version": "2.5.1+cu124"},
				Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
					Manager: "pip", Venv: "/opt/pytorch", Python: "/opt/pytorch/bin/python", IndexURL: "https://download.pytorch.org/whl/cu124",
					Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}},
				}}},
			},
			{
				Address: "group.video", Action: plan.Update,
				Before:     map[string]string{"members": "alice"},
				After:      map[string]string{"members": "alice, bob"},
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"bob"}}}},
			},
			{
				Address: "environment", Action: plan.Delete,
				Before:     map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"},
				Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Remove: true}}},
			},
			{
				Address: "device.all", Action: plan.Update,
				Before: map[string]string{"compute_mode": "default"},
				After:  map[string]string{"compute_mode": "exclusive_process"},
				Operations: []plan.Operation{
					{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-0a", Index: 0, Setting: "compute_mode", Value: "exclusive_process"}},
					{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true, Now: true}},
					{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "rebuild_initramfs"}},
				},
			},
		},
		Inferred: []plan.Inference{{Address: "framework.pytorch", Attr: "index_url", Value: "https://download.pytorch.org/whl/cu124", From: "torch_variants row 2.5/cu124"}},
		Warnings: []finding.Finding{{
			ID: planner.CheckGPUProcesses, Status: finding.Warning, Stage: finding.Plan,
			Summary:  "Applying this plan interrupts running GPU processes",
			Detail:   "driver must unload the nvidia modules, which stops every process using a GPU. Stop them first, or apply when they are done.",
			Evidence: []string{"GPU 0 (GPU-0a): pid 4242 python3, 3.0 GiB"},
		}},
		Summary:     plan.Summary{Add: 3, Change: 3, Remove: 2},
		NeedsReboot: true,
	}
	p.Transactions = planner.Batch(p.Steps)
	return p
}

const viewPlanText = `gpuenv will make these changes, in this order:

  # repository.cuda will be created
  + repository.cuda
      The spec names this repository, and the host has no such package source.
      + priority 600
      + url      https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/
      → write /etc/apt/sources.list.d/gpuenv-cuda.list (mode 0644, 36 bytes), then run apt-get update

  # driver will be replaced (needs reboot, needs module reload, interrupts GPU processes)
-/+ driver
      The spec asks for >= 550.54.15, < 551 with open kernel modules;
      535.161.07 with proprietary modules is installed.
      ~ kernel_modules proprietary → open
        source         nvidia
      ~ version        535.161.07 → 550.54.15
      → apt: install nvidia-driver-550-open=550.54.15-0ubuntu1; purge nvidia-driver-535 [transaction 1, with cuda]
      after repository.cuda

  # cuda will be updated in place
  ~ cuda
      ~ set_environment false → true
      ~ version         12.3.2 → 12.4.1
      → apt: install cuda-toolkit-12-4=12.4.1-1 [transaction 1, with driver]

  # framework.pytorch will be created
  + framework.pytorch
      + version 2.5.1+cu124
      → pip: install torch==2.5.1+cu124 in a new venv /opt/pytorch from https://download.pytorch.org/whl/cu124

  # group.video will be updated in place
  ~ group.video
      ~ members alice → alice, bob
      → group video: add bob

  # environment will be removed
  - environment
      - CUDA_VISIBLE_DEVICES 0,1
      → remove /etc/profile.d/gpuenv.sh

  # device.all will be updated in place
  ~ device.all
      ~ compute_mode default → exclusive_process
      → set compute_mode = exclusive_process on GPU 0 (GPU-0a)
      → enable nvidia-persistenced.service and start it now
      → rebuild the initramfs

Values the spec leaves out, completed from gpuenv's tables:
  framework.pytorch index_url = https://download.pytorch.org/whl/cu124
      from torch_variants row 2.5/cu124

Warning: Applying this plan interrupts running GPU processes

  driver must unload the nvidia modules, which stops every process using a
  GPU. Stop them first, or apply when they are done.

  Evidence:
    - GPU 0 (GPU-0a): pid 4242 python3, 3.0 GiB

Plan: 3 to add, 3 to change, 2 to remove. A reboot is required.
`

func TestHumanPlan(t *testing.T) {
	var buf bytes.Buffer
	(&humanPlan{w: &buf}).render(viewPlan())
	if diff := cmp.Diff(viewPlanText, buf.String()); diff != "" {
		t.Errorf("human plan (-want +got):\n%s", diff)
	}
}

func TestHumanPlanColor(t *testing.T) {
	var buf bytes.Buffer
	(&humanPlan{w: &buf, color: true}).render(viewPlan())
	out := buf.String()
	for _, want := range []string{ansiGreen + "  +" + ansiReset, ansiYellow + "-/+" + ansiReset, ansiRed + "  -" + ansiReset, ansiBold + ansiYellow + "Warning:"} {
		if !strings.Contains(out, want) {
			t.Errorf("coloured plan lacks %q", want)
		}
	}
	// Without the escapes, the coloured plan is the plain one.
	plain := out
	for _, code := range []string{ansiReset, ansiBold, ansiGreen, ansiYellow, ansiRed} {
		plain = strings.ReplaceAll(plain, code, "")
	}
	if diff := cmp.Diff(viewPlanText, plain); diff != "" {
		t.Errorf("coloured plan without escapes (-want +got):\n%s", diff)
	}
}

func TestHumanPlanClosingLines(t *testing.T) {
	tests := []struct {
		plan *plan.Plan
		want string
	}{
		{&plan.Plan{Steps: []plan.Step{}}, "No changes. This host matches the spec.\n"},
		{&plan.Plan{
			Steps:   []plan.Step{{Address: "driver", Action: plan.Update, Flags: plan.Flags{NeedsModuleReload: true}}},
			Summary: plan.Summary{Change: 1},
		}, "Plan: 0 to add, 1 to change, 0 to remove. The nvidia kernel modules will be reloaded.\n"},
		{&plan.Plan{
			Steps:   []plan.Step{{Address: "group.video", Action: plan.Create}},
			Summary: plan.Summary{Add: 1},
		}, "Plan: 1 to add, 0 to change, 0 to remove.\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		(&humanPlan{w: &buf}).render(tt.plan)
		lines := strings.SplitAfter(buf.String(), "\n")
		if got := lines[len(lines)-2]; got != tt.want {
			t.Errorf("closing line %q, want %q", got, tt.want)
		}
	}
}

// The JSON view is the plan itself: decoding it gives the plan back.
func TestJSONPlanIsThePlan(t *testing.T) {
	var buf bytes.Buffer
	g := &globalOptions{Stdout: &buf, JSON: true}
	want := viewPlan()
	if err := writePlan(g, nil, want, nil); err != nil {
		t.Fatal(err)
	}
	var got plan.Plan
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Errorf("JSON plan (-want +got):\n%s", diff)
	}
	if !strings.Contains(buf.String(), `"diagnostics": []`) || !strings.Contains(buf.String(), `"format_version": "`+plan.FormatVersion+`"`) {
		t.Errorf("JSON plan lacks diagnostics or format_version:\n%s", buf.String())
	}
}

func TestWrap(t *testing.T) {
	var buf bytes.Buffer
	wrap(&buf, "  ", strings.Repeat("word ", 20)+"\nsecond paragraph")
	for _, l := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if len(l) > diagnosticsWidth || !strings.HasPrefix(l, "  ") {
			t.Errorf("line %q is too long or not indented", l)
		}
	}
	if !strings.HasSuffix(buf.String(), "  second paragraph\n") {
		t.Errorf("paragraph break lost:\n%s", buf.String())
	}
}

// failingWriter fails every write after the first n bytes, as a closed
// pipe does.
type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("write |1: broken pipe")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestHumanPlanReportsWriteErrors(t *testing.T) {
	if err := (&humanPlan{w: &failingWriter{n: 40}}).render(viewPlan()); err == nil || !strings.Contains(err.Error(), "broken pipe") {
		t.Fatalf("render into a closed pipe: %v", err)
	}
	var buf bytes.Buffer
	if err := (&humanPlan{w: &buf}).render(viewPlan()); err != nil {
		t.Fatalf("render: %v", err)
	}
}

// TestHumanPlanUnverifiedOnce: table rows whose facts no source confirms
// are named once, after the inferred values, not on each value's line;
// values read from the host change the heading.
func TestHumanPlanUnverifiedOnce(t *testing.T) {
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{}, Inferred: []plan.Inference{
		{Address: "framework.pytorch", Attr: "version", Value: "2.1.2", From: "torch_releases row 2.1 (torch-prev-versions)", Unverified: "torch_releases row 2.1: default_variant"},
		{Address: "framework.pytorch", Attr: "cuda", Value: "12.1", From: "torch_variants row 2.1 cu121 (torch-prev-versions)"},
		{Address: "framework.pytorch", Attr: "index_url", Value: "https://download.pytorch.org/whl/cu121", From: "torch_releases row 2.1 (torch-prev-versions)", Unverified: "torch_releases row 2.1: default_variant"},
		{Address: "driver", Attr: "kernel_modules", Value: "proprietary", From: "architectures row volta (r580-notice)", Unverified: "architectures row volta: first_branch"},
	}}
	var buf bytes.Buffer
	(&humanPlan{w: &buf}).render(p)
	want := `Values the spec leaves out, completed from gpuenv's tables:
  framework.pytorch version = 2.1.2
      from torch_releases row 2.1 (torch-prev-versions)
  framework.pytorch cuda = 12.1
      from torch_variants row 2.1 cu121 (torch-prev-versions)
  framework.pytorch index_url = https://download.pytorch.org/whl/cu121
      from torch_releases row 2.1 (torch-prev-versions)
  driver kernel_modules = proprietary
      from architectures row volta (r580-notice)

  Not yet confirmed in the sources these rows cite: torch_releases row 2.1:
  default_variant; architectures row volta: first_branch.

No changes. This host matches the spec.
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	p.Inferred = []plan.Inference{{Address: "cuda", Attr: "source", Value: "nvidia", From: "the installed cuda-toolkit-12-4 12.4.1-1 at /usr/local/cuda-12.4, which satisfies the spec and which /var/lib/apt/lists/x_Packages (NVIDIA CUDA) lists"}}
	buf.Reset()
	(&humanPlan{w: &buf}).render(p)
	if !strings.HasPrefix(buf.String(), "Values the spec leaves out, completed from gpuenv's tables and the host's packages:\n") {
		t.Errorf("heading of values read from the host:\n%s", buf.String())
	}
}

// A file written with an owner other than root's (a merged engine
// configuration kept as it was) says so; root's, the usual, goes unsaid.
// A file whose content apply makes says so rather than "0 bytes".
func TestOperationTextOwner(t *testing.T) {
	for _, c := range []struct {
		op   plan.FileOp
		want string
	}{
		{plan.FileOp{Path: "/etc/docker/daemon.json", Content: "{}\n", Mode: 0o600, UID: 1000, GID: 1001, After: []string{"systemctl", "restart", "docker"}},
			"write /etc/docker/daemon.json (mode 0600, owner 1000:1001, 3 bytes), then run systemctl restart docker"},
		{plan.FileOp{Path: "/etc/containerd/config.toml", Content: "x\n", Mode: 0o600},
			"write /etc/containerd/config.toml (mode 0600, 2 bytes)"},
		// Content made at apply has no size to show yet.
		{plan.FileOp{Path: "/etc/cdi/nvidia.yaml", Mode: 0o644, Generate: plan.GenerateCDI},
			"write /etc/cdi/nvidia.yaml (mode 0644, content made at apply from the host's files)"},
	} {
		if got := operationText(plan.Operation{Kind: plan.OpFile, File: &c.op}, "", nil); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
