package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// What dpkg 1.21 left in a Debian 12 root killed (SIGKILL of every
// process) while the preinst of fa 2.0 ran, fa and fb being upgraded from
// 1.0 together: the status file still says both are installed at 1.0;
// the journal in updates/ says fb 2.0 is unpacked and fa half-installed
// and needing reinstallation.
const (
	cutStatus = `Package: fa
Status: install ok installed
Maintainer: t <t@t>
Architecture: amd64
Version: 1.0
Description: t

Package: fb
Status: install ok installed
Maintainer: t <t@t>
Architecture: amd64
Version: 1.0
Depends: fa (= 1.0)
Description: t
`
	cutUpdate4 = `Package: fb
Status: install ok unpacked
Maintainer: t <t@t>
Architecture: amd64
Version: 2.0
Config-Version: 1.0
Depends: fa (= 2.0)
Description: t
`
	cutUpdate8 = `Package: fa
Status: install reinstreq half-installed
Maintainer: t <t@t>
Architecture: amd64
Version: 1.0
Config-Version: 1.0
Description: t
`
)

// hostWith is a host whose root holds files (contents by path inside the
// root); write adds another later.
func hostWith(t *testing.T, files map[string]string) (h *host.Host, write func(p, s string)) {
	t.Helper()
	root := t.TempDir()
	write = func(p, s string) {
		t.Helper()
		if err := hosttest.BuildArchive(&txtar.Archive{Files: []txtar.File{{Name: p, Data: []byte(s)}}}, root, ""); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range files {
		write(p, s)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	return h, write
}

func TestReadDpkgFoldsInTheJournal(t *testing.T) {
	h, write := hostWith(t, map[string]string{"var/lib/dpkg/status": cutStatus})
	x := aptManager{&HostExecutor{Host: h}}
	db, err := x.readDpkg()
	if err != nil {
		t.Fatal(err)
	}
	if x.dpkgInterrupted(db) {
		t.Fatal("a consistent database is taken for an interrupted one")
	}
	write("var/lib/dpkg/updates/0004", cutUpdate4)
	write("var/lib/dpkg/updates/0008", cutUpdate8)
	write("var/lib/dpkg/updates/tmp.i", "Package: fa\nStatus: install ok installed\nVersion: 9\n")
	if db, err = x.readDpkg(); err != nil {
		t.Fatal(err)
	}
	if got := db["fa"]; got.Version != "1.0" || got.Status != "install reinstreq half-installed" || got.stable() {
		t.Errorf("fa: %+v, want 1.0 half-installed needing reinstallation", got)
	}
	if got := db["fb"]; got.Version != "2.0" || got.state() != "unpacked" {
		t.Errorf("fb: %+v, want 2.0 unpacked", got)
	}
	if !x.dpkgInterrupted(db) {
		t.Error("the cut is not seen as an interrupted dpkg")
	}
	prior := []PriorPackage{
		{Name: "fa", Version: "1.0", Status: "install ok installed"},
		{Name: "fb", Version: "1.0", Status: "install ok installed"},
		{Name: "fc", Status: ""},
	}
	if d := differing(prior, db); len(d) != 2 || d[0].Name != "fa" || d[1].Name != "fb" {
		t.Errorf("differing: %+v, want fa (right version, wrong status) and fb", d)
	}
	err = x.checkApt(expectPrior(prior), nil)
	if err == nil {
		t.Fatal("the check passed a half-installed package")
	}
	for _, want := range []string{"fa is 1.0 half-installed (reinstreq), expected 1.0 installed, not held", "fb is 2.0 unpacked"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check: %v; want it to say %q", err, want)
		}
	}
}

func TestCheckDebFile(t *testing.T) {
	dir := t.TempDir()
	member := func(name, data string) string {
		s := fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "100644", len(data)) + data
		if len(data)%2 == 1 {
			s += "\n"
		}
		return s
	}
	whole := "!<arch>\n" + member("debian-binary", "2.0\n") + member("control.tar.xz", "ctl") + member("data.tar.xz", "some data")
	for _, tc := range []struct {
		name, data, want string
	}{
		{"whole", whole, ""},
		{"empty", "", "no ar archive header (0 bytes)"},
		{"cut in the data", whole[:len(whole)-4], "member data.tar.xz is cut"},
		{"cut in a header", whole[:40], "header is cut"},
		{"no data member", "!<arch>\n" + member("debian-binary", "2.0\n") + member("control.tar.xz", "ctl"), "want debian-binary, control.tar.*, data.tar.*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".deb")
			if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkDebFile(p)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("a whole file refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A package that dpkg had left half-configured before gpuenv began (an
// earlier upgrade of the user's that failed) is not held against an apply
// or a rollback of packages it has nothing to do with.
func TestCheckAptIgnoresWhatWasUnfinishedBefore(t *testing.T) {
	status := cutStatus + "\nPackage: other\nStatus: install ok half-configured\nArchitecture: amd64\nVersion: 3\nDescription: t\n"
	h, _ := hostWith(t, map[string]string{"var/lib/dpkg/status": status})
	x := aptManager{&HostExecutor{Host: h}}
	want := expectPrior([]PriorPackage{{Name: "fa", Version: "1.0", Status: "install ok installed"}})
	if err := x.checkApt(want, nil); err == nil || !strings.Contains(err.Error(), "other is 3 half-configured") {
		t.Errorf("a half-configured package is not reported: %v", err)
	}
	if err := x.checkApt(want, []string{"other"}); err != nil {
		t.Errorf("a package unfinished before gpuenv began is held against it: %v", err)
	}
}

// TestReadDpkgForeignJournal: a journal entry for a foreign-architecture
// package replaces that package's record, not the native one of the same
// name. apply's own reader keyed journal entries by name alone (each
// journal file read on its own), so libcuda1:i386 unpacked took the place
// of libcuda1 (amd64); pkgdb matches entries by name and architecture.
func TestReadDpkgForeignJournal(t *testing.T) {
	h, _ := hostWith(t, map[string]string{
		"var/lib/dpkg/status": "Package: libcuda1\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0\n\n" +
			"Package: libcuda1\nStatus: install ok installed\nArchitecture: i386\nVersion: 1.0\n",
		"var/lib/dpkg/updates/0000": "Package: libcuda1\nStatus: install ok unpacked\nArchitecture: i386\nVersion: 2.0\n",
	})
	db, err := aptManager{&HostExecutor{Host: h}}.readDpkg()
	if err != nil {
		t.Fatal(err)
	}
	if got := db["libcuda1"]; got.Version != "1.0" || got.state() != "installed" {
		t.Errorf("libcuda1: %+v, want the native 1.0 installed", got)
	}
	if got := db["libcuda1:i386"]; got.Version != "2.0" || got.state() != "unpacked" {
		t.Errorf("libcuda1:i386: %+v, want the journal's 2.0 unpacked", got)
	}
}
