//go:build realsystem

package realsys

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Scenario: gpuenv's own .deb, built by deploy/package, installs with the
// root's dpkg; its binary is the package's version, systemd accepts its
// units and the timer is enabled; a spec in /etc/gpuenv is applied by the
// installed gpuenv; removing and purging the package leave that spec and
// the state directory, with its generation, where they were, and a
// reinstalled gpuenv rolls the generation back.
func TestDebPackage(t *testing.T) {
	debs := t.TempDir()
	build := exec.Command("go", "run", "./deploy/package", "-o", debs)
	build.Dir = h.repo
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./deploy/package: %v\n%s", err, out)
	}
	deb := lineWithSuffix(t, string(out), ".deb")
	version := strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "gpuenv ")

	r := h.NewRoot(t, Systemd, Mounts{Proc: true})
	r.copyFile(deb, r.Path("/tmp/gpuenv.deb"), 0o644)
	r.MustSh("dpkg -i /tmp/gpuenv.deb")
	if got := strings.TrimSpace(r.MustSh("dpkg-query -W -f '${Version} ${db:Status-Status}' gpuenv")); got != version+" installed" {
		t.Fatalf("dpkg-query: %q, want %q", got, version+" installed")
	}
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(r.MustSh("/usr/bin/gpuenv version --json")), &v); err != nil || v.Version != version {
		t.Errorf("gpuenv version: %q (%v), the package is %q", v.Version, err, version)
	}
	// slurm.conf's HealthCheckProgram: the link answers as slurm-health.
	if got := strings.TrimSpace(r.MustSh("/usr/sbin/gpuenv-slurm-health --help | head -n 1")); !strings.Contains(got, "Slurm") {
		t.Errorf("/usr/sbin/gpuenv-slurm-health --help starts %q, want slurm-health's help", got)
	}
	if got := strings.TrimSpace(r.MustSh("stat -c '%a %U %G' /var/lib/gpuenv")); got != "711 root root" {
		t.Errorf("/var/lib/gpuenv is %s, want 711 root root", got)
	}

	// The Documentation= line is checked too: man must find gpuenv(1).
	res := r.Sh("systemd-analyze verify /lib/systemd/system/gpuenv-drift.service /lib/systemd/system/gpuenv-drift.timer")
	if res.Code != 0 || strings.TrimSpace(res.Stdout+res.Stderr) != "" {
		t.Errorf("systemd-analyze verify: %s", res)
	}
	const wants = "/etc/systemd/system/timers.target.wants/gpuenv-drift.timer"
	if got := strings.TrimSpace(r.MustSh("readlink " + wants)); got != "/lib/systemd/system/gpuenv-drift.timer" {
		t.Errorf("the timer is not enabled: %s -> %q", wants, got)
	}
	r.MustSh("man -w gpuenv")
	if res := r.Chroot(userEnv, "/bin/bash", "-c", "source /usr/share/bash-completion/completions/gpuenv && complete -p gpuenv"); res.Code != 0 || !strings.Contains(res.Stdout, "__start_gpuenv") {
		t.Errorf("bash completion: %s", res)
	}

	// The service's own command line, as systemd runs it, on a host whose
	// spec is not applied yet: drift (2), which SuccessExitStatus makes a
	// success, recorded world-readable for an exporter that is not root.
	r.MustSh("useradd -m alice")
	r.WriteFile("/etc/gpuenv/gpuenv.hcl", "group \"render\" {\n  members = [\"alice\"]\n}\n")
	service := string(r.readFile("/lib/systemd/system/gpuenv-drift.service"))
	if got := unitValue(t, service, "SuccessExitStatus"); got != "2" {
		t.Fatalf("SuccessExitStatus=%s", got)
	}
	execStart := strings.Fields(unitValue(t, service, "ExecStart"))
	if res := r.Chroot(userEnv, execStart...); res.Code != 2 {
		t.Errorf("the service's %q before apply: want 2, changes; %s", execStart, res)
	}
	r.checkDrift("changes")

	// Applied by the installed binary, the spec leaves a generation in the
	// state directory, and the service finds no drift.
	if res := r.Chroot(userEnv, "/usr/bin/gpuenv", "apply", "--auto-approve", "/etc/gpuenv"); res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	if res := r.Chroot(userEnv, execStart...); res.Code != 0 {
		t.Errorf("the service's %q after apply: want 0, no changes; %s", execStart, res)
	}
	r.checkDrift("no-changes")
	state := r.MustSh("find /var/lib/gpuenv | sort")

	r.MustSh("dpkg -r gpuenv")
	if r.Sh("test -e /usr/bin/gpuenv").Code == 0 {
		t.Error("dpkg -r left /usr/bin/gpuenv")
	}
	if got := r.MustSh("find /var/lib/gpuenv | sort"); got != state {
		t.Errorf("after dpkg -r, the state directory holds\n%s\nwant, as before\n%s", got, state)
	}
	r.MustSh("dpkg -P gpuenv")
	if got := r.MustSh("find /var/lib/gpuenv | sort"); got != state {
		t.Errorf("after dpkg -P, the state directory holds\n%s\nwant, as before\n%s", got, state)
	}
	if got := strings.TrimSpace(r.MustSh("stat -c '%a %U %G' /var/lib/gpuenv")); got != "711 root root" {
		t.Errorf("after dpkg -P, /var/lib/gpuenv is %s", got)
	}
	if got := string(r.readFile("/etc/gpuenv/gpuenv.hcl")); !strings.Contains(got, `group "render"`) {
		t.Errorf("after dpkg -P, /etc/gpuenv/gpuenv.hcl is %q", got)
	}
	if res := r.Sh("ls /etc/systemd/system/gpuenv-drift.timer " + wants); res.Code == 0 {
		t.Errorf("dpkg -P left the timer enabled or masked: %s", res.Stdout)
	}

	// The generations outlive the package: reinstalled, gpuenv rolls back.
	r.MustSh("dpkg -i /tmp/gpuenv.deb")
	if res := r.Chroot(userEnv, "/usr/bin/gpuenv", "rollback", "--auto-approve"); res.Code != 0 {
		t.Fatalf("rollback after reinstalling: %s", res)
	}
	if res := r.Sh("getent group render"); res.Code == 0 {
		t.Errorf("render still exists after rollback: %s", res.Stdout)
	}
}

// checkDrift checks that the drift record says outcome and that every user
// may read it.
func (r *Root) checkDrift(outcome string) {
	r.t.Helper()
	var drift struct{ Outcome string }
	if err := json.Unmarshal(r.readFile("/var/lib/gpuenv/drift.json"), &drift); err != nil || drift.Outcome != outcome {
		r.t.Errorf("drift.json: outcome %q (%v), want %q", drift.Outcome, err, outcome)
	}
	if res := r.Chroot(userEnv, "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "cat", "/var/lib/gpuenv/drift.json"); res.Code != 0 {
		r.t.Errorf("nobody cannot read drift.json: %s", res)
	}
}

// lineWithSuffix is the line of out ending in suffix.
func lineWithSuffix(t *testing.T, out, suffix string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasSuffix(l, suffix) {
			if _, err := os.Stat(l); err != nil {
				t.Fatal(err)
			}
			return filepath.Clean(l)
		}
	}
	t.Fatalf("no %s in\n%s", suffix, out)
	return ""
}

// unitValue is the value of key in a unit file's text.
func unitValue(t *testing.T, unit, key string) string {
	t.Helper()
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s= in\n%s", key, unit)
	return ""
}
