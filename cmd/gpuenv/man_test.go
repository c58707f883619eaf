package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Help text reaches the page as text: a line starting with a dot or quote
// is not taken for a request, backslashes and hyphens stay literal, and
// characters outside ASCII are named glyphs.
func TestManPageEscapes(t *testing.T) {
	root := &cobra.Command{Use: "gpuenv", Short: "short", Long: "first\n.hidden request\n'quoted\nC:\\path --flag — dash"}
	root.AddCommand(&cobra.Command{Use: "plan [PATH]", Long: "plans\n\n  gpuenv plan .\n\nafter", Example: "  gpuenv plan -x", Run: func(*cobra.Command, []string) {}})
	root.AddCommand(&cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}})
	var buf bytes.Buffer
	if err := writeManPage(&buf, root, "1.2.3+gabc"); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{
		`.TH GPUENV 1 "" "gpuenv 1.2.3+gabc" "User Commands"`,
		"\n\\&.hidden request\n",
		"\n\\&'quoted\n",
		`C:\epath \-\-flag \[u2014] dash`,
		".SS \"gpuenv plan [PATH]\"\n",
		".nf\n  gpuenv plan .\n.fi\n.PP\nafter\n",
		".nf\ngpuenv plan \\-x\n.fi\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "secret") {
		t.Errorf("the page documents a hidden command:\n%s", page)
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
		cmd.Stdin = &buf
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff: %v\n%s", err, out)
		}
	}
}

// gpuenv man writes the page of the real tree, and help does not list it.
func TestManCommand(t *testing.T) {
	var out, help bytes.Buffer
	if code := run(context.Background(), []string{"man"}, nil, &out, &out, nil); code != exitOK {
		t.Fatalf("gpuenv man: exit %d\n%s", code, out.String())
	}
	for _, cmd := range []string{"apply [PATH | PLANFILE]", "plan [PATH]", "rollback", "version"} {
		if !strings.Contains(out.String(), `.SS "gpuenv `+cmd) {
			t.Errorf("gpuenv man has no section for gpuenv %s", cmd)
		}
	}
	run(context.Background(), []string{"--help"}, nil, &help, &help, nil)
	if regexp.MustCompile(`(?m)^\s+man\s`).MatchString(help.String()) {
		t.Errorf("gpuenv --help lists the hidden man command:\n%s", help.String())
	}
}
