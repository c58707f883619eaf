package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestVerifyCPU runs gpuenv verify --device cpu for real, with Debian's
// python3-torch in /usr/bin/python3 (.ci/run installs it): the workload
// trains, the loss falls, the JSON document is complete, and the table
// shows it. There is no framework-free check on the CPU.
func TestVerifyCPU(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import torch (apt-get install python3-torch): %v", err)
	}
	// gpuenv's own environment, without sudo's: the workload runs as this
	// user.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDO_") {
			env = append(env, kv)
		}
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"verify", "--device", "cpu", "--python", "/usr/bin/python3", "--json"}, nil, &out, &errOut, env)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	var rep struct {
		FormatVersion    string `json:"format_version"`
		Device           string `json:"device"`
		CUDACheckSkipped string `json:"cuda_check_skipped"`
		Verified         bool   `json:"verified"`
		GPUs             []any  `json:"gpus"`
		Results          []struct {
			Interpreter string    `json:"interpreter"`
			Framework   string    `json:"framework"`
			Outcome     string    `json:"outcome"`
			Device      string    `json:"device"`
			AMP         string    `json:"amp"`
			Steps       int       `json:"steps"`
			Losses      []float64 `json:"losses"`
			StepSeconds float64   `json:"step_seconds"`
			Tensors     int       `json:"tensors_on_device"`
			Identity    *struct {
				UID int `json:"uid"`
			} `json:"identity"`
		} `json:"results"`
		Explanation []any `json:"explanation"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.FormatVersion != verifyFormatVersion || rep.Device != "cpu" || rep.CUDACheckSkipped == "" || !rep.Verified || len(rep.GPUs) != 0 || len(rep.Explanation) != 0 {
		t.Errorf("report: %+v", rep)
	}
	found := false
	for _, r := range rep.Results {
		if r.Interpreter != "/usr/bin/python3" || r.Framework != "pytorch" {
			continue
		}
		found = true
		if r.Outcome != "on_cpu" || r.Device != "cpu" || r.AMP != "bfloat16" || r.Steps != 20 || len(r.Losses) != 20 ||
			r.Losses[19] >= r.Losses[0] || r.StepSeconds <= 0 || r.Tensors != 14 || r.Identity == nil || r.Identity.UID != os.Getuid() {
			t.Errorf("pytorch in /usr/bin/python3: %+v", r)
		}
	}
	if !found {
		t.Fatalf("no pytorch in /usr/bin/python3 among %+v", rep.Results)
	}

	out.Reset()
	errOut.Reset()
	code = run(context.Background(), []string{"verify", "--device", "cpu", "--python", "/usr/bin/python3"}, nil, &out, &errOut, env)
	if code != exitOK || !strings.Contains(out.String(), "✓ trained on the CPU") || errOut.Len() != 0 {
		t.Errorf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	t.Logf("\n%s", out.String())
}
