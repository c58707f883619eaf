package apply_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// upgradePlan upgrades the installed driver packages to version, in one
// apt transaction that releases the hold on libnvidia-ml1 and holds it
// again.
func upgradePlan(version string, names ...string) *plan.Plan {
	var pins []plan.PackagePin
	for _, n := range names {
		pins = append(pins, plan.PackagePin{Name: n, Version: version})
	}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
		Address: "driver", Action: plan.Update, Reason: "the driver is older than the spec's",
		After: map[string]string{"version": version, "packages": strings.Join(names, ", "), "held": "libnvidia-ml1"},
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
			Manager: "apt", Unhold: []string{"libnvidia-ml1"}, Install: pins, Hold: []string{"libnvidia-ml1"},
		}}},
	}}}
	p.Transactions = planner.Batch(p.Steps)
	return p
}

// An upgrade of installed packages that apt carries out with nothing
// else is prepared without a dry run: apt-get is told to refuse anything
// more (--trivial-only) and does not need to. Rollback restores the host.
func TestTrivialUpgradeWithoutDryRun(t *testing.T) {
	fx := newFixture(t)
	before := fx.snapshot()
	calls := callsOf(t, fx)
	fx.appliesIndexed(upgradePlan(applytest.DriverNew, "libnvidia-ml1", "nvidia-smi"))
	got := calls()
	if n := count(got, "apt-get", "-s"); n != 0 {
		t.Errorf("%d dry runs, want none", n)
	}
	if n := count(got, "apt-get", "--trivial-only"); n != 1 {
		t.Errorf("%d apt-get --trivial-only calls, want 1", n)
	}
	if journal := fx.read("/var/lib/gpuenv/generations/1/journal"); strings.Count(journal, `"event":"begin"`) != 1 {
		t.Errorf("the journal has %d begin records, want 1:\n%s", strings.Count(journal, `"event":"begin"`), journal)
	}
	fx.rollsBack(before, "after rolling back the upgrade")
}

// An upgrade that apt would carry out only with another package (a new
// dependency) is refused by apt as not trivial before it changes
// anything: the hold released for it is set again, the transaction is
// prepared again with a dry run, which names the new package, its new
// inverse is journaled, and it runs. Rollback, from the second inverse
// only, removes the new package and holds libnvidia-ml1 again.
func TestNotTrivialUpgradeIsPreparedAgain(t *testing.T) {
	fx := newFixture(t)
	const newer = "535.400.01-1"
	if err := applytest.WriteArchive(fx.Archive,
		applytest.Deb{Name: "libnvidia-ml1", Version: newer, Depends: "nvidia-support", Files: map[string]string{"/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1": "NVML " + newer + "\n"}},
		applytest.Deb{Name: "nvidia-support", Version: "20220217+3~deb12u1", Files: map[string]string{"/usr/share/doc/nvidia-support/copyright": "x\n"}},
	); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	calls := callsOf(t, fx)
	fx.appliesIndexed(upgradePlan(newer, "libnvidia-ml1"))
	if !strings.Contains(fx.out.String(), "apt would change more packages than the transaction names: preparing it again with a dry run") {
		t.Errorf("apply does not say it prepared the transaction again:\n%s", fx.out.String())
	}
	got := calls()
	if n, m := count(got, "apt-get", "--trivial-only"), count(got, "apt-get", "-s"); n != 1 || m != 1 {
		t.Errorf("%d apt-get --trivial-only calls and %d dry runs, want one of each", n, m)
	}
	if status := fx.read("/var/lib/dpkg/status"); !strings.Contains(status, "Package: nvidia-support\nStatus: install ok installed") ||
		!strings.Contains(status, "Package: libnvidia-ml1\nStatus: hold ok installed\nVersion: "+newer) {
		t.Errorf("dpkg status after the upgrade:\n%s", status)
	}
	journal := fx.read("/var/lib/gpuenv/generations/1/journal")
	if n := strings.Count(journal, `"event":"begin"`); n != 2 || !strings.Contains(journal, `"name":"nvidia-support"`) {
		t.Errorf("the journal has %d begin records, want 2, the second naming nvidia-support:\n%s", n, journal)
	}
	fx.rollsBack(before, "after rolling back the upgrade prepared twice")
	if journal := fx.read("/var/lib/gpuenv/generations/2/journal"); strings.Count(journal, `"event":"undo"`) != 1 {
		t.Errorf("the rollback undid the operation %d times, want once:\n%s", strings.Count(journal, `"event":"undo"`), journal)
	}
}
