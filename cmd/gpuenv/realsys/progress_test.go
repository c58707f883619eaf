//go:build realsystem

package realsys

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// progressEvent is a progress event of `apply --json`, as a program
// following the stream reads it.
type progressEvent struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"@timestamp"`
	Operation *struct {
		Index int    `json:"index"`
		Step  string `json:"step"`
	} `json:"operation"`
	Progress *struct {
		Command int      `json:"command"`
		Phase   string   `json:"phase"`
		Package string   `json:"package"`
		Index   int      `json:"index"`
		Count   int      `json:"count"`
		Percent *float64 `json:"percent"`
		Bytes   int64    `json:"bytes"`
	} `json:"progress"`
}

// Scenario: a real apt-get install in the Debian root, fetching the
// driver's packages from the archive into the root's own, empty, package
// cache, reports its progress through APT::Status-Fd: `apply --json`
// carries progress events of the transaction — downloading, with the
// bytes apt wrote, then dpkg's phases naming the packages, each of the
// transaction's packages counted — with percentages that rise and never
// go back within a command, at most four a second.
func TestProgressOfRealApt(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})
	// The shared package cache would spare apt the download.
	r.unmount(r.Path("/var/cache/apt/archives"))
	r.WriteFile("/root/driver/gpuenv.hcl", driverSpec("535.261.03"))
	res := r.Gpuenv("apply", "--json", "--auto-approve", "/root/driver")
	if res.Code != 0 {
		t.Fatalf("apply: %s", res)
	}
	r.checkDriver(driverOld)

	var evs []progressEvent
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		var ev progressEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON object: %v: %s", err, line)
		}
		if ev.Type == "progress" {
			if ev.Operation == nil || ev.Progress == nil {
				t.Fatalf("progress without its operation or progress: %s", line)
			}
			evs = append(evs, ev)
		}
	}
	named := map[string]bool{}
	last := map[string]float64{}
	rose := map[bool]bool{} // by whether downloading
	phases := map[string]int{}
	var fetched int64
	for i, ev := range evs {
		p := ev.Progress
		phases[p.Phase]++
		if i > 0 && ev.Operation.Index == evs[i-1].Operation.Index {
			if gap := ev.Timestamp.Sub(evs[i-1].Timestamp); gap < 150*time.Millisecond {
				t.Errorf("progress %s after the one before", gap)
			}
		}
		switch p.Phase {
		case "downloading":
			fetched = max(fetched, p.Bytes)
		case "unpacking", "configuring":
			if p.Package == "" || p.Count < len(driverPackages) || p.Index < 1 || p.Index > p.Count {
				t.Errorf("%s %q (%d of %d)", p.Phase, p.Package, p.Index, p.Count)
			}
			named[p.Package] = true
		}
		if p.Percent == nil {
			continue
		}
		scale := fmt.Sprintf("%d %d %v", ev.Operation.Index, p.Command, p.Phase == "downloading")
		if prev, ok := last[scale]; ok {
			if *p.Percent < prev {
				t.Errorf("percent went back from %.1f to %.1f (%s)", prev, *p.Percent, p.Phase)
			}
			if *p.Percent > prev {
				rose[p.Phase == "downloading"] = true
			}
		}
		last[scale] = *p.Percent
	}
	var seq []string
	for _, ev := range evs {
		step := ev.Progress.Phase + " " + ev.Progress.Package
		if len(seq) == 0 || seq[len(seq)-1] != step {
			seq = append(seq, step)
		}
	}
	t.Logf("%d progress events: %v; %d bytes fetched; in order: %s", len(evs), phases, fetched, strings.Join(seq, ", "))
	if phases["kernel_module"] > 0 {
		t.Errorf("a kernel module's build shown for a driver installed without kernel modules")
	}
	if phases["unpacking"] == 0 || phases["configuring"] == 0 || !rose[false] {
		t.Errorf("want dpkg's phases with a rising percentage; phases %v, rising %v", phases, rose)
	}
	for _, p := range append(slices.Clone(driverPackages), driverCompanions...) {
		if !named[p] {
			t.Logf("no progress event named %s (sampled four times a second)", p)
		}
	}
	if len(named) == 0 {
		t.Error("no progress event named a package")
	}
	log := string(r.readFile("/var/lib/gpuenv/generations/1/log"))
	// A download sampled more than once has bytes by its second sample.
	// One from a mirror next door can end within the first 250 ms, before
	// any sample: then apt's log must show that it fetched.
	switch {
	case phases["downloading"] > 1 && fetched <= 0:
		t.Errorf("want the download's progress with its bytes; phases %v, %d bytes", phases, fetched)
	case phases["downloading"] == 0 && !strings.Contains(log, "\nGet:"):
		t.Errorf("no download progress, and apt's log shows no fetch; phases %v", phases)
	case phases["downloading"] <= 1:
		t.Logf("the download ended within one sampling period (%d downloading events)", phases["downloading"])
	}
	if !strings.Contains(log, "$ apt-get -o APT::Status-Fd=3 ") || strings.Contains(log, "pmstatus:") {
		t.Errorf("the log does not show apt run with its status descriptor, or has its status lines:\n%s", log)
	}
}
