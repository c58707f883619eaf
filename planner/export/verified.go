package export

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// VerifiedFile is the verify record's name in the state directory: what
// the last gpuenv verify found on each GPU, which re-admits a GPU whose
// Xids it passed after.
const VerifiedFile = "verified.json"

// ReadVerified decodes a verify record, refusing one that does not name
// its boot: without it, it could re-admit a GPU for another boot's pass.
func ReadVerified(data []byte) (*facts.VerifyRecord, error) {
	var r facts.VerifyRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("the verify record: %w", err)
	}
	if r.BootID == "" || r.Time == "" {
		return nil, fmt.Errorf("the verify record names no boot or time")
	}
	return &r, nil
}
