package apply_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// The /dev/char links of the NVIDIA device nodes are made as symbolic
// links, journaled like any file: apply makes them (and /dev/char when it
// is missing), replaces a link that pointed elsewhere, and rollback puts
// the host back as it was, the directory and the old link included.
func TestApplyDevCharLinks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before func(root string)
	}{
		{"no /dev/char", func(string) {}},
		{"a stale link", func(root string) {
			if err := os.MkdirAll(filepath.Join(root, "dev/char"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../nvidia9", filepath.Join(root, "dev/char/195:0")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			for _, n := range []string{"dev/nvidia0", "dev/nvidiactl"} {
				if err := os.MkdirAll(filepath.Join(fx.Root, filepath.Dir(n)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(fx.Root, n), nil, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			tt.before(fx.Root)
			before := fx.snapshot()
			link := func(name, target string) plan.Operation {
				return plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "/dev/char/" + name, Symlink: target}}
			}
			p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{
				Address: "container_toolkit.dev_char", Action: plan.Create, Reason: "missing links",
				Operations: []plan.Operation{
					link("195:0", "/dev/nvidia0"),
					link("195:255", "/dev/nvidiactl"),
					{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/udev/rules.d/71-nvidia-dev-char.rules", Content: "# rule\n", Mode: 0o644}},
				},
			}}}
			if res := fx.apply(p, fx.opts(fx.executor())); res.Status != apply.StatusApplied {
				t.Fatalf("apply: status %s, failed %+v\n%s", res.Status, res.Failed, fx.out.String())
			}
			for name, want := range map[string]string{"195:0": "/dev/nvidia0", "195:255": "/dev/nvidiactl"} {
				p := filepath.Join(fx.Root, "dev/char", name)
				got, err := os.Readlink(p)
				if err != nil || got != want {
					t.Errorf("%s -> %q (%v), want %s", name, got, err, want)
				}
				if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is a %s", name, fi.Mode().Type())
				}
			}
			if _, err := os.Lstat(filepath.Join(fx.Root, "dev/char/.195:0.gpuenv-link")); err == nil {
				t.Error("the link's temporary name is left behind")
			}
			fx.rollsBack(before, "after making the /dev/char links")
		})
	}
}
