package planner

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// FuzzReadSavedPlan: whatever file apply is handed, ReadSavedPlan
// returns a plan or an error, never both and never a panic; a plan it
// accepts is a saved plan of this layout whose operations validate, and
// written out again it reads back as the same plan.
func FuzzReadSavedPlan(f *testing.F) {
	var buf bytes.Buffer
	if err := WriteSavedPlan(&buf, samplePlan(), fingerprintFacts(), nil, stackKinds()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	var empty bytes.Buffer
	if err := WriteSavedPlan(&empty, &plan.Plan{FormatVersion: plan.FormatVersion}, fingerprintFacts(), nil, stackKinds()); err != nil {
		f.Fatal(err)
	}
	f.Add(empty.Bytes())
	for _, s := range []string{``, `null`, `{}`, `{"gpuenv_saved_plan":1}`, `{"gpuenv_saved_plan":2,"format_version":"1.2"}`,
		`{"gpuenv_saved_plan":1,"format_version":"1.9","facts_fingerprint":{"algorithm":"sha256","digest":"x"},"steps":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sp, err := ReadSavedPlan(bytes.NewReader(data))
		if (sp == nil) == (err == nil) {
			t.Fatalf("ReadSavedPlan(%q) = %v, %v", data, sp, err)
		}
		if err != nil {
			return
		}
		if sp.Marker != SavedPlanMarker || plan.CheckFormatVersion(sp.FormatVersion) != nil || sp.Plan.Validate() != nil {
			t.Fatalf("accepted a plan that is not one: %+v", sp)
		}
		again, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		sp2, err := ReadSavedPlan(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("a saved plan written out again is refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(sp, sp2) {
			t.Fatalf("a saved plan written out again reads as another:\n%+v\n%+v", sp, sp2)
		}
	})
}
