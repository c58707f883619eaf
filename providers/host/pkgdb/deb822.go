package pkgdb

import (
	"bytes"
	"errors"
	"io"

	"pault.ag/go/debian/control"
)

// Paragraph is one deb822 paragraph as the control-file parser reads it:
// Order lists the field names as they come, Values holds each field's
// value, continuation lines joined with newlines (a " ." line read as an
// empty one). It does not keep the text as written: what must be written
// back byte for byte needs its own reader.
type Paragraph = control.Paragraph

// Paragraphs reads every paragraph of deb822 data (a control file, a
// status file, apt's lists and Release files) with the control-file
// parser, the one reader of the format.
func Paragraphs(data []byte) ([]Paragraph, error) {
	r, err := control.NewParagraphReader(bytes.NewReader(data), nil)
	if err != nil {
		return nil, err
	}
	var out []Paragraph
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, *p)
	}
}
