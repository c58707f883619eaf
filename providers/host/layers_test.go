package host_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpuenv/gpuenv"

// TestHostAccessImportsNoProvider holds host access (providers/host and
// the packages under it) to its row of the design's package table: it
// reads and changes the host for whoever asks (apply among them, which
// may import nothing else of the providers), so it reaches no resource
// kind, observer or probe, and neither apply nor the command. Test files
// are left out: a test may lay out a root with an observer's help.
func TestHostAccessImportsNoProvider(t *testing.T) {
	c := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./...")
	out, err := c.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps ./providers/host/...: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	for _, p := range []string{module + "/providers/host", module + "/providers/host/pkgkit", module + "/providers/host/cdi"} {
		if !slices.Contains(deps, p) {
			t.Fatalf("go list -deps ./providers/host/... does not list %s: %q", p, deps)
		}
	}
	for _, p := range deps {
		host := p == module+"/providers/host" || strings.HasPrefix(p, module+"/providers/host/")
		if (p == module+"/providers" || strings.HasPrefix(p, module+"/providers/")) && !host {
			t.Errorf("host access reaches %s: it may import the planner's data and other host access, never a resource kind, an observer or a probe", p)
		}
		for _, banned := range []string{"/apply", "/cmd"} {
			if p == module+banned || strings.HasPrefix(p, module+banned+"/") {
				t.Errorf("host access reaches %s, a layer above it", p)
			}
		}
	}
}
