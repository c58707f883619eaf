package hosttest

import (
	"maps"
	"slices"
	"strings"
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
			NoWarnings(t, warns)
			if diff := cmp.Diff(want[fixture], got); diff != "" {
				t.Errorf("Observe (-want +got):\n%s", diff)
			}
		})
	}
}

// NoWarnings checks that an observation read everything it looked at.
func NoWarnings(t *testing.T, warns []facts.Warning) {
	t.Helper()
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
}

// CheckWarnings checks that warns are exactly one warning for each path of
// want, whose message contains want's text for the path.
func CheckWarnings(t *testing.T, warns []facts.Warning, want map[string]string) {
	t.Helper()
	if len(warns) != len(want) {
		t.Errorf("warnings: %v", warns)
	}
	for _, w := range warns {
		if s, ok := want[w.Path]; !ok || !strings.Contains(w.Message, s) {
			t.Errorf("unexpected warning %+v", w)
		}
	}
}
