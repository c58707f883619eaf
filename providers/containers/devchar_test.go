package containers_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	gpuapply "github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

const devCharSpec = repo + "container_toolkit {\n  cdi = false\n}\n"

// devCharStep is the plan's dev_char step, or nil.
func devCharStep(p *plan.Plan) *plan.Step {
	i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Address == containers.DevCharAddress })
	if i < 0 {
		return nil
	}
	return &p.Steps[i]
}

// links are a step's symlink operations, "link -> target".
func links(s *plan.Step) []string {
	var out []string
	for _, op := range s.Operations {
		if f := op.File; f != nil && f.Symlink != "" {
			out = append(out, f.Path+" -> "+f.Symlink)
		}
	}
	return out
}

// The container toolkit block links every NVIDIA device node containers
// get in /dev/char, as the toolkit's create-dev-char-symlinks names them
// (MAJOR:MINOR, pointing at the node), leaves out the NVSwitches' nodes
// as it does, and writes NVIDIA's udev rule so that the links come back
// whenever the driver loads.
func TestDevCharPlan(t *testing.T) {
	dir := root(t, true)
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(dir, "dev/nvidia-nvswitch0"), syscall.S_IFCHR|0o666, int(509<<8)); err != nil {
			t.Fatal(err)
		}
	}
	p := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir))
	s := devCharStep(p)
	if s == nil || s.Action != plan.Create {
		t.Fatalf("no dev_char step to create: %q", addresses(p))
	}
	want := []string{
		"/dev/char/508:0 -> /dev/nvidia-uvm",
		"/dev/char/508:1 -> /dev/nvidia-uvm-tools",
		"/dev/char/195:0 -> /dev/nvidia0",
		"/dev/char/195:1 -> /dev/nvidia1",
		"/dev/char/195:255 -> /dev/nvidiactl",
	}
	if got := links(s); !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
	last := s.Operations[len(s.Operations)-1].File
	if last.Path != "/etc/udev/rules.d/71-nvidia-dev-char.rules" || last.Content != containers.DevCharRule ||
		!strings.Contains(last.Content, `ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"`) {
		t.Errorf("rule %+v", last)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the plan fails its own validation: %v", err)
	}
	if !strings.Contains(s.After["links"], "/dev/char/195:0 → /dev/nvidia0") || !strings.Contains(s.Reason, "/dev/nvidia0") {
		t.Errorf("the step does not show the links: %+v", s)
	}

	// Turned off, nothing is planned; with the links and the rule in
	// place, nothing either.
	off := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, repo+"container_toolkit {\n  cdi = false\n  dev_char_links = false\n}\n"), observe(t, dir))
	if devCharStep(off) != nil {
		t.Errorf("dev_char_links = false still plans %q", addresses(off))
	}
	apply(t, dir, p)
	again := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir))
	if s := devCharStep(again); s != nil {
		t.Errorf("links and rule in place, still planned: %+v", s)
	}

	// A link of one node gone, and the rule edited: both are put back,
	// and the step says what was there.
	if err := os.Remove(filepath.Join(dir, "dev/char/195:1")); err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, dir, containers.DevCharRulePath, "# edited\n")
	fix := devCharStep(plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir)))
	if fix == nil || fix.Action != plan.Update || !slices.Equal(links(fix), []string{"/dev/char/195:1 -> /dev/nvidia1"}) ||
		!strings.Contains(fix.Reason, "is not the rule gpuenv writes") || len(fix.Operations) != 2 {
		t.Errorf("step %+v", fix)
	}
}

// A rule of the same name that a package or the administrator put in
// /usr/lib/udev/rules.d is left to do its work: gpuenv does not write its
// own over it.
func TestDevCharRuleOfThePackage(t *testing.T) {
	dir := root(t, true)
	hosttest.WriteFile(t, dir, "/usr/lib/udev/rules.d/71-nvidia-dev-char.rules", "# the package's\n")
	s := devCharStep(plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir)))
	if s == nil || slices.ContainsFunc(s.Operations, func(op plan.Operation) bool { return op.File.Symlink == "" }) {
		t.Errorf("step %+v", s)
	}
}

// Apply makes the links and the rule through the journal, and rollback
// puts the host back as it was: no /dev/char links, no rule.
func TestDevCharApplyRollback(t *testing.T) {
	dir := root(t, true)
	p := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir))
	if devCharStep(p) == nil {
		t.Fatalf("no dev_char step: %q", addresses(p))
	}
	// Only the links and the rule: the other steps would run package
	// managers.
	p.Steps = []plan.Step{*devCharStep(p)}
	p.Steps[0].DependsOn = nil
	before, err := applytest.Snapshot(dir, "/var/lib/gpuenv")
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gpuapply.Apply(context.Background(), h, p, gpuapply.Options{StateDir: "/var/lib/gpuenv"})
	if err != nil || res.Status != gpuapply.StatusApplied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	for link, node := range map[string]string{"195:0": "/dev/nvidia0", "195:255": "/dev/nvidiactl", "508:0": "/dev/nvidia-uvm"} {
		if got, err := os.Readlink(filepath.Join(dir, "dev/char", link)); err != nil || got != node {
			t.Errorf("/dev/char/%s -> %q (%v)", link, got, err)
		}
	}
	if again := plantest.Plan(t, newPlanner(), plantest.LoadSpec(t, devCharSpec), observe(t, dir)); devCharStep(again) != nil {
		t.Errorf("after apply, still planned: %+v", devCharStep(again))
	}
	res, err = gpuapply.Rollback(context.Background(), h, gpuapply.RollbackOptions{StateDir: "/var/lib/gpuenv", To: -1})
	if err != nil || res.Status != gpuapply.StatusDone {
		t.Fatalf("rollback: %v %+v", err, res)
	}
	after, err := applytest.Snapshot(dir, "/var/lib/gpuenv")
	if err != nil {
		t.Fatal(err)
	}
	if d := applytest.Diff(before, after); d != "" {
		t.Errorf("rollback left the host changed:\n%s", d)
	}
}
