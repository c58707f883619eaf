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
