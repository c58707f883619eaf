package pkgdb

import (
	"bytes"
	"reflect"
	"testing"
	"testing/iotest"
)

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(sampleStatus))
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
		// Read in pieces, through a buffer that has to grow, the file
		// parses as it does whole.
		want := parseStatus(data, nil, false)
		buf := make([]byte, 5)
		got, err := readStatus(iotest.OneByteReader(bytes.NewReader(data)), &buf, nil, false)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read in pieces: %+v, %v\nwhole: %+v", got, err, want)
		}
	})
}

func FuzzParseRPM(f *testing.F) {
	f.Add([]byte(sampleRPM))
	f.Add([]byte("nvidia-driver\t(none)\t1\t2\tx86_64\t(none)\n\t\t\t\t\t\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		total, pkgs, _ := ParseRPM(data, Relevant)
		if len(pkgs) > total {
			t.Fatalf("%d packages of %d", len(pkgs), total)
		}
		for _, p := range pkgs {
			Locked([]string{"nvidia*", "[", "*:*-*.*"}, p)
			if p.Name == "" || p.Version == "" {
				t.Fatalf("package %+v", p)
			}
		}
	})
}

// FuzzAppendKept: a well-formed paragraph cut down to the fields toPackage
// reads gives the package the whole paragraph gives.
func FuzzAppendKept(f *testing.F) {
	f.Add([]byte("Package: libcudnn9-cuda-12\nStatus: install ok installed\nDescription: x\n long\n .\nVersion: 9.1.0.70-1\nSource: cudnn (9.1.0)\n"))
	f.Add([]byte("Package: a\nVersion: 1\nDescription: d\nVersion: 2\n"))
	f.Add([]byte("Package: nvidia-driver\nStatus: install ok\n installed\nConffiles:\n /etc/x 0123\nArchitecture: amd64"))
	f.Fuzz(func(t *testing.T, para []byte) {
		// As parseStatus hands them over: one paragraph, with a Package field.
		para = bytes.TrimRight(para, "\n")
		if i := bytes.Index(para, []byte("\n\n")); i >= 0 {
			para = para[:i]
		}
		if len(field(para, "Package")) == 0 || !wellFormed(para) {
			t.Skip()
		}
		gotPkg, gotOK, gotProblem := parseParagraph(appendKept(nil, para))
		wantPkg, wantOK, wantProblem := parseParagraph(para)
		if gotPkg != wantPkg || gotOK != wantOK || gotProblem != wantProblem {
			t.Errorf("kept fields: %+v %v %q\nwhole paragraph: %+v %v %q", gotPkg, gotOK, gotProblem, wantPkg, wantOK, wantProblem)
		}
	})
}
