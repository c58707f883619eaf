package applytest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// TestAptCachePolicyParses checks the fake's apt-cache policy against
// the planner's own parser.
func TestAptCachePolicyParses(t *testing.T) {
	f, err := BuildHost(TempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &Runner{Env: f.Env}
	if err := r.Run(context.Background(), host.Command{Argv: []string{"chroot", f.Root, "apt-cache", "policy", "libnvidia-ml1", "nvidia-smi", "no-such"}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	pols, err := pkgdb.ParseAptPolicy(out.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(pols) != 2 {
		t.Fatalf("policies: %+v", pols)
	}
	lib := pols[0]
	if lib.Installed != DriverOld || lib.Candidate != DriverNew || strings.Join(lib.Installable(), " ") != DriverNew {
		t.Errorf("libnvidia-ml1: %+v installable %v", lib, lib.Installable())
	}
	if got := strings.Join(pols[1].Installable(), " "); got != DriverNew+" "+DriverOld {
		t.Errorf("nvidia-smi installable: %s", got)
	}
}
