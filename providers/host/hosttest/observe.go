package hosttest

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// ObserveFixtures is a provider's observation test over the shared
// fixtures: for each fixture of want, in name order, a subtest lays it out,
// reads it with observe, and compares what observe returns with want's. A
// fixture is a whole machine, so a warning while reading it fails too.
func ObserveFixtures[T any](t *testing.T, want map[string]T, observe func(fixture string, h *host.Host) (T, []facts.Warning)) {
	t.Helper()
	for _, fixture := range slices.Sorted(maps.Keys(want)) {
		t.Run(fixture, func(t *testing.T) {
			got, warns := observe(fixture, Fixture(t, fixture))
			if len(warns) != 0 {
				t.Errorf("warnings: %v", warns)
			}
			if diff := cmp.Diff(want[fixture], got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}
