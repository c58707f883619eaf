package ansible

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// TestGatherPlaybook: gather.yml saves each host's observation, named by
// the host, in the directory plan --facts reads, with its last apply as
// the host's status file says; plan --facts plans them as the hosts they
// came from, and --canaries prefers the host whose last apply succeeded.
// The hosts are root directories of the test's own, reached by the local
// connection through the module's root option.
func TestGatherPlaybook(t *testing.T) {
	needAnsible(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuenv")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/gpuenv")
	build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Two hosts alike; node2's last apply succeeded, as its status file,
	// written by gpuenv's own encoder, says.
	inv := map[string]any{}
	for _, node := range []string{"node1", "node2"} {
		root := filepath.Join(dir, "roots", node)
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		// A root file system says what it is; gpuenv refuses one that
		// does not.
		if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=debian\nVERSION_ID=\"12\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		inv[node] = map[string]any{"ansible_connection": "local", "gpuenv_root": root, "gpuenv_executable": bin}
	}
	state := filepath.Join(dir, "roots", "node2", "var/lib/gpuenv")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	st := &plan.ApplyStatus{Generation: 2, Kind: plan.KindApply, Status: plan.StatusApplied, Updated: time.Now().UTC()}
	data, err := st.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, plan.StatusFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	facts := filepath.Join(dir, "facts")
	// JSON is YAML: the inventory is written as JSON.
	invData, _ := json.Marshal(map[string]any{"gpu": map[string]any{"hosts": inv}})
	invFile := filepath.Join(dir, "inventory.yml")
	if err := os.WriteFile(invFile, invData, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ansible-playbook", "-i", invFile, "gpuenv.gpuenv.gather", "-e", "gpuenv_facts_dir="+facts, "-e", "ansible_become=false")
	cmd.Env = append(os.Environ(),
		"ANSIBLE_COLLECTIONS_PATH="+collections(t),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3",
		"ANSIBLE_RETRY_FILES_ENABLED=false",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ansible-playbook gather: %v\n%s", err, out)
	}
	for _, node := range []string{"node1", "node2"} {
		doc, err := os.ReadFile(filepath.Join(facts, node+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := fleet.Decode(doc); err != nil {
			t.Errorf("%s.json is no observation document: %v", node, err)
		}
		if has := strings.Contains(string(doc), `"last_apply"`); has != (node == "node2") {
			t.Errorf("%s.json: last_apply there %v", node, has)
		}
	}

	spec := filepath.Join(dir, "gpuenv.hcl")
	if err := os.WriteFile(spec, []byte(environmentSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "plan", "--json", "--hosts", "--canaries", "1", "--facts", facts, spec).Output()
	if err != nil {
		t.Fatalf("plan --facts: %v\n%s\n%s", err, out, stderrOf(err))
	}
	var d struct {
		Groups []fleet.PlanGroup `json:"groups"`
		Hosts  []fleet.Host      `json:"hosts"`
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("plan --facts --json: %v\n%s", err, out)
	}
	var rows []string
	for _, h := range d.Hosts {
		rows = append(rows, h.Name+" "+h.Outcome.String()+" "+h.LastApply)
	}
	if want := []string{"node1 change ", "node2 change apply applied"}; !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	if len(d.Groups) != 1 || d.Groups[0].Hosts != 2 || !slices.Equal(d.Groups[0].Canaries, []string{"node2"}) {
		t.Errorf("groups %+v; want one of both hosts, node2 to try first", d.Groups)
	}
}
