package nvidiarepo

import (
	"fmt"
	"strings"
)

// Reading and checking the keys themselves is providers/host/pgpkey's
// (ReadKey, VerifyKey); the table needs only the fingerprints' form.

// NormalizeFingerprint writes a fingerprint as the table does: upper-case
// hex without spaces.
func NormalizeFingerprint(f string) string {
	return strings.ToUpper(strings.ReplaceAll(f, " ", ""))
}

// CheckFingerprint reports whether f is a full version 4 fingerprint: 40
// upper-case hex digits.
func CheckFingerprint(f string) error {
	if len(f) != 40 {
		return fmt.Errorf("fingerprint %q is not 40 hex digits", f)
	}
	for _, c := range f {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'F') {
			return fmt.Errorf("fingerprint %q is not upper-case hex", f)
		}
	}
	return nil
}
