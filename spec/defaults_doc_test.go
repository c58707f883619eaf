package spec

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The spec reference's table of defaults (docs/spec-reference.md,
// "Defaults") lists exactly Defaults(), in its order, and shows each value
// that does not depend on the host as Defaults() has it.
func TestDefaultsTableInSpecReference(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "docs", "spec-reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	start := strings.Index(s, "\n## Defaults\n")
	if start < 0 {
		t.Fatal(`docs/spec-reference.md has no "## Defaults" section`)
	}
	s = s[start+1:]
	if end := strings.Index(s[1:], "\n## "); end >= 0 {
		s = s[:end+1]
	}
	row := regexp.MustCompile("(?m)^\\| (`[a-z_]+`|every block) \\| `([a-z_]+)` \\| (.*) \\|$")
	rows := row.FindAllStringSubmatch(s, -1)
	defaults := Defaults()
	if len(rows) != len(defaults) {
		t.Fatalf("the table has %d rows, Defaults() %d", len(rows), len(defaults))
	}
	for i, d := range defaults {
		block, attr, value := strings.Trim(rows[i][1], "`"), rows[i][2], rows[i][3]
		if block != d.Block || attr != d.Attribute {
			t.Errorf("row %d is %s.%s, Defaults() has %s.%s there", i+1, block, attr, d.Block, d.Attribute)
			continue
		}
		if hd := strings.HasPrefix(value, "**host-dependent**"); hd != d.HostDependent {
			t.Errorf("%s.%s: the table says host-dependent %v, Defaults() %v", block, attr, hd, d.HostDependent)
		}
		if !d.HostDependent && !strings.Contains(strings.ReplaceAll(value, "`", ""), strings.Fields(d.Value)[0]) {
			t.Errorf("%s.%s: the table shows %q, Defaults() %q", block, attr, value, d.Value)
		}
	}
}
