package apply_test

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// A pin whose version the planner could not know (its repository was
// configured by the same plan) gets the newest version apt lists that
// satisfies the constraint, and rollback removes it again.
func TestApplyPinsVersionKnownAfterApply(t *testing.T) {
	for _, tc := range []struct {
		constraint, want, err string
	}{
		{constraint: "12.4", want: "12.4.1-1"},
		{constraint: "", want: "12.4.1-1"},
		{constraint: "12.6", err: `apt lists no version of cuda-toolkit-12-4 that satisfies "12.6"`},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			fx := newFixture(t)
			before := fx.snapshot()
			p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
				Address: "cuda", Action: plan.Create, Reason: "CUDA 12.4 is not installed",
				Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: &plan.PackagesOp{
					Manager: "apt",
					Install: []plan.PackagePin{{Name: "cuda-toolkit-12-4", Constraint: tc.constraint}},
				}}},
			}}}
			res := fx.apply(p, fx.opts(nil))
			if tc.err != "" {
				if res.Status == apply.StatusApplied || res.Failed == nil || !strings.Contains(res.Failed.Error, tc.err) {
					t.Fatalf("status %s, failed %+v; want a failure saying %q:\n%s", res.Status, res.Failed, tc.err, fx.out.String())
				}
				fx.same(before, "after the refused pin")
				return
			}
			if res.Status != apply.StatusApplied {
				t.Fatalf("status %s:\n%s", res.Status, fx.out.String())
			}
			if got := fx.read("/var/lib/dpkg/status"); !strings.Contains(got, "Package: cuda-toolkit-12-4\nStatus: install ok installed\nVersion: "+tc.want) {
				t.Errorf("cuda-toolkit-12-4 not installed at %s:\n%s", tc.want, got)
			}
			if journal := fx.read("/var/lib/gpuenv/generations/1/journal"); !strings.Contains(journal, `"version":"`+tc.want+`"`) {
				t.Errorf("the journal does not record the pinned version %s:\n%s", tc.want, journal)
			}
			fx.rollsBack(before, "after rollback")
		})
	}
}
