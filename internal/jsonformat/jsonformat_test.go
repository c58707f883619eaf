package jsonformat

import (
	"strings"
	"testing"
)

// A reader accepts every minor of the shared major and of the legacy
// majors it is given, and refuses other majors, pre-releases and text that
// is no version, naming the document.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		v      string
		legacy []int
		err    string
	}{
		{v: Version},
		{v: "3.7"},
		{v: "3"},
		{v: "1.2", legacy: []int{LegacyMajor}},
		{v: "1.2", err: "plan format 1.2 is not known to this gpuenv (it reads 3.x, writes 3.0)"},
		{v: "2.0", legacy: []int{LegacyMajor}, err: "plan format 2.0 is not known to this gpuenv (it reads 3.x and 1.x, writes 3.0)"},
		{v: "3.1-rc.1", err: `plan format version "3.1-rc.1" is not a version`},
		{v: "03.0", err: "is not a version"},
		{v: "one", err: `plan format version "one" is not a version`},
		{v: "", err: `plan format version "" is not a version`},
	} {
		err := Check("plan", tc.v, tc.legacy...)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Check(%q, %v) = %v, want nil", tc.v, tc.legacy, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Check(%q, %v) = %v, want an error containing %q", tc.v, tc.legacy, err, tc.err)
		}
	}
}
