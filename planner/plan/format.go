package plan

import "github.com/gpuenv/gpuenv/internal/jsonformat"

// CheckFormatVersion accepts a plan document's format_version when this
// gpuenv can read it: any minor version of the shared JSON format's major,
// since minor versions only add fields, and the 1.x of plan files saved
// before the documents shared one version, which differ in nothing else.
func CheckFormatVersion(v string) error {
	return jsonformat.Check("plan", v, jsonformat.LegacyMajor)
}
