package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envHost lays out a root whose environment step writes the profile
// script and the services' drop-in, and a spec that asks for them; the
// spec takes its devices from a variable, so that a --var changes the plan.
func envHost(t *testing.T) (root, specPath string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	files := map[string]string{
		"etc/os-release":  "ID=ubuntu\nVERSION_ID=\"22.04\"\n",
		"etc/ld.so.conf":  "include /etc/ld.so.conf.d/*.conf\n",
		"etc/group":       "video:x:44:\n",
		"etc/passwd":      "alice:x:1000:1000::/home/alice:/bin/bash\n",
		"opt/placeholder": "",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	specPath = filepath.Join(dir, "spec", "env.hcl")
	writeFile(t, specPath, `variable "devices" {
  type    = list(string)
  default = ["0"]
}

environment {
  cuda_visible_devices = var.devices
}
`)
	return root, specPath
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gpuenv runs the command line in this process with env as its
// environment, returning its exit status and what it wrote.
func gpuenv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr, env)
	return code, stdout.String(), stderr.String()
}

// savePlan plans spec on root with --out and the extra plan flags.
func savePlanFile(t *testing.T, root, specPath string, env []string, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "tonight.plan")
	args := append([]string{"--root", root, "plan", "--out", out}, flags...)
	if code, stdout, stderr := gpuenv(t, env, append(args, specPath)...); code != 0 {
		t.Fatalf("plan --out: exit %d\n%s%s", code, stdout, stderr)
	}
	return out
}

// editPlan rewrites the saved plan at name through edit, which gets the
// document as generic JSON.
func editPlan(t *testing.T, name string, edit func(doc map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	data, err = json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// fileOp returns the file operation of step address whose path is path.
func fileOp(t *testing.T, doc map[string]any, address, path string) map[string]any {
	t.Helper()
	for _, s := range doc["steps"].([]any) {
		step := s.(map[string]any)
		if step["address"] != address {
			continue
		}
		for _, o := range step["operations"].([]any) {
			if f, ok := o.(map[string]any)["file"].(map[string]any); ok && f["path"] == path {
				return f
			}
		}
	}
	t.Fatalf("the saved plan has no file operation on %s in %s", path, address)
	return nil
}

func stepOf(t *testing.T, doc map[string]any, address string) map[string]any {
	t.Helper()
	for _, s := range doc["steps"].([]any) {
		if step := s.(map[string]any); step["address"] == address {
			return step
		}
	}
	t.Fatalf("the saved plan has no step %s", address)
	return nil
}

// refused applies plan on root and wants it refused with every one of
// wants in its error output, and nothing written into the root.
func refused(t *testing.T, root, plan string, wants ...string) {
	t.Helper()
	code, stdout, stderr := gpuenv(t, nil, "--root", root, "apply", "--auto-approve", plan)
	if code != exitError {
		t.Fatalf("apply of the edited plan: exit %d, want %d\n%s%s", code, exitError, stdout, stderr)
	}
	// The diagnostic is wrapped to the terminal's width.
	flat := strings.Join(strings.Fields(stderr), " ")
	for _, w := range wants {
		if !strings.Contains(flat, w) {
			t.Errorf("apply's error lacks %q:\n%s", w, stderr)
		}
	}
	for _, p := range []string{"etc/profile.d", "etc/systemd", "var/lib/gpuenv/generations/1"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the refused apply wrote %s", p)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "etc/ld.so.conf.d/evil.conf")); err == nil {
		t.Error("the refused apply wrote /etc/ld.so.conf.d/evil.conf")
	}
}

// An edit to the content a saved plan's file operation writes — a command
// added to the profile script every login shell sources — is refused:
// apply plans the saved spec again and names the first difference. The
// step's shown value still says what the spec says.
func TestSavedPlanEditedFileContentRefused(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	editPlan(t, plan, func(doc map[string]any) {
		f := fileOp(t, doc, "environment", "/etc/profile.d/gpuenv.sh")
		f["content"] = f["content"].(string) + "id > /tmp/pwned\n"
	})
	refused(t, root, plan,
		"Saved plan differs from a new plan",
		"step environment operation 1 file.content differs: saved ",
		`id > /tmp/pwned\n"`,
		"planned now ")
}

// An edit to the path a file operation writes is refused the same way.
func TestSavedPlanEditedFilePathRefused(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	editPlan(t, plan, func(doc map[string]any) {
		f := fileOp(t, doc, "environment", "/etc/systemd/system.conf.d/gpuenv.conf")
		f["path"] = "/etc/ld.so.conf.d/evil.conf"
	})
	refused(t, root, plan,
		"step environment operation 2 file.path differs: saved \"/etc/ld.so.conf.d/evil.conf\", planned now \"/etc/systemd/system.conf.d/gpuenv.conf\"")
}

// An edit consistent with itself — the operation's content, the value the
// plan shows for the file, and the digest of the spec the plan names —
// passes every check a plan can make of itself; only planning again
// tells it from what the spec asks for.
func TestSavedPlanSelfConsistentEditRefused(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	editPlan(t, plan, func(doc map[string]any) {
		f := fileOp(t, doc, "environment", "/etc/profile.d/gpuenv.sh")
		f["content"] = strings.ReplaceAll(f["content"].(string), "'0'", "'0,1'")
		after := stepOf(t, doc, "environment")["after"].(map[string]any)
		after["/etc/profile.d/gpuenv.sh"] = "export CUDA_VISIBLE_DEVICES='0,1'"
	})
	refused(t, root, plan, "step environment operation 1 file.content differs")
}

// An unedited saved plan is planned again, matches, and is applied; the
// output says so.
func TestSavedPlanUneditedApplies(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	code, stdout, stderr := gpuenv(t, nil, "--root", root, "apply", "--auto-approve", plan)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "Planned again from the spec saved in "+plan+" on this host: the same plan.") {
		t.Errorf("apply does not say it planned again:\n%s", stdout)
	}
	if !strings.Contains(stdout, "The host now matches the spec.") {
		t.Errorf("apply does not say whether the host matches the saved spec:\n%s", stdout)
	}
	got, err := os.ReadFile(filepath.Join(root, "etc/profile.d/gpuenv.sh"))
	if err != nil || !strings.Contains(string(got), "export CUDA_VISIBLE_DEVICES='0'\n") {
		t.Errorf("profile script: %q, %v", got, err)
	}
}

// The flags that changed the plan are kept in it and used by apply: a
// --var, a --var-file and a GPUENV_VAR_ variable, none of which apply is
// given again. Apply refuses planning flags of its own with a saved plan
// rather than quietly ignore them.
func TestSavedPlanKeepsPlanningFlags(t *testing.T) {
	for _, c := range []struct {
		name  string
		env   []string
		flags func(dir string) []string
		want  string
	}{
		{name: "var", flags: func(string) []string { return []string{"--var", `devices=["2","3"]`} }, want: "'2,3'"},
		{name: "var-file", flags: func(dir string) []string {
			vf := filepath.Join(dir, "prod.vars")
			writeFile(t, vf, "devices = [\"4\"]\n")
			return []string{"--var-file", vf}
		}, want: "'4'"},
		{name: "environment", env: []string{`GPUENV_VAR_devices=["5"]`}, flags: func(string) []string { return nil }, want: "'5'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, specPath := envHost(t)
			dir := t.TempDir()
			plan := savePlanFile(t, root, specPath, c.env, c.flags(dir)...)
			// The var file is gone by apply time: the plan holds its copy.
			os.RemoveAll(dir)
			code, stdout, stderr := gpuenv(t, nil, "--root", root, "apply", "--auto-approve", plan)
			if code != 0 {
				t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
			}
			got, _ := os.ReadFile(filepath.Join(root, "etc/profile.d/gpuenv.sh"))
			if !strings.Contains(string(got), "CUDA_VISIBLE_DEVICES="+c.want) {
				t.Errorf("profile script %q lacks %s", got, c.want)
			}
		})
	}

	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	for _, flags := range [][]string{{"--var", "devices=[\"7\"]"}, {"--python", "/opt/venv/bin/python"}, {"--interrupt-gpu-processes"}, {"--root-boots"}, {"--replace", "driver"}} {
		args := append([]string{"--root", root, "apply", "--auto-approve"}, flags...)
		code, stdout, stderr := gpuenv(t, nil, append(args, plan)...)
		if code != exitError || !strings.Contains(stderr, flags[0]+" cannot be given with a saved plan") {
			t.Errorf("apply %s PLANFILE: exit %d\n%s%s", flags[0], code, stdout, stderr)
		}
	}
}

// A saved plan made for one root is not applied to another: the root is
// one of the flags it keeps. Without --root, apply uses the plan's.
func TestSavedPlanKeepsRoot(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	other, _ := envHost(t)
	code, stdout, stderr := gpuenv(t, nil, "--root", other, "apply", "--auto-approve", plan)
	if code != exitError || !strings.Contains(stderr, "was planned for --root "+root) {
		t.Errorf("apply to another root: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = gpuenv(t, nil, "apply", "--auto-approve", plan)
	if code != 0 {
		t.Fatalf("apply without --root: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/profile.d/gpuenv.sh")); err != nil {
		t.Errorf("apply without --root did not apply to the plan's root: %v", err)
	}
}

// The spec on disk does not matter once the plan is saved: as Terraform
// applies a saved plan, apply plans again from the copy of the spec the
// plan holds, so an edit to the spec, or its removal, after plan --out
// changes nothing; the plan applied is the one that was reviewed.
func TestSavedPlanUsesItsOwnSpec(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	writeFile(t, specPath, "environment {\n  cuda_visible_devices = [\"9\"]\n}\n")
	code, stdout, stderr := gpuenv(t, nil, "--root", root, "apply", "--auto-approve", plan)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(root, "etc/profile.d/gpuenv.sh"))
	if !strings.Contains(string(got), "CUDA_VISIBLE_DEVICES='0'") {
		t.Errorf("profile script %q is not the saved spec's", got)
	}
}

// A plan saved by a gpuenv that kept no spec in it cannot be planned
// again, and is refused with what to do.
func TestSavedPlanOldLayoutRefused(t *testing.T) {
	root, specPath := envHost(t)
	plan := savePlanFile(t, root, specPath, nil)
	editPlan(t, plan, func(doc map[string]any) {
		doc["gpuenv_saved_plan"] = 1
		delete(doc, "planned_from")
	})
	refused(t, root, plan, "saved plan layout 1", "gpuenv plan --out")
}

// A FIFO or a device given to apply as its plan file is refused at once,
// naming it, instead of blocking apply for a writer or reading /dev/zero
// until memory runs out.
func TestApplyRefusesNonRegularPlanFile(t *testing.T) {
	root, _ := envHost(t)
	fifo := filepath.Join(t.TempDir(), "tonight.plan")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		fifo:        fifo + " is a FIFO, not a regular file",
		"/dev/zero": "/dev/zero is a character device, not a regular file",
	} {
		done := make(chan struct{})
		var code int
		var stdout, stderr string
		go func() {
			defer close(done)
			code, stdout, stderr = gpuenv(t, nil, "--root", root, "apply", "--auto-approve", name)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("apply %s has not returned after 10 s", name)
		}
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("apply %s: exit %d, want %d with %q\n%s%s", name, code, exitError, want, stdout, stderr)
		}
	}
}
