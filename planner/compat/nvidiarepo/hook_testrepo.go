//go:build gpuenv_testrepo

package nvidiarepo

import "slices"

// The real-system tests build gpuenv with the tag gpuenv_testrepo and set
// these with -ldflags -X: the row of NVIDIA's directory testDir then
// names the tests' repository (testURL, a file:// URL inside the root)
// and its key (testKeyFile beside it, testFingerprint). No flag or
// variable of a normal build reaches them: this file is not in it.
var testDir, testURL, testKeyFile, testFingerprint string

func testRows(rows []Repository) []Repository {
	if testDir == "" {
		return rows
	}
	out := slices.Clone(rows)
	for i, r := range out {
		if r.Dir == testDir {
			out[i].URL = testURL
			out[i].Key = Key{File: testKeyFile, Fingerprint: testFingerprint, Confirmed: true, Source: "the real-system tests' own key (gpuenv_testrepo build)"}
		}
	}
	return out
}
