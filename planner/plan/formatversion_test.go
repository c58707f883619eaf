package plan

import (
	"strings"
	"testing"
)

// A reader accepts every minor version of the shared format's major and
// of the 1.x plans saved before it, and refuses other majors,
// pre-releases, and text that is no version.
func TestCheckFormatVersion(t *testing.T) {
	for _, tc := range []struct{ v, err string }{
		{v: FormatVersion},
		{v: "3.7"},
		// Plans saved before gpuenv's documents shared one version.
		{v: "1.0"},
		{v: "1.2"},
		{v: "1"},
		{v: "2.0", err: "plan format 2.0 is not known to this gpuenv (it reads 3.x and 1.x, writes " + FormatVersion + ")"},
		{v: "0.9", err: "plan format 0.9 is not known"},
		{v: "1.1-rc.1", err: `plan format version "1.1-rc.1" is not a version`},
		{v: "one", err: `plan format version "one" is not a version`},
		{v: "", err: `plan format version "" is not a version`},
	} {
		err := CheckFormatVersion(tc.v)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("CheckFormatVersion(%q) = %v, want nil", tc.v, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("CheckFormatVersion(%q) = %v, want an error containing %q", tc.v, err, tc.err)
		}
	}
}
