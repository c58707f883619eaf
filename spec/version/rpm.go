package version

import (
	"fmt"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// rpmEVR is an RPM package's [epoch:]version[-release]: rpm allows
// letters, digits and . _ + ~ ^ in the version and the release, which a
// hyphen separates.
var rpmEVR = lazyregexp.New(`^(?:[0-9]+:)?[A-Za-z0-9][A-Za-z0-9._+~^]*(?:-[A-Za-z0-9._+~^]+)?$`)

// CheckRPM reports whether s is an RPM version as dnf pins it, in
// "name-[epoch:]version-release".
func CheckRPM(s string) error {
	if !rpmEVR.MatchString(s) {
		return fmt.Errorf("invalid rpm version %q: it is [epoch:]version-release, in letters, digits and . _ + ~ ^", s)
	}
	return nil
}
