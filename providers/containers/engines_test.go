package containers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"
)

func ptr[T any](v T) *T { return &v }

// A merge keeps every setting the file had and adds the runtime; merging
// again changes nothing, so a second plan has no step.
func TestMergeDockerKeepsEverySetting(t *testing.T) {
	in := `{
  "log-driver": "json-file",
  "log-opts": {"max-size": "10m", "max-file": "3"},
  "registry-mirrors": ["https://mirror.example"],
  "max-concurrent-downloads": 12345678901234567890,
  "runtimes": {"crun": {"path": "/usr/bin/crun"}},
  "features": {"cdi": true}
}`
	out, err := MergeDocker(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	if err := json.Unmarshal([]byte(in), &before); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &after); err != nil {
		t.Fatalf("merged file is not JSON: %v\n%s", err, out)
	}
	rts := after["runtimes"].(map[string]any)
	nv := rts["nvidia"].(map[string]any)
	if nv["path"] != RuntimeBinary {
		t.Errorf("nvidia runtime = %v", nv)
	}
	delete(rts, "nvidia")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("settings changed (-before +after):\n%s", diff)
	}
	if !strings.Contains(out, "12345678901234567890") {
		t.Errorf("a large number lost its digits:\n%s", out)
	}
	again, err := MergeDocker(out, nil)
	if err != nil || again != out {
		t.Errorf("second merge changed the file (%v):\n%s", err, again)
	}
}

func TestMergeDockerDefaultRuntime(t *testing.T) {
	out, err := MergeDocker("", ptr(true))
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseDocker(out)
	if err != nil || !st.nvidia || st.defaultRuntime != "nvidia" {
		t.Fatalf("state %+v, %v:\n%s", st, err, out)
	}
	out, err = MergeDocker(out, ptr(false))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := parseDocker(out); st.defaultRuntime != "" || !st.nvidia {
		t.Errorf("default_runtime = false left %+v", st)
	}
	// A default the user chose that is not nvidia stays.
	out, _ = MergeDocker(`{"default-runtime": "crun"}`, ptr(false))
	if st, _ := parseDocker(out); st.defaultRuntime != "crun" {
		t.Errorf("default runtime crun became %q", st.defaultRuntime)
	}
}

func TestMergeDockerRefusesWhatItCannotMerge(t *testing.T) {
	for _, in := range []string{`[1]`, `{"runtimes": []}`, `{"a": 1} {"b": 2}`, `{`} {
		if _, err := MergeDocker(in, nil); err == nil {
			t.Errorf("MergeDocker(%q) succeeded", in)
		}
	}
}

const containerdV2 = `version = 2
root = "/var/lib/containerd"
oom_score = -999

[grpc]
  address = "/run/containerd/containerd.sock"
  max_recv_message_size = 16777216

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.6"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
`

const containerdV3 = `version = 3
root = "/var/lib/containerd"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      SystemdCgroup = true
      BinaryName = "/usr/bin/runc"
`

func TestMergeContainerdKeepsEverySetting(t *testing.T) {
	for name, tc := range map[string]struct {
		in     string
		plugin string
	}{
		"version 2": {containerdV2, "io.containerd.grpc.v1.cri"},
		"version 3": {containerdV3, "io.containerd.cri.v1.runtime"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := MergeContainerd(tc.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			var before, after map[string]any
			if err := toml.Unmarshal([]byte(tc.in), &before); err != nil {
				t.Fatal(err)
			}
			if err := toml.Unmarshal([]byte(out), &after); err != nil {
				t.Fatalf("merged file is not TOML: %v\n%s", err, out)
			}
			ctr := after["plugins"].(map[string]any)[tc.plugin].(map[string]any)["containerd"].(map[string]any)
			rts := ctr["runtimes"].(map[string]any)
			nv := rts["nvidia"].(map[string]any)
			opts := nv["options"].(map[string]any)
			if opts["BinaryName"] != RuntimeBinary || opts["SystemdCgroup"] != true || nv["runtime_type"] != "io.containerd.runc.v2" {
				t.Errorf("nvidia runtime = %v", nv)
			}
			if runc := rts["runc"].(map[string]any)["options"].(map[string]any); name == "version 3" && runc["BinaryName"] != "/usr/bin/runc" {
				t.Errorf("runc's own options changed: %v", runc)
			}
			delete(rts, "nvidia")
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("settings changed (-before +after):\n%s", diff)
			}
			st, err := parseContainerd(out)
			if err != nil || !st.nvidia || st.defaultRuntime != "runc" {
				t.Errorf("parsed back as %+v, %v", st, err)
			}
			again, err := MergeContainerd(out, nil)
			if err != nil || again != out {
				t.Errorf("second merge changed the file (%v):\n%s", err, again)
			}
			def, err := MergeContainerd(tc.in, ptr(true))
			if st, _ := parseContainerd(def); err != nil || st.defaultRuntime != "nvidia" {
				t.Errorf("default_runtime = true: %+v, %v", st, err)
			}
		})
	}
}

func TestMergeContainerdWithoutFile(t *testing.T) {
	out, err := MergeContainerd("", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseContainerd(out)
	if err != nil || st.version != 2 || !st.nvidia {
		t.Errorf("parsed back as %+v, %v:\n%s", st, err, out)
	}
	if _, err := MergeContainerd("root = \"/var/lib/containerd\"\n", nil); err == nil || !strings.Contains(err.Error(), "version 1") {
		t.Errorf("a version 1 file was merged: %v", err)
	}
}

func TestMergeCRIO(t *testing.T) {
	in := "[crio.runtime]\nlog_level = \"info\"\n[crio.runtime.runtimes.crun]\nruntime_path = \"/usr/bin/crun\"\n"
	out, err := MergeCRIO(in, ptr(true))
	if err != nil {
		t.Fatal(err)
	}
	st, err := parseCRIO(out)
	if err != nil || !st.nvidia || st.defaultRuntime != "nvidia" {
		t.Errorf("parsed back as %+v, %v:\n%s", st, err, out)
	}
	for _, keep := range []string{"log_level = 'info'", "runtime_path = '/usr/bin/crun'"} {
		if !strings.Contains(out, keep) {
			t.Errorf("lost %s:\n%s", keep, out)
		}
	}
}

// Taking the runtime out undoes a merge: the file holds the settings it
// held before, whichever layout and default it had.
func TestUnmergeUndoesMerge(t *testing.T) {
	for _, tc := range []struct {
		name           string
		in             string
		merge, unmerge func(string) (string, error)
		decode         func(string) (map[string]any, error)
	}{{
		name:  "docker",
		in:    `{"log-driver": "json-file", "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}, "max-concurrent-downloads": 7}`,
		merge: func(s string) (string, error) { return MergeDocker(s, ptr(true)) }, unmerge: UnmergeDocker, decode: decodeJSONObject,
	}, {
		name:  "docker without runtimes",
		in:    `{"log-driver": "json-file"}`,
		merge: func(s string) (string, error) { return MergeDocker(s, nil) }, unmerge: UnmergeDocker, decode: decodeJSONObject,
	}, {
		name:  "containerd v2",
		in:    "version = 2\noom_score = -999\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"runc\"\n  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n    SystemdCgroup = true\n",
		merge: func(s string) (string, error) { return MergeContainerd(s, ptr(true)) }, unmerge: UnmergeContainerd, decode: decodeTOML,
	}, {
		name:  "containerd v3",
		in:    "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd]\n  default_runtime_name = \"runc\"\n  [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\n    runtime_type = \"io.containerd.runc.v2\"\n",
		merge: func(s string) (string, error) { return MergeContainerd(s, ptr(true)) }, unmerge: UnmergeContainerd, decode: decodeTOML,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			merged, err := tc.merge(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(merged, "nvidia") == 0 {
				t.Fatalf("the merge added no runtime:\n%s", merged)
			}
			out, err := tc.unmerge(merged)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tc.decode(tc.in)
			got, err := tc.decode(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if d := cmp.Diff(normalize(want), normalize(got)); d != "" {
				t.Errorf("after merge and unmerge (-before +after):\n%s\n%s", d, out)
			}
		})
	}

	// A default that names nvidia, set by hand, gives way to runc.
	out, err := UnmergeContainerd("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"nvidia\"\n")
	if err != nil || !strings.Contains(out, "default_runtime_name = 'runc'") {
		t.Errorf("%v\n%s", err, out)
	}
	if _, err := UnmergeDocker("[1]"); err == nil {
		t.Error("a daemon.json that is not an object is refused")
	}
}
