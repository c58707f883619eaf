package main

import (
	"runtime"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/internal/jsonformat"
	"github.com/gpuenv/gpuenv/internal/release"
)

type versionInfo struct {
	FormatVersion string `json:"format_version"`
	Version       string `json:"version"`
	GoVersion     string `json:"go_version"`
	Platform      string `json:"platform"`
	Revision      string `json:"vcs_revision,omitempty"`
	// JSONFormatVersion is the one format version every JSON document
	// and stream of this gpuenv carries (docs/json.md).
	JSONFormatVersion string `json:"json_format_version"`
	// Formats are the versions of the JSON documents this gpuenv
	// prints, by document (jsonFormats): each is JSONFormatVersion.
	Formats map[string]string `json:"formats"`
}

// buildVersion describes the running binary. Its Version is the version of
// the package that installed it (deploy/package reads it from the binary).
func buildVersion() versionInfo {
	b := release.Current()
	return versionInfo{FormatVersion: versionFormatVersion, JSONFormatVersion: jsonformat.Version, Formats: formatVersions(), Version: b.Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Revision: b.Revision}
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gpuenv's version",
		Long: `Version prints gpuenv's version: the release, and the commit it was built
from as "+g" and 12 hex digits (".dirty" when the tree had uncommitted
changes). It is the version of the .deb or .rpm that installed it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return newVersionView(g).Version(buildVersion())
		},
	}
	addJSONFlag(cmd, g)
	return cmd
}
