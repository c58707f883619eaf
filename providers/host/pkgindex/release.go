package pkgindex

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// releaseFields are the fields of a Release file the facts keep; the
// checksum lists that make up most of the file are not parsed.
var releaseFields = map[string]bool{
	"Origin": true, "Label": true, "Suite": true, "Codename": true, "Version": true, "Date": true,
	"NotAutomatic": true, "ButAutomaticUpgrades": true,
}

// parseRelease reads the fields of a Release or InRelease file. An
// InRelease file is the same text clear-signed: the armor is removed and
// the signature not checked, which apt did when it fetched the file.
func parseRelease(data []byte) (facts.ReleaseData, error) {
	text, err := clearText(data)
	if err != nil {
		return facts.ReleaseData{}, err
	}
	paras, err := pkgdb.Paragraphs(keptLines(text, releaseFields))
	if err != nil {
		return facts.ReleaseData{}, err
	}
	if len(paras) == 0 {
		return facts.ReleaseData{}, errors.New("no fields")
	}
	p := paras[0]
	return facts.ReleaseData{
		Origin: p.Values["Origin"], Label: p.Values["Label"], Suite: p.Values["Suite"], Codename: p.Values["Codename"],
		Version: p.Values["Version"], Date: p.Values["Date"],
		NotAutomatic:         yes(p.Values["NotAutomatic"]),
		ButAutomaticUpgrades: yes(p.Values["ButAutomaticUpgrades"]),
	}, nil
}

// yes is apt's reading of a flag field (pkgTagSection::FindFlag).
func yes(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "yes", "true", "with", "on", "enable":
		return true
	}
	return false
}

var (
	armorBegin = []byte("-----BEGIN PGP SIGNED MESSAGE-----")
	sigBegin   = []byte("\n-----BEGIN PGP SIGNATURE-----")
)

// clearText returns the signed text of an OpenPGP clear-signed message
// (RFC 4880, section 7), or data itself when it is not one: the text
// starts after the armor headers' blank line and ends before the
// signature, and a line the signer dash-escaped loses its "- ".
func clearText(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, armorBegin) {
		return data, nil
	}
	start := bytes.Index(data, []byte("\n\n"))
	end := bytes.Index(data, sigBegin)
	if start < 0 || end < start {
		return nil, fmt.Errorf("a clear-signed file without its text or signature")
	}
	text := data[start+2 : end+1]
	if !bytes.Contains(text, []byte("\n- ")) && !bytes.HasPrefix(text, []byte("- ")) {
		return text, nil
	}
	var out []byte
	for line := range bytes.Lines(text) {
		out = append(out, bytes.TrimPrefix(line, []byte("- "))...)
	}
	return out, nil
}

// keptLines returns the lines of data's first paragraph that belong to
// the fields in keep, continuation lines included, for the deb822 parser:
// the rest of a Release file (its checksum lists, thousands of lines)
// would cost it a string per line for nothing.
func keptLines(data []byte, keep map[string]bool) []byte {
	var out []byte
	kept := false
	for line := range bytes.Lines(data) {
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		if line[0] != ' ' && line[0] != '\t' {
			k, _, _ := bytes.Cut(line, []byte(":"))
			kept = keep[string(bytes.TrimSpace(k))]
		}
		if kept {
			out = append(out, line...)
		}
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return out
}
