package main

import (
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version recorded by the Go toolchain is used.
var version = ""

type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Revision  string `json:"vcs_revision,omitempty"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Revision = s.Value
			}
		}
	}
	if v.Version == "" || v.Version == "(devel)" {
		v.Version = "devel"
	}
	return v
}

func newVersionCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print gpuenv's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return newVersionView(g).Version(buildVersion())
		},
	}
	addJSONFlag(cmd, g)
	return cmd
}
