package main

import (
	"fmt"
	"io"
)

// versionView shows gpuenv's version. One is chosen from the flags when
// the command starts (newVersionView).
type versionView interface {
	// Version shows v and returns the first write error.
	Version(v versionInfo) error
}

// newVersionView returns the view the flags ask for.
func newVersionView(g *globalOptions) versionView {
	if g.JSON {
		return &versionJSON{g: g}
	}
	return &versionHuman{w: g.Stdout}
}

// versionHuman writes a line, and a second with the VCS revision when the
// build recorded one.
type versionHuman struct {
	w io.Writer
}

var _ versionView = (*versionHuman)(nil)

func (h *versionHuman) Version(v versionInfo) error {
	if _, err := fmt.Fprintf(h.w, "gpuenv %s (%s, %s)\n", v.Version, v.GoVersion, v.Platform); err != nil {
		return err
	}
	if v.Revision == "" {
		return nil
	}
	_, err := fmt.Fprintf(h.w, "revision %s\n", v.Revision)
	return err
}

// versionJSON writes v as a JSON object on stdout.
type versionJSON struct {
	g *globalOptions
}

var _ versionView = (*versionJSON)(nil)

func (j *versionJSON) Version(v versionInfo) error { return writeJSON(j.g, v) }
