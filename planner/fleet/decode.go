package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	fastjson "github.com/goccy/go-json"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// SchemaError is a document of a major schema version this gpuenv does
// not read.
type SchemaError struct {
	// Version is the document's schema_version; 0 when it has none.
	Version int
}

func (e *SchemaError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("not an observation document: it has no schema_version (gpuenv observe --json writes schema_version %d)", facts.SchemaVersion)
	}
	return fmt.Sprintf("the document's schema_version is %d, and this gpuenv reads schema_version %d only: plan it with a gpuenv of its version, or observe the host again", e.Version, facts.SchemaVersion)
}

// Decode reads one observation document. It refuses a document of
// another major schema version, naming both, and returns the facts added
// to the schema since an older document was written that it lacks (none
// for a document of this gpuenv's minor or later, which is the one case
// read in a single pass).
func Decode(data []byte) (*facts.Observation, []facts.Addition, error) {
	obs, _, lacks, err := decode(data)
	return obs, lacks, err
}

// document is an observation document as a collector may hand it over:
// the observation, and its note of the host's last apply.
type document struct {
	facts.Observation
	LastApply json.RawMessage `json:"last_apply"`
}

// decode is Decode, and the value of "last_apply" when the document has
// one.
func decode(data []byte) (*facts.Observation, json.RawMessage, []facts.Addition, error) {
	doc := new(document)
	// goccy/go-json decodes a document in a third of the CPU time
	// encoding/json takes (docs/incoming/fleet.md has the figures), and a
	// fleet of distinct hosts is mostly decoding. Its errors are not
	// encoding/json's, whose offsets and types the message below reads,
	// so a document it refuses is decoded again by encoding/json, which
	// says why; FuzzDecode holds the two to the same observation.
	if fastjson.Unmarshal(data, doc) == nil {
		obs, lacks, err := checked(&doc.Observation, data)
		last := doc.LastApply
		if last == nil {
			// The document has none, which is what JSON's null says
			// too: lastApplyOf need not search the document for it.
			last = json.RawMessage("null")
		}
		return obs, last, lacks, err
	}
	obs := new(facts.Observation)
	if err := json.Unmarshal(data, obs); err != nil {
		// A document of another major may not decode at all; its
		// version is what the reader must hear of first.
		var head struct {
			SchemaVersion int `json:"schema_version"`
		}
		if json.Unmarshal(data, &head) == nil && head.SchemaVersion != facts.SchemaVersion {
			return nil, nil, nil, &SchemaError{Version: head.SchemaVersion}
		}
		return nil, nil, nil, invalid(err)
	}
	// encoding/json read what goccy/go-json did not: the note of the last
	// apply is read apart, and only here.
	obs, lacks, err := checked(obs, data)
	return obs, nil, lacks, err
}

// checked is obs, decoded from data, when it is of this gpuenv's major
// version, with the facts it lacks.
func checked(obs *facts.Observation, data []byte) (*facts.Observation, []facts.Addition, error) {
	if obs.SchemaVersion != facts.SchemaVersion {
		return nil, nil, &SchemaError{Version: obs.SchemaVersion}
	}
	if obs.SchemaMinor >= facts.SchemaMinor {
		return obs, nil, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, nil, invalid(err)
	}
	var lacks []facts.Addition
	for _, a := range facts.Additions {
		if _, ok := keys[a.Key]; !ok && !a.Label {
			lacks = append(lacks, a)
		}
	}
	return obs, lacks, nil
}

// invalid says where a document stops being an observation document,
// and in what way, without quoting it: encoding/json's errors quote the
// byte or the number at fault, and a document may be any file the user
// running gpuenv can read (a symlink to a root-only one, say), so what
// the error prints must describe it, never show it.
func invalid(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not a valid observation document: at byte %d: %s", syn.Offset, unquoted(syn))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 5" quotes it
		return fmt.Errorf("not a valid observation document: at byte %d: %s holds a JSON %s, where an observation has %s", typ.Offset, field, kind, typ.Type)
	}
	return errors.New("not a valid observation document: it does not decode as one")
}

// unquoted is a syntax error's text without the character it quotes:
// "invalid character 'r' looking for beginning of value" becomes "a
// character JSON does not allow, looking for beginning of value".
func unquoted(syn *json.SyntaxError) string {
	const prefix = "invalid character '"
	msg := syn.Error()
	if !strings.HasPrefix(msg, prefix) {
		return msg
	}
	// The quoted character is one byte at least, so its closing quote
	// is the first one followed by a space after it.
	if i := strings.Index(msg[len(prefix)+1:], "' "); i >= 0 {
		return "a character JSON does not allow, " + msg[len(prefix)+1+i+2:]
	}
	return "a character JSON does not allow"
}
