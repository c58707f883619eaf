package pkgdb

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// sampleStatus is a status file with a foreign-architecture package, a
// removed one with its configuration kept, a purged but held one and one
// needing reinstallation.
const sampleStatus = `Package: bash
Essential: yes
Status: install ok installed
Architecture: amd64
Version: 5.2.15-2+b7
Description: GNU Bourne Again SHell
 Package: not-a-field because continuation lines start with a space

Package: libcuda1
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: nvidia-graphics-drivers
Version: 535.261.03-1

Package: libcuda1
Status: install ok installed
Architecture: i386
Multi-Arch: same
Source: nvidia-graphics-drivers
Version: 535.261.03-1

Package: nvidia-smi
Status: deinstall ok config-files
Architecture: amd64
Config-Version: 535.216.03-1

Package: nvidia-persistenced
Status: hold ok not-installed
Architecture: amd64

Package: nvidia-kernel-dkms
Status: install reinstreq half-installed
Architecture: amd64
Version: 535.261.03-1
`

const sampleRPM = "bash\t0\t5.1.8\t9.el9\tx86_64\tbash-5.1.8-9.el9.src.rpm\n" +
	"gpg-pubkey\t0\td42d0685\t62027e8a\t(none)\t(none)\n" +
	"nvidia-driver\t3\t550.54.15\t1.el9\tx86_64\tnvidia-driver-550.54.15-1.el9.src.rpm\n" +
	"broken line\n"

func dpkgRoot(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := hosttest.New(t, root)
	return h
}

// TestReadDpkgAll: every package, in the status file's order, a journal
// entry in the place of the paragraph it replaces, matched by name and
// architecture (the i386 libcuda1's entry does not replace the amd64
// one), and the journal's new packages after the rest.
func TestReadDpkgAll(t *testing.T) {
	h := dpkgRoot(t, map[string]string{
		"var/lib/dpkg/status": sampleStatus,
		"var/lib/dpkg/updates/0000": "Package: libcuda1\nStatus: install ok unpacked\nArchitecture: i386\nVersion: 535.309.01-1\n\n" +
			"Package: nvidia-driver\nStatus: install ok half-installed\nArchitecture: amd64\nVersion: 535.309.01-1\n",
		"var/lib/dpkg/updates/0001":  "Package: libcuda1\nStatus: install ok half-configured\nArchitecture: i386\nVersion: 535.309.01-1\n",
		"var/lib/dpkg/updates/tmp.i": "Package: bash\nStatus: purge ok not-installed\n",
	})
	db := ReadDpkgAll(h)
	if db.Err != nil || len(db.Warnings) != 0 || !db.Interrupted {
		t.Fatalf("err %v, warnings %v, interrupted %v", db.Err, db.Warnings, db.Interrupted)
	}
	want := []facts.Package{
		{Name: "bash", Version: "5.2.15-2+b7", Architecture: "amd64", State: "installed", Want: "install"},
		{Name: "libcuda1", Version: "535.261.03-1", Architecture: "amd64", Source: "nvidia-graphics-drivers", State: "installed", Want: "install"},
		{Name: "libcuda1", Version: "535.309.01-1", Architecture: "i386", State: "half-configured", Want: "install"},
		{Name: "nvidia-smi", Version: "535.216.03-1", Architecture: "amd64", State: "config-files", Want: "deinstall"},
		{Name: "nvidia-persistenced", Architecture: "amd64", State: "not-installed", Want: "hold", Hold: true},
		{Name: "nvidia-kernel-dkms", Version: "535.261.03-1", Architecture: "amd64", State: "half-installed", Want: "install", ReinstallRequired: true},
		{Name: "nvidia-driver", Version: "535.309.01-1", Architecture: "amd64", State: "half-installed", Want: "install"},
	}
	if diff := cmp.Diff(want, db.Packages); diff != "" {
		t.Errorf("ReadDpkgAll (-want +got):\n%s", diff)
	}
	if db.Total != 6 {
		t.Errorf("Total = %d, want 6", db.Total)
	}
	if got := StatusText(db.Packages[5]); got != "install reinstreq half-installed" {
		t.Errorf("StatusText = %q", got)
	}

	// No status file is an empty database, not an error.
	db = ReadDpkgAll(dpkgRoot(t, nil))
	if db.Err != nil || len(db.Packages) != 0 || db.Interrupted {
		t.Errorf("no database: %+v", db)
	}
}

// TestJournalOrder: journal entries apply in the order of their numbers,
// as apply's copy of the reader had it; the observation's applied them in
// the order of their names, which differs only for names of different
// lengths (dpkg writes four digits).
func TestJournalOrder(t *testing.T) {
	h := dpkgRoot(t, map[string]string{
		"var/lib/dpkg/status":       sampleStatus,
		"var/lib/dpkg/updates/9":    "Package: nvidia-driver\nStatus: install ok unpacked\nArchitecture: amd64\nVersion: 1\n",
		"var/lib/dpkg/updates/0010": "Package: nvidia-driver\nStatus: install ok installed\nArchitecture: amd64\nVersion: 3\n",
	})
	for _, db := range []Dpkg{ReadDpkg(h), ReadDpkgAll(h)} {
		p, ok := Installed(facts.Packages{Packages: db.Packages}, "nvidia-driver", Configured)
		if !ok || p.Version != "3" {
			t.Errorf("nvidia-driver = %+v, want the newest entry's version 3", p)
		}
	}
}

func TestInstalledStateFilter(t *testing.T) {
	db := ReadDpkgAll(dpkgRoot(t, map[string]string{"var/lib/dpkg/status": sampleStatus}))
	pkgs := facts.Packages{Packages: db.Packages}
	for _, c := range []struct {
		name                   string
		configured, filesThere bool
	}{
		{"bash", true, true},
		{"nvidia-kernel-dkms", false, true},
		{"nvidia-smi", false, false},
		{"nvidia-persistenced", false, false},
		{"absent", false, false},
	} {
		if _, ok := Installed(pkgs, c.name, Configured); ok != c.configured {
			t.Errorf("Installed(%s, Configured) = %v", c.name, ok)
		}
		if _, ok := Installed(pkgs, c.name, FilesPresent); ok != c.filesThere {
			t.Errorf("Installed(%s, FilesPresent) = %v", c.name, ok)
		}
	}
}

func TestParagraphs(t *testing.T) {
	ps, err := Paragraphs([]byte("\nPackage: a\nDescription: short\n long\n .\n more\n\n\nPackage: b\nDepends: a (= 1)\n"))
	if err != nil || len(ps) != 2 {
		t.Fatalf("%d paragraphs, %v", len(ps), err)
	}
	if got := ps[0].Values["Description"]; got != "short\nlong\n\nmore\n" {
		t.Errorf("Description = %q", got)
	}
	if got := ps[1].Values["Depends"]; got != "a (= 1)" || !slices.Equal(ps[1].Order, []string{"Package", "Depends"}) {
		t.Errorf("b: %+v", ps[1])
	}
}
