package packages

import (
	"testing"
)

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusHead[len("-- var/lib/dpkg/status --\n"):]))
	f.Add([]byte("Package: nvidia-driver\nStatus: install ok inst"))
	f.Add([]byte("Package: libcuda1\n Status: continuation\nStatus: hold reinstreq half-installed\n\n\n"))
	f.Add([]byte("-----BEGIN PGP SIGNED MESSAGE-----\nPackage: nvidia-smi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, every := range []bool{false, true} {
			db := parseStatus(data, map[string]bool{"nvidia-driver:amd64": true}, every)
			if db.total < 0 {
				t.Fatalf("total %d", db.total)
			}
			for _, p := range db.packages {
				if p.Name == "" || !states[p.State] || !wants[p.Want] {
					t.Fatalf("package %+v", p)
				}
				if !every && !Relevant(p.Name) {
					t.Fatalf("irrelevant package %q reported", p.Name)
				}
			}
			if ws := db.warnings(StatusPath); len(ws) > maxProblems+1 {
				t.Fatalf("%d warnings", len(ws))
			}
		}
	})
}

func FuzzParseRPM(f *testing.F) {
	f.Add([]byte(rpmOutput))
	f.Add([]byte("nvidia-driver\t(none)\t1\t2\tx86_64\t(none)\n\t\t\t\t\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		total, pkgs, _ := parseRPM(data)
		if len(pkgs) > total {
			t.Fatalf("%d packages of %d", len(pkgs), total)
		}
		for _, p := range pkgs {
			locked([]string{"nvidia*", "[", "*:*-*.*"}, p)
			if p.Name == "" || p.Version == "" {
				t.Fatalf("package %+v", p)
			}
		}
	})
}
