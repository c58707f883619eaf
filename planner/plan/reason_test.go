package plan

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Every reason code is valid, distinct, written as itself in JSON, and
// documented in the JSON formats chapter's table (docs/json.md); a word
// outside the set is not valid.
func TestReasonCodes(t *testing.T) {
	readme, err := os.ReadFile("../../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[ReasonCode]bool{}
	for _, c := range ReasonCodes {
		if !c.Valid() || c == "" || seen[c] {
			t.Errorf("code %q: valid %v, seen before %v", c, c.Valid(), seen[c])
		}
		seen[c] = true
		b, err := json.Marshal(Step{Address: "cuda", ReasonCode: c})
		if err != nil || !strings.Contains(string(b), `"action_reason":"`+string(c)+`"`) {
			t.Errorf("code %q marshals as %s, %v", c, b, err)
		}
		if !strings.Contains(string(readme), "| `"+string(c)+"` |") {
			t.Errorf("docs/json.md's plan section does not document %q", c)
		}
	}
	if ReasonCode("because").Valid() {
		t.Error(`"because" is valid`)
	}
	if !ReasonCode("").Valid() {
		t.Error("a 1.0 plan's empty code is not valid")
	}
	// A step without a code (format 1.0) omits the field.
	if b, _ := json.Marshal(Step{Address: "cuda"}); strings.Contains(string(b), "action_reason") {
		t.Errorf("an empty code is written: %s", b)
	}
}
