package plan

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
)

// CheckFormatVersion accepts a plan document's format_version when this
// gpuenv can read it: any minor version of its own major, since minor
// versions only add fields. Format versions are semantic versions (unlike
// the versions of what gpuenv installs), so Masterminds/semver reads them.
func CheckFormatVersion(v string) error {
	got, err := semver.NewVersion(v)
	if err != nil {
		return fmt.Errorf("plan format version %q is not a version such as %s", v, FormatVersion)
	}
	own := semver.MustParse(FormatVersion)
	if got.Major() != own.Major() || got.Prerelease() != "" {
		return fmt.Errorf("plan format %s is not known to this gpuenv (it reads %d.x, writes %s)", v, own.Major(), FormatVersion)
	}
	return nil
}
