package planner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// TestCheckOperationRefuses: values an edited plan file could carry into a
// command run as root are refused, each with a message that says which.
// The first four are what a saved plan was made to do before these rules.
func TestCheckOperationRefuses(t *testing.T) {
	apt := func(p plan.PackagesOp) plan.Operation { p.Manager = "apt"; return pkgOp(p) }
	dnf := func(p plan.PackagesOp) plan.Operation { p.Manager = "dnf"; return pkgOp(p) }
	pip := func(p plan.PackagesOp) plan.Operation {
		p.Manager = "pip"
		if p.Venv == "" {
			p.Venv = "/opt/pytorch"
		}
		return pkgOp(p)
	}
	pin := func(name, version string) []plan.PackagePin { return []plan.PackagePin{{Name: name, Version: version}} }
	file := func(f plan.FileOp) plan.Operation { return plan.Operation{Kind: plan.OpFile, File: &f} }
	tests := []struct {
		name string
		op   plan.Operation
		want string
	}{
		{"an apt option as a package", apt(plan.PackagesOp{Install: pin("-oDPkg::Pre-Invoke::=touch /tmp/x", "1.0-1")}), `"-oDPkg::Pre-Invoke::=touch /tmp/x" is not a package name apt accepts`},
		{"a shell as a follow-up", file(plan.FileOp{Path: "/etc/ld.so.conf.d/gpuenv.conf", Content: "x\n", Mode: 0o644, After: []string{"sh", "-c", "touch /tmp/x"}}), `follow-up command ["sh" "-c" "touch /tmp/x"] is not one gpuenv runs`},
		{"a path out of /etc", file(plan.FileOp{Path: "/etc/../../../../tmp/x", Content: "x\n"}), `path "/etc/../../../../tmp/x" is not an absolute, clean path`},
		{"a version that is an option", apt(plan.PackagesOp{Install: pin("nvidia-driver-550", "-oAPT::Get::AllowUnauthenticated=true")}), "invalid debian version"},

		{"a removal that is an option", apt(plan.PackagesOp{Remove: []string{"--purge"}}), "is not a package name apt accepts"},
		{"a hold of an option", apt(plan.PackagesOp{Hold: []string{"-q"}}), "is not a package name apt accepts"},
		{"a version with a space", apt(plan.PackagesOp{Install: pin("nvidia-driver-550", "550.54.15-1 nvidia-smi")}), "invalid debian version"},
		{"an upper-case Debian name", apt(plan.PackagesOp{Install: pin("Nvidia", "1.0-1")}), "is not a package name apt accepts"},
		{"a constraint that is not one", apt(plan.PackagesOp{Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Constraint: "; reboot"}}}), "cuda-toolkit-12-4"},
		{"apt extras", apt(plan.PackagesOp{Install: []plan.PackagePin{{Name: "python3-torch", Version: "2.0-1", Extras: []string{"x"}}}}), "only pip installs"},
		{"an apt index", apt(plan.PackagesOp{Install: pin("python3-torch", "2.0-1"), IndexURL: "https://example.com/"}), "which only pip uses"},
		{"an unknown manager", plan.Operation{Kind: plan.OpPackages, Packages: &plan.PackagesOp{Manager: "sh", Install: pin("x", "1")}}, "apt, dnf and pip only"},
		{"nothing to do", apt(plan.PackagesOp{}), "changes nothing"},
		{"a pin twice", apt(plan.PackagesOp{Install: append(pin("a1", "1.0-1"), pin("a1", "2.0-1")...)}), "pins a1 twice"},
		{"installed and removed", apt(plan.PackagesOp{Install: pin("a1", "1.0-1"), Remove: []string{"a1"}}), "both installs and removes a1"},

		{"a dnf option", dnf(plan.PackagesOp{Install: pin("--setopt=gpgcheck=0", "1.0-1")}), "is not a package name dnf accepts"},
		{"an rpm version with a space", dnf(plan.PackagesOp{Install: pin("nvidia-driver", "3:550.54.15-1.el9 x")}), "invalid rpm version"},
		{"an rpm version that is an option", dnf(plan.PackagesOp{Install: pin("nvidia-driver", "-1")}), "invalid rpm version"},

		{"a pip requirement with an option", pip(plan.PackagesOp{Install: pin("torch --index-url=https://evil", "2.5.1")}), "is not a package name pip accepts"},
		{"a pip version that is not PEP 440", pip(plan.PackagesOp{Install: pin("torch", "2.5.1; python_version<'4'")}), "invalid version"},
		{"a pip pin without a version", pip(plan.PackagesOp{Install: pin("torch", "")}), "has no version"},
		{"a pip extra that closes the bracket", pip(plan.PackagesOp{Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1", Extras: []string{"x]"}}}}), "not a valid Python package extra"},
		{"a pip index with credentials", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), IndexURL: "https://u:p@example.com/simple"}), "credentials"},
		{"a pip index over ftp", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), IndexURL: "ftp://example.com/simple"}), "must start with"},
		{"a relative venv", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), Venv: "opt/venv"}), "is not an absolute, clean path"},
		{"an interpreter with ..", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), Python: "/usr/bin/../../bin/sh"}), "is not an absolute, clean path"},
		{"an interpreter with a space", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), Python: "/usr/bin/python3 -c"}), "characters that are not allowed"},
		{"the root as a venv", pip(plan.PackagesOp{Install: pin("torch", "2.5.1"), Venv: "/"}), "the root directory is not one"},
		{"a pip hold", pip(plan.PackagesOp{Hold: []string{"torch"}}), "pip cannot hold"},

		{"a file outside gpuenv's directories", file(plan.FileOp{Path: "/etc/sudoers.d/gpuenv", Content: "ALL ALL=(ALL) NOPASSWD: ALL\n"}), "/etc/sudoers.d/gpuenv is not a file gpuenv manages"},
		{"a unit of another service", file(plan.FileOp{Path: "/etc/systemd/system/ssh.service", Content: "x\n"}), "/etc/systemd/system/ssh.service is not a file gpuenv manages"},
		{"a file below a managed directory", file(plan.FileOp{Path: "/etc/profile.d/x/gpuenv.sh", Content: "x\n"}), "is not a file gpuenv manages"},
		{"the directory itself", file(plan.FileOp{Path: "/etc/profile.d", Remove: true}), "is not a file gpuenv manages"},
		{"a relative path", file(plan.FileOp{Path: "etc/profile.d/gpuenv.sh"}), "is not an absolute, clean path"},
		{"a setuid file", file(plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "x\n", Mode: 0o4755}), "without setuid"},
		{"a file others may write", file(plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "x\n", Mode: 0o666}), "only root may change"},
		{"a file another user owns", file(plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "x\n", Mode: 0o644, UID: 1000}), "owned by 1000:0"},
		{"a setuid merged file", file(plan.FileOp{Path: "/etc/docker/daemon.json", Content: "{}\n", Mode: 0o4600}), "keeps its permission bits and owner, without setuid"},
		{"a merged file of a negative uid", file(plan.FileOp{Path: "/etc/containerd/config.toml", Content: "x\n", Mode: 0o600, UID: -1}), "keeps its permission bits and owner"},
		{"a removal with content", file(plan.FileOp{Path: "/etc/profile.d/gpuenv.sh", Content: "x\n", Remove: true}), "removing /etc/profile.d/gpuenv.sh with content"},
		{"a follow-up with an argument more", file(plan.FileOp{Path: "/etc/ld.so.conf.d/gpuenv.conf", Content: "x\n", After: []string{"ldconfig", "-f", "/tmp/x"}}), "is not one gpuenv runs"},

		{"a group name that is an option", plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "-oroot", Add: []string{"bob"}}}, "group name"},
		{"a member that is an option", plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"-r"}}}, "user name"},
		{"a group created and deleted", plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Create: true, Delete: true}}, "both creates and deletes"},
		{"a group change that changes nothing", plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video"}}, "changes nothing"},
		{"a module gpuenv does not manage", plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "load_module", Module: "evil"}}, `module "evil" is not one gpuenv manages`},
		{"a module option", plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "unload_module", Module: "-a"}}, "is not one gpuenv manages"},
		{"an initramfs with a module", plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "rebuild_initramfs", Module: "nvidia"}}, "names module"},
		{"a unit gpuenv does not manage", plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "ssh.service", Enable: true}}, `unit "ssh.service" is not one gpuenv manages`},
		{"a device that is no GPU id", plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: "GPU-1", Setting: "compute_mode", Value: "default"}}, "is not a GPU identifier"},
		{"an NVML setting gpuenv does not manage", plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: testUUID, Setting: "power_limit", Value: "100"}}, `unknown setting "power_limit"`},
		{"a compute mode the spec does not have", plan.Operation{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: testUUID, Setting: "compute_mode", Value: "exclusive_thread"}}, `compute_mode "exclusive_thread" is not one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := plan.CheckOperation(tt.op)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckOperation = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

const testUUID = "GPU-8b29c1a0-5b3e-4f7a-9d3c-2e1f0a9b8c7d"

// TestCheckOperationAccepts: what the providers write passes, in each
// manager's version syntax.
func TestCheckOperationAccepts(t *testing.T) {
	ops := []plan.Operation{
		aptOp("nvidia-driver-550-open", "550.127.05-0ubuntu1", "libcudnn8", "8.9.7.29-1+cuda12.2", "nvidia-cuda-toolkit", "11.8.89~11.8.0-5~deb12u1", "libx", "1:2.0~rc1-1+deb12u1"),
		pkgOp(plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Constraint: "~12.4"}, {Name: "cuda-drivers"}}}),
		pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"nvidia-driver-535"}, Purge: true, Unhold: []string{"nvidia-driver-535"}}),
		pkgOp(plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "libnvidia-ml1", Version: "535.309.01-1"}}, Hold: []string{"libnvidia-ml1"}, Unhold: []string{"libnvidia-ml1"}}),
		pkgOp(plan.PackagesOp{Manager: "dnf", Install: []plan.PackagePin{{Name: "nvidia-driver-cuda", Version: "3:550.54.15-1.el9"}, {Name: "kernel-devel-5.14.0-427.el9.x86_64", Version: "5.14.0-427.el9"}}}),
		pkgOp(plan.PackagesOp{Manager: "pip", Install: []plan.PackagePin{{Name: "tensorflow", Version: "2.17.0", Extras: []string{"and-cuda"}}}, Python: "/usr/bin/python3", Venv: "/opt/tf", IndexURL: "https://pypi.org/simple"}),
		pkgOp(plan.PackagesOp{Manager: "pip", Install: []plan.PackagePin{{Name: "torch", Version: "2.1.0.dev20230801+cu121"}}, Venv: "/opt/pt", IndexURL: "file:///srv/mirror/pypi/simple"}),
		pkgOp(plan.PackagesOp{Manager: "pip", Remove: []string{"jax_cuda12_plugin"}, Python: "/opt/jax/bin/python3"}),
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/apt/sources.list.d/gpuenv-cuda.sources", Content: "x\n", Mode: 0o644, After: []string{"apt-get", "update"}}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/apt/preferences.d/gpuenv-cuda.pref", Remove: true}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/yum.repos.d/gpuenv-cuda.repo", Content: "x\n", Mode: 0o644, After: []string{"dnf", "makecache"}}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/systemd/system.conf.d/gpuenv.conf", Content: "x\n", Mode: 0o644, After: []string{"systemctl", "daemon-reexec"}}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/systemd/system/gpuenv-compute-mode.service", Remove: true, After: []string{"systemctl", "daemon-reload"}}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/modprobe.d/gpuenv-blacklist-nouveau.conf", Content: "x\n", Mode: 0o644}},
		// An engine's configuration keeps the mode and owner it has.
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/containerd/config.toml", Content: "x\n", Mode: 0o600}},
		{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/docker/daemon.json", Content: "{}\n", Mode: 0o660, UID: 1000, GID: 999}},
		{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "render", Create: true, System: true, Add: []string{"alice", "svc_ml$"}}},
		{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "gpu", Delete: true}},
		{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "rebuild_initramfs"}},
		{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: "unload_module", Module: "nvidia-uvm"}},
		{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true, Now: true}},
		{Kind: plan.OpDevice, Device: &plan.DeviceOp{UUID: testUUID, Index: 3, Setting: "persistence_mode", Value: "enabled"}},
	}
	for i, op := range ops {
		if err := plan.CheckOperation(op); err != nil {
			t.Errorf("operation %d: %v", i+1, err)
		}
	}
}

// shownPlan is a plan as the providers make it: steps whose shown values
// match their package operations, batched.
func shownPlan() *plan.Plan {
	steps := []plan.Step{
		{Address: "repository.cuda", Action: plan.Create, After: map[string]string{"url": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"},
			Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/apt/sources.list.d/gpuenv-cuda.sources", Content: "x\n", Mode: 0o644, After: []string{"apt-get", "update"}}}}},
		{Address: "driver", Action: plan.Create, After: map[string]string{"version": "550.127.05-0ubuntu1", "packages": "nvidia-driver-550-open"},
			Operations: []plan.Operation{aptOp("nvidia-driver-550-open", "550.127.05-0ubuntu1")}},
		{Address: "driver.hold", Action: plan.Create, Before: map[string]string{"held": ""}, After: map[string]string{"held": "nvidia-driver-550-open"},
			Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550-open"}})}},
		{Address: "cuda", Action: plan.Create, After: map[string]string{"version": "12.4.1", "package": "cuda-toolkit-12-4=12.4.1-1"},
			Operations: []plan.Operation{aptOp("cuda-toolkit-12-4", "12.4.1-1")}},
		{Address: "cudnn", Action: plan.Create, After: map[string]string{"version": plan.KnownAfterApply, "packages": "libcudnn9-cuda-12, libcudnn9-dev-cuda-12"},
			Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "libcudnn9-cuda-12", Constraint: "9.*"}, {Name: "libcudnn9-dev-cuda-12", Constraint: "9.*"}}})}},
		{Address: "framework.tensorflow", Action: plan.Create, After: map[string]string{"version": "2.17.0", "index_url": "https://pypi.org/simple", "extras": "and-cuda"},
			Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/tf", Python: "/usr/bin/python3", IndexURL: "https://pypi.org/simple",
				Install: []plan.PackagePin{{Name: "tensorflow", Version: "2.17.0", Extras: []string{"and-cuda"}}}})}},
		{Address: "framework.jax", Action: plan.Delete, Before: map[string]string{"package": "python3-jax=0.4.30-1"},
			Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"python3-jax"}})}},
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: steps}
	p.Transactions = Batch(p.Steps)
	return p
}

// TestValidateShownValues: a step whose operations do something else
// than it shows, and a transaction that is not the union of its steps'
// package operations, are refused.
func TestValidateShownValues(t *testing.T) {
	tx := func(p *plan.Plan) *plan.PackagesOp { return &p.Transactions[0].Op }
	checkRefused(t, shownPlan, "the plan as made", []planEdit{
		{"another version in the step", func(p *plan.Plan) {
			p.Steps[1].Operations[0].Packages.Install[0].Version = "550.54.15-0ubuntu1"
			tx(p).Install[0].Version = "550.54.15-0ubuntu1"
		}, "step driver: it shows version 550.127.05-0ubuntu1 but installs nvidia-driver-550-open 550.54.15-0ubuntu1"},
		{"another version in the transaction only", func(p *plan.Plan) { tx(p).Install[0].Version = "550.54.15-0ubuntu1" }, "transaction 1 is not the union of the package operations of driver, driver.hold, cuda, cudnn"},
		{"another version shown for the toolkit package", func(p *plan.Plan) { p.Steps[3].After["package"] = "cuda-toolkit-12-4=12.4.0-1" }, "it shows version 12.4.0-1 but installs cuda-toolkit-12-4 12.4.1-1"},
		{"a version known after apply made exact", func(p *plan.Plan) {
			p.Steps[4].Operations[0].Packages.Install[0].Version = "9.0.0.312-1"
			tx(p).Install[2].Version = "9.0.0.312-1"
		}, "it shows version (known after apply) but installs libcudnn9-cuda-12 9.0.0.312-1"},
		{"no version shown", func(p *plan.Plan) { delete(p.Steps[1].After, "version") }, "it installs nvidia-driver-550-open but shows no version"},
		{"another package", func(p *plan.Plan) {
			p.Steps[1].Operations[0].Packages.Install[0].Name = "nvidia-driver-535"
			tx(p).Install[0].Name = "nvidia-driver-535"
		}, "it shows the packages nvidia-driver-550-open but installs nvidia-driver-535"},
		{"a package more in the transaction", func(p *plan.Plan) {
			tx(p).Install = append(tx(p).Install, plan.PackagePin{Name: "openssh-server", Version: "1:9.2p1-2"})
		}, "is not the union"},
		{"a hold more in the transaction", func(p *plan.Plan) { tx(p).Hold = append(tx(p).Hold, "nvidia-driver-535") }, "is not the union"},
		{"a downgrade allowed in the transaction", func(p *plan.Plan) { tx(p).AllowDowngrade = true }, "is not the union"},
		{"another hold", func(p *plan.Plan) {
			p.Steps[2].Operations[0].Packages.Hold = []string{"cuda-toolkit-12-4"}
			tx(p).Hold = []string{"cuda-toolkit-12-4"}
		}, `it shows "nvidia-driver-550-open" held but holds cuda-toolkit-12-4`},
		{"another index", func(p *plan.Plan) {
			p.Steps[5].Operations[0].Packages.IndexURL = "https://evil.example.com/simple"
			p.Transactions[1].Op.IndexURL = "https://evil.example.com/simple"
		}, `it shows the index "https://pypi.org/simple" but installs from "https://evil.example.com/simple"`},
		{"other extras", func(p *plan.Plan) {
			p.Steps[5].Operations[0].Packages.Install[0].Extras = nil
			p.Transactions[1].Op.Install[0].Extras = nil
		}, `it shows the extras "and-cuda" but installs tensorflow with ""`},
		{"another package removed", func(p *plan.Plan) {
			p.Steps[6].Operations[0].Packages.Remove = []string{"openssh-server"}
			p.Transactions[2].Op.Remove = []string{"openssh-server"}
		}, "it shows python3-jax removed but removes openssh-server"},
		{"a step left out of its transaction", func(p *plan.Plan) { p.Transactions[0].Steps = []string{"driver", "cuda", "cudnn"} }, "step driver.hold operation 1: transaction 1 does not list the step"},
		{"a step more in a transaction", func(p *plan.Plan) {
			p.Transactions[1].Steps = append(p.Transactions[1].Steps, "driver")
		}, "transaction 2 lists the steps framework.tensorflow, driver, but carries out the operations of framework.tensorflow"},
		{"a transaction no operation names", func(p *plan.Plan) {
			p.Transactions = append(p.Transactions, plan.Transaction{ID: 4, Steps: []string{"cuda"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "openssh-server", Version: "1:9.2p1-2"}}}})
		}, "transaction 4 carries out no step's operation"},
		{"transactions out of order", func(p *plan.Plan) {
			p.Transactions[1], p.Transactions[2] = p.Transactions[2], p.Transactions[1]
			p.Transactions[1].ID, p.Transactions[2].ID = 2, 3
			p.Steps[5].Operations[0].Transaction, p.Steps[6].Operations[0].Transaction = 3, 2
		}, "transaction 3 is out of order"},
		{"a transaction run early", func(p *plan.Plan) {
			// cuda's packages would go in with the driver's, before
			// anything between them.
			p.Steps = append(p.Steps[:2], append([]plan.Step{{Address: "kernel.nouveau", Action: plan.Create, Operations: []plan.Operation{kernelOp("rebuild_initramfs")}}}, p.Steps[2:]...)...)
		}, "transaction 1 is out of order"},
		{"a transaction's own value refused", func(p *plan.Plan) { tx(p).Install[0].Name = "-oDPkg::Pre-Invoke::=id" }, `transaction 1: "-oDPkg::Pre-Invoke::=id" is not a package name apt accepts`},
	})
}

// TestReadSavedPlanRefusesEdits: the edits the issue found applied are
// refused when the saved plan is read.
func TestReadSavedPlanRefusesEdits(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSavedPlan(&buf, shownPlan(), fingerprintFacts(), nil, stackKinds()); err != nil {
		t.Fatal(err)
	}
	saved := buf.String()
	tests := []struct {
		name, old, new, want string
	}{
		{"an apt option as a package", `"name": "nvidia-driver-550-open"`, `"name": "-oDPkg::Pre-Invoke::=touch /tmp/x"`, "is not a package name apt accepts"},
		{"a shell as a follow-up", `"update"`, `"update", "; sh"`, "is not one gpuenv runs"},
		{"a path out of the managed directory", `"/etc/apt/sources.list.d/gpuenv-cuda.sources"`, `"/etc/../../../../tmp/x"`, "is not an absolute, clean path"},
		{"a version the step does not show", `"version": "12.4.1-1"`, `"version": "12.4.0-1"`, "it shows version 12.4.1-1 but installs cuda-toolkit-12-4 12.4.0-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := strings.ReplaceAll(saved, tt.old, tt.new)
			if edited == saved {
				t.Fatalf("%s is not in the saved plan", tt.old)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(edited), &m); err != nil {
				t.Fatalf("edit broke the JSON: %v", err)
			}
			_, err := ReadSavedPlan(strings.NewReader(edited))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadSavedPlan = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
