package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/plan"
)

func aptOp(install ...string) plan.Operation {
	op := &plan.PackagesOp{Manager: "apt"}
	for i := 0; i+1 < len(install); i += 2 {
		op.Install = append(op.Install, plan.PackagePin{Name: install[i], Version: install[i+1]})
	}
	return plan.Operation{Kind: plan.OpPackages, Packages: op}
}

func pkgOp(p plan.PackagesOp) plan.Operation {
	return plan.Operation{Kind: plan.OpPackages, Packages: &p}
}

func fileOp(path string) plan.Operation {
	return plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: path, Content: "x\n", Mode: 0o644}}
}

func kernelOp(action string) plan.Operation {
	return plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: plan.KernelAction(action)}}
}

func withOps(addr string, ops ...plan.Operation) plan.Step {
	return plan.Step{Address: addr, Action: plan.Create, Operations: ops}
}

// transactionsOf lists each step's operations' transaction numbers.
func transactionsOf(steps []plan.Step) map[string][]int {
	out := map[string][]int{}
	for _, s := range steps {
		for _, op := range s.Operations {
			out[s.Address] = append(out[s.Address], op.Transaction)
		}
	}
	return out
}

func TestBatch(t *testing.T) {
	tests := []struct {
		name    string
		steps   []plan.Step
		wantTx  []plan.Transaction
		wantOps map[string][]int
	}{
		{
			name: "consecutive apt steps become one transaction",
			steps: []plan.Step{
				withOps("kernel.headers", aptOp("linux-headers-5.15.0-105-generic", "5.15.0-105.115")),
				withOps("driver", aptOp("nvidia-driver-550-open", "550.54.15-0ubuntu1")),
				withOps("driver.hold", pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550-open"}})),
				withOps("cuda", aptOp("cuda-toolkit-12-4", "12.4.1-1")),
			},
			wantTx: []plan.Transaction{{ID: 1, Steps: []string{"kernel.headers", "driver", "driver.hold", "cuda"}, Op: plan.PackagesOp{
				Manager: "apt",
				Install: []plan.PackagePin{
					{Name: "linux-headers-5.15.0-105-generic", Version: "5.15.0-105.115"},
					{Name: "nvidia-driver-550-open", Version: "550.54.15-0ubuntu1"},
					{Name: "cuda-toolkit-12-4", Version: "12.4.1-1"},
				},
				Hold: []string{"nvidia-driver-550-open"},
			}}},
			wantOps: map[string][]int{"kernel.headers": {1}, "driver": {1}, "driver.hold": {1}, "cuda": {1}},
		},
		{
			name: "another kind of operation in between splits them",
			steps: []plan.Step{
				withOps("driver.purge", pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"nvidia-driver-535"}, Purge: true})),
				withOps("kernel.nouveau", fileOp("/etc/modprobe.d/gpuenv-nouveau.conf"), kernelOp("rebuild_initramfs")),
				withOps("driver", aptOp("nvidia-driver-550", "550.54.15-0ubuntu1")),
				withOps("environment", fileOp("/etc/profile.d/gpuenv.sh")),
				withOps("framework.pytorch", pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/pt", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}}})),
			},
			wantTx: []plan.Transaction{
				{ID: 1, Steps: []string{"driver.purge"}, Op: plan.PackagesOp{Manager: "apt", Remove: []string{"nvidia-driver-535"}, Purge: true}},
				{ID: 2, Steps: []string{"driver"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1"}}}},
				{ID: 3, Steps: []string{"framework.pytorch"}, Op: plan.PackagesOp{Manager: "pip", Venv: "/opt/pt", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}}}},
			},
			wantOps: map[string][]int{"driver.purge": {1}, "kernel.nouveau": {0, 0}, "driver": {2}, "environment": {0}, "framework.pytorch": {3}},
		},
		{
			name: "managers and environments are not mixed",
			steps: []plan.Step{
				withOps("cudnn", aptOp("libcudnn9-cuda-12", "9.1.0.70-1")),
				withOps("framework.jax", pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/a", Install: []plan.PackagePin{{Name: "jax", Version: "0.4.30"}}})),
				withOps("framework.pytorch", pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/b", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1"}}})),
				withOps("framework.tensorflow", pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/b", Install: []plan.PackagePin{{Name: "tensorflow", Version: "2.17.0"}}})),
			},
			wantTx: []plan.Transaction{
				{ID: 1, Steps: []string{"cudnn"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "libcudnn9-cuda-12", Version: "9.1.0.70-1"}}}},
				{ID: 2, Steps: []string{"framework.jax"}, Op: plan.PackagesOp{Manager: "pip", Venv: "/opt/a", Install: []plan.PackagePin{{Name: "jax", Version: "0.4.30"}}}},
				{ID: 3, Steps: []string{"framework.pytorch", "framework.tensorflow"}, Op: plan.PackagesOp{Manager: "pip", Venv: "/opt/b", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1"}, {Name: "tensorflow", Version: "2.17.0"}}}},
			},
			wantOps: map[string][]int{"cudnn": {1}, "framework.jax": {2}, "framework.pytorch": {3}, "framework.tensorflow": {3}},
		},
		{
			name: "operations that disagree are not merged",
			steps: []plan.Step{
				withOps("driver.purge", pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"libnvidia-compute-550"}})),
				withOps("driver", aptOp("libnvidia-compute-550", "550.54.15-0ubuntu1")),
				withOps("cuda", aptOp("libnvidia-compute-550", "550.90.07-0ubuntu1")),
			},
			wantTx: []plan.Transaction{
				{ID: 1, Steps: []string{"driver.purge"}, Op: plan.PackagesOp{Manager: "apt", Remove: []string{"libnvidia-compute-550"}}},
				{ID: 2, Steps: []string{"driver"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "libnvidia-compute-550", Version: "550.54.15-0ubuntu1"}}}},
				{ID: 3, Steps: []string{"cuda"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "libnvidia-compute-550", Version: "550.90.07-0ubuntu1"}}}},
			},
			wantOps: map[string][]int{"driver.purge": {1}, "driver": {2}, "cuda": {3}},
		},
		{
			name: "a purge and a plain removal stay apart; a downgrade spreads",
			steps: []plan.Step{
				withOps("driver.purge", pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"a"}, Purge: true})),
				withOps("driver", pkgOp(plan.PackagesOp{Manager: "apt", Remove: []string{"b"}})),
				withOps("driver.hold", pkgOp(plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "c", Version: "1"}}, AllowDowngrade: true})),
			},
			wantTx: []plan.Transaction{
				{ID: 1, Steps: []string{"driver.purge"}, Op: plan.PackagesOp{Manager: "apt", Remove: []string{"a"}, Purge: true}},
				{ID: 2, Steps: []string{"driver", "driver.hold"}, Op: plan.PackagesOp{Manager: "apt", Remove: []string{"b"}, Install: []plan.PackagePin{{Name: "c", Version: "1"}}, AllowDowngrade: true}},
			},
			wantOps: map[string][]int{"driver.purge": {1}, "driver": {2}, "driver.hold": {2}},
		},
		{
			name: "two operations of one step",
			steps: []plan.Step{
				withOps("driver", aptOp("nvidia-driver-550", "550.54.15-0ubuntu1"), pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550"}})),
			},
			wantTx: []plan.Transaction{
				{ID: 1, Steps: []string{"driver"}, Op: plan.PackagesOp{Manager: "apt", Install: []plan.PackagePin{{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1"}}, Hold: []string{"nvidia-driver-550"}}},
			},
			wantOps: map[string][]int{"driver": {1, 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Batch(tt.steps)
			if diff := cmp.Diff(tt.wantTx, got); diff != "" {
				t.Errorf("transactions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOps, transactionsOf(tt.steps)); diff != "" {
				t.Errorf("operations' transactions (-want +got):\n%s", diff)
			}
		})
	}
}

// The persistence daemon waits for the toolkit, so that its service
// operation does not split the driver's and the toolkit's transaction.
func TestOrderKeepsTransactionsWhole(t *testing.T) {
	steps, err := Order([]plan.Step{
		withOps("cuda", aptOp("cuda-toolkit-12-4", "12.4.1-1")),
		withOps("driver.persistence", plan.Operation{Kind: plan.OpService, Service: &plan.ServiceOp{Unit: "nvidia-persistenced.service", Enable: true}}),
		withOps("driver", aptOp("nvidia-driver-550", "550.54.15-0ubuntu1")),
		withOps("driver.hold", pkgOp(plan.PackagesOp{Manager: "apt", Hold: []string{"nvidia-driver-550"}})),
	}, stackKinds())
	if err != nil {
		t.Fatal(err)
	}
	if txs := Batch(steps); len(txs) != 1 {
		t.Errorf("%d transactions for %v, want 1", len(txs), addresses(steps))
	}
}

// Merging must not change the steps' own operations, which the human plan
// shows per step.
func TestBatchKeepsStepOperations(t *testing.T) {
	steps := []plan.Step{
		withOps("driver", aptOp("nvidia-driver-550", "550.54.15-0ubuntu1")),
		withOps("cuda", aptOp("cuda-toolkit-12-4", "12.4.1-1")),
	}
	Batch(steps)
	if n := len(steps[0].Operations[0].Packages.Install); n != 1 {
		t.Errorf("driver's own operation has %d pins after batching, want 1", n)
	}
}
