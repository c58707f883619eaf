package plan

import (
	"bytes"
	"testing"
	"time"
)

// TestApplyStatusEncode pins the status file's bytes, as apply has always
// written them, and that its one reader reads them back.
func TestApplyStatusEncode(t *testing.T) {
	st := ApplyStatus{
		Unfinished: true, Generation: 7, Kind: KindApply, Status: StatusRunning,
		Command: "apply", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), PID: 4242,
		Updated: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		Message: "generation 7 (apply) is unfinished",
	}
	want := `{
  "unfinished": true,
  "generation": 7,
  "kind": "apply",
  "status": "running",
  "command": "apply",
  "started": "2026-01-02T03:04:05Z",
  "pid": 4242,
  "updated": "2026-01-02T03:04:06Z",
  "message": "generation 7 (apply) is unfinished"
}
`
	data, err := st.Encode()
	if err != nil || string(data) != want {
		t.Fatalf("Encode = %s, %v; want %s", data, err, want)
	}
	back, err := ReadApplyStatus(bytes.NewReader(data))
	if err != nil || *back != st {
		t.Errorf("read back %+v, %v; want %+v", back, err, st)
	}
	// A summary with no generation yet keeps the members without omitempty.
	data, _ = (&ApplyStatus{Updated: st.Updated}).Encode()
	if want := "{\n  \"unfinished\": false,\n  \"generation\": 0,\n  \"kind\": \"\",\n  \"status\": \"\",\n  \"updated\": \"2026-01-02T03:04:06Z\"\n}\n"; string(data) != want {
		t.Errorf("Encode of an empty summary = %q, want %q", data, want)
	}
}
