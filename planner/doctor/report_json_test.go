package doctor_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// doctor --json carries, beside the checks, the context and the loader
// resolution they judge.
func TestReportCarriesContextAndLoader(t *testing.T) {
	c := readCase(t, "testdata/corpus/nvjitlink-cuda124-torch27")
	r := c.report(t, "testdata/corpus/nvjitlink-cuda124-torch27")
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Context struct {
			Kind string `json:"kind"`
		} `json:"context"`
		Loader struct {
			Consumers []struct {
				Kind      string `json:"kind"`
				Framework string `json:"framework"`
				Libraries []struct {
					Soname  string `json:"soname"`
					Path    string `json:"path"`
					Via     string `json:"via"`
					Shadows []struct {
						Path string `json:"path"`
					} `json:"shadows"`
				} `json:"libraries"`
			} `json:"consumers"`
		} `json:"loader"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Context.Kind != "host" {
		t.Errorf("context kind %q", doc.Context.Kind)
	}
	found := false
	for _, cons := range doc.Loader.Consumers {
		for _, l := range cons.Libraries {
			if cons.Framework == "pytorch" && l.Soname == "libnvJitLink.so.12" && l.Via == "LD_LIBRARY_PATH" && strings.HasPrefix(l.Path, "/usr/local/cuda-12.4/") && len(l.Shadows) > 0 {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("the report's loader lacks torch's libnvJitLink.so.12 from /usr/local/cuda-12.4 hiding the wheel's:\n%s", data)
	}
}

// doctor --json carries the session's sources, the device access facts
// and each environment's GPU libraries and unmet requirements beside
// the checks that judge them.
func TestReportCarriesSessionDeviceAccessAndLibraries(t *testing.T) {
	var doc struct {
		Session struct {
			StubLibraries []struct {
				Path    string `json:"path"`
				Setting struct {
					Name string `json:"name"`
				} `json:"setting"`
			} `json:"stub_libraries"`
		} `json:"session"`
		DeviceAccess struct {
			CgroupVersion string   `json:"cgroup_version"`
			DeviceRules   []string `json:"device_rules"`
		} `json:"device_access"`
		Python []struct {
			Interpreter string `json:"interpreter"`
			Libraries   []struct {
				Distribution string `json:"distribution"`
			} `json:"gpu_libraries"`
		} `json:"python_libraries"`
	}
	decode := func(name string) {
		t.Helper()
		dir := "testdata/corpus/" + name
		c := readCase(t, dir)
		data, err := json.Marshal(c.report(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
	}
	decode("numba-stub-ld-library-path")
	if len(doc.Session.StubLibraries) == 0 || doc.Session.StubLibraries[0].Path != "/scratch/yhao24/opt/cuda-12.1/lib64/stubs/libcuda.so" || doc.Session.StubLibraries[0].Setting.Name != "LD_LIBRARY_PATH" {
		t.Errorf("session: %+v", doc.Session)
	}
	decode("container-daemon-reload-cgroup-v1")
	if doc.DeviceAccess.CgroupVersion != "v1" || len(doc.DeviceAccess.DeviceRules) != 1 || doc.DeviceAccess.DeviceRules[0] != "c 195:* m" {
		t.Errorf("device access: %+v", doc.DeviceAccess)
	}
	decode("onnxruntime-cpu-and-gpu-wheels")
	found := 0
	for _, p := range doc.Python {
		if p.Interpreter != "/opt/ort/bin/python" {
			continue
		}
		for _, l := range p.Libraries {
			if l.Distribution == "onnxruntime" || l.Distribution == "onnxruntime-gpu" {
				found++
			}
		}
	}
	if found != 2 {
		t.Errorf("python libraries: %+v", doc.Python)
	}
}
