package apply_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
)

// TestValidatePlanShownValues: apply refuses a plan whose transaction
// installs another version than its steps show, as a saved plan edited
// after it was made would.
func TestValidatePlanShownValues(t *testing.T) {
	if err := apply.ValidatePlan(applytest.StandardPlan("file:///srv/index")); err != nil {
		t.Fatalf("the standard plan: %v", err)
	}
	p := applytest.StandardPlan("file:///srv/index")
	p.Transactions[0].Op.Install[0].Version = applytest.DriverOld
	if err := apply.ValidatePlan(p); err == nil || !strings.Contains(err.Error(), "transaction 1 is not the union of the package operations of driver, cuda") {
		t.Errorf("another version in the transaction: %v", err)
	}
	p = applytest.StandardPlan("file:///srv/index")
	p.Steps[0].Operations[0].Packages.Install[0].Version = applytest.DriverOld
	p.Transactions[0].Op.Install[0].Version = applytest.DriverOld
	if err := apply.ValidatePlan(p); err == nil || !strings.Contains(err.Error(), "step driver: it shows version "+applytest.DriverNew) {
		t.Errorf("another version in the step: %v", err)
	}
}
