// Package ansible holds the tests of the Ansible collection in this
// directory: its documentation as ansible-doc reads it, and its module run
// by Debian's ansible against a gpuenv built from this tree, on a root
// directory of the test's own (gpuenv's --root), so that nothing outside
// it changes and no privileges are needed. The real rollout over Debian
// roots is in cmd/gpuenv/realsys (TestAnsibleRollingDriverUpgrade).
package ansible

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// needAnsible skips where Debian's ansible is not installed; .ci/run
// installs it, so CI always runs these tests.
func needAnsible(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"ansible-doc", "ansible-playbook"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install ansible): %v", tool, err)
		}
	}
}

// collections is an Ansible collections path holding this directory as
// the collection gpuenv.gpuenv.
func collections(t *testing.T) string {
	t.Helper()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// ansible reads the collection, not this process: reading every file
	// here is what tells go test's cache that a change to the module or a
	// role invalidates the result.
	err = filepath.WalkDir(here, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			_, err = os.ReadFile(p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ns := filepath.Join(dir, "ansible_collections", "gpuenv")
	if err := os.MkdirAll(ns, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(here, filepath.Join(ns, "gpuenv")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestModuleDocumentation(t *testing.T) {
	needAnsible(t)
	out, err := exec.Command("ansible-doc", "-M", "plugins/modules", "--json", "gpuenv").Output()
	if err != nil {
		t.Fatalf("ansible-doc: %v\n%s", err, stderrOf(err))
	}
	var docs map[string]struct {
		Doc struct {
			Module      string
			Description []string
			Options     map[string]struct {
				Type    string
				Choices []string
				Default any
			}
		}
		Examples string
		Return   map[string]any
	}
	if err := json.Unmarshal(out, &docs); err != nil {
		t.Fatalf("ansible-doc --json: %v\n%s", err, out)
	}
	d, ok := docs["gpuenv"]
	if !ok {
		t.Fatalf("ansible-doc documents %v, not gpuenv", keys(docs))
	}
	// Every option the module accepts is documented, with its type.
	want := map[string]string{
		"state": "str", "spec": "path", "root": "path", "state_dir": "path", "variables": "dict",
		"var_files": "list", "python": "list", "programs": "list", "revert": "bool",
		"allow_reboot": "bool", "to": "int", "executable": "path",
	}
	for name, typ := range want {
		if got := d.Doc.Options[name].Type; got != typ {
			t.Errorf("option %s: documented type %q, want %q", name, got, typ)
		}
	}
	for name := range d.Doc.Options {
		if _, ok := want[name]; !ok {
			t.Errorf("option %s is documented but the test does not know it", name)
		}
	}
	if got := d.Doc.Options["state"].Choices; !slices.Equal(got, []string{"present", "rolled_back", "doctor", "observed"}) {
		t.Errorf("state choices %v", got)
	}
	for _, r := range []string{"plan", "summary", "events", "generation", "needs_reboot", "diagnostics", "doctor", "healthy", "observation", "rollback"} {
		if _, ok := d.Return[r]; !ok {
			t.Errorf("RETURN does not document %s", r)
		}
	}
	if !strings.Contains(d.Examples, "gpuenv.gpuenv.gpuenv:") {
		t.Errorf("EXAMPLES do not use the module by its full name:\n%s", d.Examples)
	}

	// The role's arguments, through the collections path.
	cmd := exec.Command("ansible-doc", "-t", "role", "--json", "gpuenv.gpuenv.install")
	cmd.Env = append(os.Environ(), "ANSIBLE_COLLECTIONS_PATH="+collections(t))
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("ansible-doc -t role: %v\n%s", err, stderrOf(err))
	}
	for _, v := range []string{"gpuenv_deb", "gpuenv_spec_files", "gpuenv_spec_dir"} {
		if !strings.Contains(string(out), `"`+v+`"`) {
			t.Errorf("the role's documentation lacks %s:\n%s", v, out)
		}
	}
}

func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// localRun runs the module once on localhost with args through
// ansible-playbook, in check mode and with --diff when asked, and returns
// its result.
type localRun struct {
	t           *testing.T
	env         []string
	dir         string
	gpuenv      string
	root        string
	check, diff bool
}

func (l *localRun) module(args map[string]any) map[string]any {
	l.t.Helper()
	args["executable"] = l.gpuenv
	args["root"] = l.root
	task, err := json.Marshal(map[string]any{"gpuenv.gpuenv.gpuenv": args, "register": "r", "ignore_errors": true})
	if err != nil {
		l.t.Fatal(err)
	}
	// JSON is YAML: the playbook is written as JSON.
	play, _ := json.Marshal([]map[string]any{{"hosts": "localhost", "gather_facts": false, "tasks": []json.RawMessage{task}}})
	pb := filepath.Join(l.dir, "play.yml")
	if err := os.WriteFile(pb, play, 0o644); err != nil {
		l.t.Fatal(err)
	}
	argv := []string{"-i", "localhost,", "-c", "local", pb}
	if l.check {
		argv = append(argv, "--check")
	}
	if l.diff {
		argv = append(argv, "--diff")
	}
	cmd := exec.Command("ansible-playbook", argv...)
	cmd.Env = l.env
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("ansible-playbook: %v\n%s\n%s", err, out, stderrOf(err))
	}
	var rep struct {
		Plays []struct {
			Tasks []struct {
				Hosts map[string]map[string]any `json:"hosts"`
			} `json:"tasks"`
		} `json:"plays"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Plays) != 1 || len(rep.Plays[0].Tasks) != 1 {
		l.t.Fatalf("ansible-playbook printed no report of one task (%v):\n%s", err, out)
	}
	return rep.Plays[0].Tasks[0].Hosts["localhost"]
}

const environmentSpec = `environment {
  cuda_device_order = "PCI_BUS_ID"
  variables         = { HF_HOME = "/data/hf" }
}
`

// The module's life cycle on one root: check mode plans and touches
// nothing, apply changes, a second apply changes nothing, a failing apply
// is reverted by gpuenv and says why in msg, rollback (checked, then run)
// takes the host back, a second rollback to the same generation changes
// nothing, and doctor and observe return their documents as data.
func TestModuleOnRoot(t *testing.T) {
	needAnsible(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuenv")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/gpuenv")
	build.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "root")
	spec := filepath.Join(dir, "spec", "gpuenv.hcl")
	for _, d := range []string{filepath.Join(root, "etc"), filepath.Dir(spec)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(spec, []byte(environmentSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	// A root file system says what it is; gpuenv refuses a --root that
	// does not.
	if err := os.WriteFile(filepath.Join(root, "etc", "os-release"), []byte("ID=debian\nVERSION_ID=\"12\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := &localRun{t: t, dir: dir, gpuenv: bin, root: root, env: append(os.Environ(),
		"ANSIBLE_COLLECTIONS_PATH="+collections(t),
		"ANSIBLE_STDOUT_CALLBACK=ansible.posix.json",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3",
		"ANSIBLE_RETRY_FILES_ENABLED=false",
	)}
	profile := filepath.Join(root, "etc/profile.d/gpuenv.sh")
	present := func() bool { _, err := os.Stat(profile); return err == nil }

	l.check, l.diff = true, true
	res := l.module(map[string]any{"spec": filepath.Dir(spec)})
	if res["changed"] != true || res["failed"] == true || present() {
		t.Fatalf("check mode: changed %v, failed %v, file written %v; want a change planned and nothing written: %v", res["changed"], res["failed"], present(), res)
	}
	diff, _ := json.Marshal(res["diff"])
	if !strings.Contains(string(diff), `"before_header":"environment"`) || !strings.Contains(string(diff), "HF_HOME") {
		t.Errorf("--diff: %s; want the environment step's before and after", diff)
	}
	l.check, l.diff = false, false

	res = l.module(map[string]any{"spec": filepath.Dir(spec)})
	if res["changed"] != true || res["generation"] != 1.0 || !present() {
		t.Fatalf("apply: changed %v, generation %v, file written %v: %v", res["changed"], res["generation"], present(), res)
	}
	if res = l.module(map[string]any{"spec": filepath.Dir(spec)}); res["changed"] != false || res["failed"] == true {
		t.Errorf("apply again: changed %v, failed %v; want nothing to do: %v", res["changed"], res["failed"], res)
	}

	// A variable whose file cannot be written: the drop-in's directory is
	// a file. The profile script is written first and reverted.
	dropin := filepath.Join(root, "etc/systemd/system.conf.d")
	if err := os.MkdirAll(filepath.Dir(dropin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dropin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dropin, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(profile)
	if err := os.WriteFile(spec, []byte(strings.Replace(environmentSpec, "/data/hf", "/scratch/hf", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	res = l.module(map[string]any{"spec": filepath.Dir(spec)})
	msg, _ := res["msg"].(string)
	if res["failed"] != true || !strings.Contains(msg, "system.conf.d") || !strings.Contains(msg, "gpuenv reverted what the apply had done (inverses run: 1;") {
		t.Errorf("failing apply: failed %v, msg %q; want gpuenv's error and its revert", res["failed"], msg)
	}
	if after, _ := os.ReadFile(profile); string(after) != string(before) {
		t.Errorf("after the reverted apply, %s is\n%s\nwant it as before:\n%s", profile, after, before)
	}
	// revert: false leaves the first write in place for a rollback.
	res = l.module(map[string]any{"spec": filepath.Dir(spec), "revert": false})
	msg, _ = res["msg"].(string)
	if after, _ := os.ReadFile(profile); res["failed"] != true || !strings.Contains(msg, "left in place (revert is false)") || !strings.Contains(string(after), "/scratch/hf") {
		t.Errorf("failing apply with revert false: failed %v, msg %q, %s now\n%s", res["failed"], msg, profile, after)
	}
	if res = l.module(map[string]any{"state": "rolled_back"}); res["changed"] != true || res["failed"] == true {
		t.Errorf("rollback of the apply left in place: changed %v, failed %v: %v", res["changed"], res["failed"], res)
	}
	if after, _ := os.ReadFile(profile); string(after) != string(before) {
		t.Errorf("after the rollback, %s is\n%s\nwant it as before:\n%s", profile, after, before)
	}
	if err := os.Remove(dropin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(environmentSpec), 0o644); err != nil {
		t.Fatal(err)
	}

	l.check = true
	res = l.module(map[string]any{"state": "rolled_back"})
	rb, _ := json.Marshal(res["rollback"])
	if res["changed"] != true || res["failed"] == true || !present() || !strings.Contains(string(rb), `"generations":[1]`) {
		t.Fatalf("rollback in check mode: changed %v, failed %v, file still there %v, rollback %s: %v", res["changed"], res["failed"], present(), rb, res)
	}
	l.check = false
	if res = l.module(map[string]any{"state": "rolled_back", "to": 0}); res["changed"] != true || present() {
		t.Fatalf("rollback: changed %v, file still there %v: %v", res["changed"], present(), res)
	}
	if res = l.module(map[string]any{"state": "rolled_back", "to": 0}); res["changed"] != false || res["failed"] == true {
		t.Errorf("rollback to 0 again: changed %v, failed %v; want nothing to do: %v", res["changed"], res["failed"], res)
	}

	// Bad input: the spec's own diagnostics, with file and line; an
	// option that does not go with the state.
	if err := os.WriteFile(spec, []byte("driver {\n  version = \n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = l.module(map[string]any{"spec": filepath.Dir(spec)})
	if msg, _ := res["msg"].(string); res["failed"] != true || !strings.Contains(msg, spec+":2: Invalid expression") {
		t.Errorf("a spec that does not parse: failed %v, msg %q; want the diagnostic at %s:2", res["failed"], msg, spec)
	}
	// A spec whose name looks like an option is a path all the same: the
	// module ends gpuenv's options with "--".
	varFile := filepath.Join(dir, "vars.hcl")
	if err := os.WriteFile(varFile, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = l.module(map[string]any{"spec": "--var-file=" + varFile})
	if msg, _ := res["msg"].(string); res["failed"] != true || !strings.Contains(msg, "--var-file="+varFile+": no such file or directory") {
		t.Errorf("spec --var-file=%s: failed %v, msg %q; want it read as a spec path that does not exist", varFile, res["failed"], msg)
	}
	res = l.module(map[string]any{"spec": filepath.Dir(spec), "to": 1})
	if msg, _ := res["msg"].(string); res["failed"] != true || !strings.Contains(msg, "to: only state=rolled_back") {
		t.Errorf("to with state=present: failed %v, msg %q", res["failed"], msg)
	}

	// doctor and observe: data, no change. The root has no GPU, so doctor
	// finds problems, which is a report, not a failure.
	res = l.module(map[string]any{"state": "doctor"})
	doc, _ := res["doctor"].(map[string]any)
	if res["failed"] == true || res["changed"] != false || res["healthy"] != false || doc["checks"] == nil {
		t.Errorf("doctor: failed %v, changed %v, healthy %v, document keys %v", res["failed"], res["changed"], res["healthy"], keys(doc))
	}
	res = l.module(map[string]any{"state": "observed"})
	obs, _ := res["observation"].(map[string]any)
	if res["failed"] == true || res["changed"] != false || obs["schema_version"] == nil {
		t.Errorf("observed: failed %v, changed %v, document keys %v", res["failed"], res["changed"], keys(obs))
	}
}

// The install role takes the package only from a controller path or an
// https URL with a checksum, and refuses anything else before it changes
// anything on the host. One play runs the role on a local host per case.
func TestRoleRefusesUnsafePackageSource(t *testing.T) {
	needAnsible(t)
	dir := t.TempDir()
	const sum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := map[string]struct{ deb, checksum, want string }{
		"http":       {"http://mirror.example/gpuenv_0.9.0_amd64.deb", sum, "http URLs are refused"},
		"file":       {"file:///srv/gpuenv_0.9.0_amd64.deb", "", "file URLs are refused"},
		"https-bare": {"https://mirror.example/gpuenv_0.9.0_amd64.deb", "", "an https:// URL together with gpuenv_deb_checksum"},
	}
	hosts := map[string]any{}
	for name, tc := range cases {
		hosts[name] = map[string]any{
			"ansible_connection": "local", "gpuenv_deb": tc.deb, "gpuenv_deb_checksum": tc.checksum,
			"gpuenv_deb_dir": filepath.Join(dir, name, "debs"), "gpuenv_spec_dir": filepath.Join(dir, name, "spec"),
		}
	}
	// JSON is YAML: the inventory and the playbook are written as JSON.
	inv, _ := json.Marshal(map[string]any{"all": map[string]any{"hosts": hosts}})
	play, _ := json.Marshal([]map[string]any{{"hosts": "all", "gather_facts": false, "roles": []string{"gpuenv.gpuenv.install"}}})
	for name, data := range map[string][]byte{"inventory.yml": inv, "play.yml": play} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("ansible-playbook", "-i", filepath.Join(dir, "inventory.yml"), filepath.Join(dir, "play.yml"))
	cmd.Env = append(os.Environ(),
		"ANSIBLE_COLLECTIONS_PATH="+collections(t),
		"ANSIBLE_STDOUT_CALLBACK=ansible.posix.json",
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3",
		"ANSIBLE_RETRY_FILES_ENABLED=false",
	)
	out, err := cmd.Output()
	var rep struct {
		Plays []struct {
			Tasks []struct {
				Task  struct{ Name string }     `json:"task"`
				Hosts map[string]map[string]any `json:"hosts"`
			} `json:"tasks"`
		} `json:"plays"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || len(rep.Plays) != 1 {
		t.Fatalf("ansible-playbook (%v) printed no report (%v):\n%s\n%s", err, jerr, out, stderrOf(err))
	}
	if err == nil {
		t.Errorf("ansible-playbook succeeded; want every host to fail")
	}
	for name, tc := range cases {
		var ran []string
		var last map[string]any
		for _, task := range rep.Plays[0].Tasks {
			// ansible's own check of the role's arguments comes first.
			res, ok := task.Hosts[name]
			if ok && res["skipped"] != true && !strings.HasPrefix(task.Task.Name, "gpuenv.gpuenv.install : Validating arguments") {
				ran, last = append(ran, task.Task.Name), res
			}
		}
		if len(ran) != 1 || ran[0] != "gpuenv.gpuenv.install : Check where the gpuenv package comes from" {
			t.Errorf("%s: tasks run %q; want the play to stop at its first task", tc.deb, ran)
			continue
		}
		msg, _ := last["msg"].(string)
		if last["failed"] != true || !strings.Contains(msg, "gpuenv_deb "+tc.deb+": the package is taken only from a path on the controller") || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: failed %v, msg %q; want %q", tc.deb, last["failed"], msg, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s: the role created %s before refusing", tc.deb, filepath.Join(dir, name))
		}
	}
}
