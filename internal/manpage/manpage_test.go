package manpage

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func specPage(t *testing.T) []byte {
	t.Helper()
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "spec-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := Render(md, Page{Name: "gpuenv-spec", Section: 5, Summary: "the gpuenv spec language", Source: "gpuenv test", Manual: "File Formats", SeeAlso: []string{"gpuenv(1)"}})
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// The spec reference chapter formats as a manual page without a warning
// from groff, and keeps every section and subsection of the chapter.
func TestSpecReferencePage(t *testing.T) {
	page := specPage(t)
	if _, err := exec.LookPath("groff"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("groff is not installed; .ci/run installs it")
		}
		t.Skip("groff is not installed (apt-get install groff-base)")
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = bytes.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff -man -Tutf8 -ww: %v\n%s", err, out)
	}
	md, _ := os.ReadFile(filepath.Join("..", "..", "docs", "spec-reference.md"))
	for _, m := range regexp.MustCompile(`(?m)^(##+) (.*)$`).FindAllStringSubmatch(string(md), -1) {
		want := ".SS " + quoteArg(plain(m[2]))
		if m[1] == "##" {
			want = ".SH " + quoteArg(strings.ToUpper(plain(m[2])))
		}
		if !bytes.Contains(page, []byte(want+"\n")) {
			t.Errorf("the page has no %s", want)
		}
	}
	// The text a reader sees: every table row of the chapter, by its first
	// cell, is on the page.
	text := formatted(t, page)
	for _, w := range []string{"kernel_modules", "container_toolkit", "cuda_visible_devices", "Masterminds/semver", "GPUENV_VAR_"} {
		if !strings.Contains(text, w) {
			t.Errorf("the formatted page does not mention %s", w)
		}
	}
}

func formatted(t *testing.T, page []byte) string {
	t.Helper()
	cmd := exec.Command("groff", "-man", "-Tutf8")
	cmd.Stdin = bytes.NewReader(page)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	// Remove overstriking and SGR so that words read as words.
	s := regexp.MustCompile(`.\x08|\x1b\[[0-9;]*m`).ReplaceAllString(string(out), "")
	return s
}

func TestRender(t *testing.T) {
	md := "# Title\n\nIntro with `--flag` and **bold**, a [link](other.md#x) and [HCL](https://example.org/).\n\n" +
		"## A section\n\n- an item\n  continued\n- `a-b`\n\n1. one\n2. two:\n\n   ```text\n   .dot \\ back\n   ```\n\n" +
		"| name | type |\n|---|---|\n| `x` | a \\| b → c |\n\n```hcl\nx = \"y\"\n```\n"
	page, err := Render([]byte(md), Page{Name: "t", Section: 5, Summary: "s", Source: "src", Manual: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		".SH \"DESCRIPTION\"\n.PP\nIntro with \\fB\\-\\-flag\\fR and \\fBbold\\fR, a link and HCL <https://example.org/>.\n",
		".SH \"A SECTION\"\n.IP \\(bu 4\nan item continued\n.IP \\(bu 4\n\\fBa\\-b\\fR\n",
		".IP 1. 4\none\n.IP 2. 4\ntwo:\n.PP\n.RS 4\n.nf\n\\&.dot \\e back\n.fi\n.RE\n",
		".TP\n\\fBx\\fR\n\\fItype\\fR: a | b \\[u2192] c\n",
		".nf\nx = \"y\"\n.fi\n",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if _, err := Render([]byte("```sh\nunclosed\n"), Page{Name: "t"}); err == nil {
		t.Error("an unclosed code block renders")
	}
}
