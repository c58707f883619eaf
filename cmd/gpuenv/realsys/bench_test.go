//go:build realsystem

package realsys

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchSpec is the driver's userspace at version, not held: a plain
// apt-get install does not hold what it installs either.
func benchSpec(version string) string {
	return fmt.Sprintf("driver {\n  version        = %q\n  source         = \"distro\"\n  kernel_modules = \"none\"\n  hold           = false\n}\n", version)
}

// TestDriverUpgradeWallTimes measures, side by side in one run and in
// roots of the same layer, gpuenv's apply of Debian's driver upgrade
// (535.261.03-1 to 535.309.01-0+deb12u1: six packages) and its rollback
// against what a user runs instead: apt-get install -y
// --no-install-recommends of the same six packages pinned to the same
// versions, with --allow-downgrades for the way back, the .debs already in
// the package cache. Each root goes through the same changes in the same
// order, so that each measured apt run finds apt's cache as stale (dpkg's
// database changed since it was built) as the other's; the two take turns
// going first. The floors, in a third root: dpkg -i of the same six
// files, and gpuenv's own start (gpuenv version); and the parts of
// gpuenv's time a plain apt-get does not spend: plan (observe and plan,
// which apply does before and after) and apt-get's dry run, which apply
// runs only for a transaction that would change more than its pins. The
// figures are in docs/development.md's "Wall times"; GPUENV_REALSYS_BENCH=N runs N
// rounds.
func TestDriverUpgradeWallTimes(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("GPUENV_REALSYS_BENCH"))
	if rounds <= 0 {
		t.Skip("set GPUENV_REALSYS_BENCH=N to measure N rounds of the driver upgrade, gpuenv against apt-get")
	}
	g := h.NewRoot(t, Base, Mounts{Proc: true})
	p := h.NewRoot(t, Base, Mounts{Proc: true})
	f := h.NewRoot(t, Base, Mounts{Proc: true})
	pkgs := append(slices.Clone(driverPackages), driverCompanions...)
	pins := func(v string) string {
		var out []string
		for _, n := range pkgs {
			out = append(out, n+"="+v)
		}
		return strings.Join(out, " ")
	}
	files := func(v string) string {
		var out []string
		for _, n := range pkgs {
			out = append(out, "/var/cache/apt/archives/"+n+"_"+strings.ReplaceAll(v, ":", "%3a")+"_amd64.deb")
		}
		return strings.Join(out, " ")
	}
	// All start from the old version, each installed its own way; the
	// new version's files are fetched once, outside the rounds.
	g.WriteFile("/root/driver/gpuenv.hcl", benchSpec("535.261.03"))
	if res := g.Gpuenv("apply", "--auto-approve", "/root/driver"); res.Code != 0 {
		t.Fatalf("installing the old driver with gpuenv: %s", res)
	}
	for _, r := range []*Root{p, f} {
		r.MustSh("apt-get install -y --no-install-recommends " + pins(driverOld) + " && apt-get install -y --download-only --no-install-recommends " + pins(driverNew))
	}
	g.WriteFile("/root/driver/gpuenv.hcl", benchSpec("535.309.01"))

	times := map[string][]time.Duration{}
	measure := func(name string, r *Root, argv ...string) Result {
		t.Helper()
		start := time.Now()
		res := r.Chroot(append(slices.Clone(userEnv), "DEBIAN_FRONTEND=noninteractive"), argv...)
		times[name] = append(times[name], time.Since(start))
		if res.Code != 0 {
			t.Fatalf("%s: %s", name, res)
		}
		return res
	}
	sh := func(script string) []string { return []string{"/bin/sh", "-ec", script} }
	gpuenv := "/usr/local/bin/gpuenv"
	for i := 0; i < rounds; i++ {
		upgrade := []func(){
			func() {
				res := measure("gpuenv apply", g, gpuenv, "apply", "--auto-approve", "--json", "/root/driver")
				times["transaction"] = append(times["transaction"], operationSeconds(t, []byte(res.Stdout)))
			},
			func() {
				measure("apt-get install", p, sh("apt-get install -y --no-install-recommends "+pins(driverNew))...)
			},
		}
		downgrade := []func(){
			func() { measure("gpuenv rollback", g, gpuenv, "rollback", "--auto-approve") },
			func() {
				measure("apt-get --allow-downgrades", p, sh("apt-get install -y --no-install-recommends --allow-downgrades "+pins(driverOld))...)
			},
		}
		if i%2 == 1 {
			slices.Reverse(upgrade)
			slices.Reverse(downgrade)
		}
		for _, run := range append(upgrade, downgrade...) {
			run()
		}
		measure("dpkg -i up", f, sh("dpkg -i "+files(driverNew))...)
		measure("dpkg -i down", f, sh("dpkg -i "+files(driverOld))...)
		measure("apt-get -s", f, sh("apt-get -s install --no-install-recommends "+pins(driverNew))...)
		measure("gpuenv plan", g, gpuenv, "plan", "/root/driver")
		measure("gpuenv version", g, gpuenv, "version")
	}
	g.checkDriverVersion(driverOld)
	p.checkDriverVersion(driverOld)
	// The machine's load drifts: each round's two runs, taken one after
	// the other, are compared with each other (the median of the rounds'
	// ratios), and the fastest of each, which the load slowed least.
	paired := func(a, b string) (median, fastest float64) {
		var rs []float64
		for i := range times[a] {
			rs = append(rs, times[a][i].Seconds()/times[b][i].Seconds())
		}
		slices.Sort(rs)
		return rs[len(rs)/2], slices.Min(times[a]).Seconds() / slices.Min(times[b]).Seconds()
	}
	upMed, upMin := paired("gpuenv apply", "apt-get install")
	downMed, downMin := paired("gpuenv rollback", "apt-get --allow-downgrades")
	med := map[string]time.Duration{}
	for _, n := range []string{"gpuenv apply", "apt-get install", "gpuenv rollback", "apt-get --allow-downgrades", "dpkg -i up", "dpkg -i down", "gpuenv plan", "gpuenv version", "apt-get -s", "transaction"} {
		sorted := slices.Sorted(slices.Values(times[n]))
		med[n] = sorted[len(sorted)/2]
		t.Logf("%-28s median %7s, fastest %7s, each round %v", n, ms(med[n]), ms(sorted[0]), times[n])
	}
	h.Report("driver upgrade, %d rounds: gpuenv apply / apt-get install %.2f× (median of the rounds), %.2f× (fastest against fastest); medians %s and %s; floor dpkg -i %s",
		rounds, upMed, upMin, ms(med["gpuenv apply"]), ms(med["apt-get install"]), ms(med["dpkg -i up"]))
	h.Report("  its rollback: gpuenv rollback / apt-get install --allow-downgrades %.2f× (median of the rounds), %.2f× (fastest); medians %s and %s; floor dpkg -i %s",
		downMed, downMin, ms(med["gpuenv rollback"]), ms(med["apt-get --allow-downgrades"]), ms(med["dpkg -i down"]))
	h.Report("  in gpuenv apply: the package transaction (prepare and run) %s; gpuenv plan %s (apply plans before and after); gpuenv version %s; an apt-get -s it does not run %s",
		ms(med["transaction"]), ms(med["gpuenv plan"]), ms(med["gpuenv version"]), ms(med["apt-get -s"]))
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// operationSeconds is the time apply's --json events give the package
// operation, from its start to its end.
func operationSeconds(t *testing.T, events []byte) time.Duration {
	t.Helper()
	for _, line := range strings.Split(string(events), "\n") {
		var ev struct {
			Type      string  `json:"type"`
			Seconds   float64 `json:"seconds"`
			Operation *struct {
				Kind string `json:"kind"`
			} `json:"operation"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "operation_end" && ev.Operation != nil && ev.Operation.Kind == "packages" {
			return time.Duration(ev.Seconds * float64(time.Second))
		}
	}
	t.Fatalf("no package operation in the events:\n%s", events)
	return 0
}

// checkDriverVersion asserts that the driver's six packages are at
// version, installed.
func (r *Root) checkDriverVersion(version string) {
	r.t.Helper()
	pkgs := r.Dpkg()
	for _, name := range append(slices.Clone(driverPackages), driverCompanions...) {
		if p := pkgs[name]; p.Version != version || p.Status != "installed" {
			r.t.Errorf("dpkg: %s %+v, want %s installed", name, p, version)
		}
	}
}
