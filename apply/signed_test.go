package apply_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// Ubuntu's signed module packages are installed in the driver's own
// transaction, each at its own version (the kernel's, not the driver's),
// as the driver provider plans them: the plan passes validation, apply
// installs them all, and rollback takes them away with the driver's
// upgrade, leaving the host as it was.
func TestSignedModulesInstallAndRollBack(t *testing.T) {
	fx := newFixture(t)
	const rel, lrm = "5.15.0-105-generic", "5.15.0-105.115"
	mod, sig, meta := "linux-modules-nvidia-535-"+rel, "linux-signatures-nvidia-"+rel, "linux-modules-nvidia-535-generic"
	if err := applytest.WriteArchive(fx.Archive,
		applytest.Deb{Name: sig, Version: lrm, Files: map[string]string{"/usr/lib/linux/nvidia/" + rel + "/nvidia.ko.sig": "signature\n"}},
		applytest.Deb{Name: mod, Version: lrm, Depends: sig + " (= " + lrm + ")", Files: map[string]string{"/lib/modules/" + rel + "/kernel/nvidia-535/nvidia.ko": "module\n"}},
		applytest.Deb{Name: meta, Version: lrm, Depends: mod + " (= " + lrm + ")"},
	); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()

	p := upgradePlan(applytest.DriverNew, "libnvidia-ml1", "nvidia-smi")
	signed := []planner.SignedPackage{{Name: mod, Version: lrm}, {Name: sig, Version: lrm}, {Name: meta, Version: lrm}}
	step := &p.Steps[0]
	step.After[plan.AfterSignedModules] = planner.ShownPins(signed)
	for _, s := range signed {
		step.Operations[0].Packages.Install = append(step.Operations[0].Packages.Install, plan.PackagePin{Name: s.Name, Version: s.Version})
	}
	p.Transactions = planner.Batch(p.Steps)
	if err := p.Validate(); err != nil {
		t.Fatalf("the plan as the driver provider makes it: %v", err)
	}

	fx.applies(p)
	after := fx.snapshot()
	for _, s := range signed {
		if got := after.Packages[s.Name]; !strings.HasPrefix(got, lrm+" ") || !strings.Contains(got, "installed") {
			t.Errorf("after apply: %s %q, want %s installed", s.Name, got, lrm)
		}
	}
	if !fx.exists("/lib/modules/" + rel + "/kernel/nvidia-535/nvidia.ko") {
		t.Error("after apply: the signed module is not on disk")
	}
	fx.rollsBack(before, "after rolling back the driver with its signed modules")
}
