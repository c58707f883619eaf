package applytest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Wheel is a small test distribution, built as a real wheel that real pip
// installs.
type Wheel struct {
	Name, Version string
	// Files are paths relative to site-packages ("torch/version.py").
	Files map[string]string
}

var wheelRun = regexp.MustCompile(`[-_.]+`)

// normName is PEP 503's normalised name.
func normName(n string) string { return wheelRun.ReplaceAllString(strings.ToLower(n), "-") }

// distName is the name as wheel file names and .dist-info directories
// spell it.
func distName(n string) string { return wheelRun.ReplaceAllString(n, "_") }

// FileName is the wheel's file name.
func (w Wheel) FileName() string {
	return fmt.Sprintf("%s-%s-py3-none-any.whl", distName(w.Name), w.Version)
}

// Bytes is the wheel: the files, and a .dist-info with METADATA, WHEEL and
// a RECORD of every file with its hash, as pip checks it.
func (w Wheel) Bytes() ([]byte, error) {
	info := fmt.Sprintf("%s-%s.dist-info", distName(w.Name), w.Version)
	files := map[string]string{}
	for k, v := range w.Files {
		files[k] = v
	}
	files[info+"/METADATA"] = fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: gpuenv test distribution\n", w.Name, w.Version)
	files[info+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: gpuenv-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		f, err := zw.Create(n)
		if err != nil {
			return nil, err
		}
		f.Write([]byte(files[n]))
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	f, err := zw.Create(info + "/RECORD")
	if err != nil {
		return nil, err
	}
	f.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteIndex lays out a PEP 503 simple index of wheels under dir and
// returns its URL (file://dir/simple/), which real pip and the fake both
// read.
func WriteIndex(dir string, wheels ...Wheel) (string, error) {
	simple := filepath.Join(dir, "simple")
	byProject := map[string][]string{}
	for _, w := range wheels {
		p := normName(w.Name)
		pd := filepath.Join(simple, p)
		if err := os.MkdirAll(pd, 0o755); err != nil {
			return "", err
		}
		data, err := w.Bytes()
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(pd, w.FileName()), data, 0o644); err != nil {
			return "", err
		}
		sum := sha256.Sum256(data)
		byProject[p] = append(byProject[p], fmt.Sprintf(`<a href="%s#sha256=%x">%s</a><br>`, html.EscapeString(w.FileName()), sum, html.EscapeString(w.FileName())))
	}
	var top strings.Builder
	top.WriteString("<!DOCTYPE html>\n<html><body>\n")
	projects := make([]string, 0, len(byProject))
	for p := range byProject {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	for _, p := range projects {
		fmt.Fprintf(&top, "<a href=\"%s/\">%s</a><br>\n", p, p)
		page := "<!DOCTYPE html>\n<html><body>\n" + strings.Join(byProject[p], "\n") + "\n</body></html>\n"
		if err := os.WriteFile(filepath.Join(simple, p, "index.html"), []byte(page), 0o644); err != nil {
			return "", err
		}
	}
	top.WriteString("</body></html>\n")
	if err := os.WriteFile(filepath.Join(simple, "index.html"), []byte(top.String()), 0o644); err != nil {
		return "", err
	}
	return "file://" + simple + "/", nil
}
