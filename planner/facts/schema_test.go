package facts

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// firstKeys are the top-level keys of the first document of schema
// version 1, which every document of that version has.
var firstKeys = []string{
	"schema_version", "root", "os", "kernel", "pci_gpus", "nvml", "driver", "device_nodes",
	"packages", "cuda", "cudnn", "python_environments", "groups", "environment", "problems", "warnings",
}

// TestAdditions: every top-level key of the document is of the first
// document or listed in Additions, once, with a minor no later than
// SchemaMinor. A fact added without its entry would let an older
// document's missing fact pass for an empty one.
func TestAdditions(t *testing.T) {
	listed := map[string]bool{}
	for _, a := range Additions {
		if listed[a.Key] || slices.Contains(firstKeys, a.Key) || a.Minor > SchemaMinor || a.What == "" {
			t.Errorf("addition %+v: listed twice, of the first document, or of a later minor than %d", a, SchemaMinor)
		}
		listed[a.Key] = true
	}
	typ := reflect.TypeFor[Observation]()
	var keys []string
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if key == "-" {
			// Never written (Predicted): no document holds it.
			continue
		}
		keys = append(keys, key)
		if key != "schema_minor" && !listed[key] && !slices.Contains(firstKeys, key) {
			t.Errorf("%q is neither of the first document nor in Additions", key)
		}
	}
	for k := range listed {
		if !slices.Contains(keys, k) {
			t.Errorf("addition %q is no key of the document", k)
		}
	}
}
