package repository

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	planpkg "github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
)

// applyFiles writes and removes files as apply would.
func applyFiles(t *testing.T, root string, steps []planpkg.Step) {
	for _, s := range steps {
		for _, op := range s.Operations {
			if f := op.File; f != nil {
				if f.Remove {
					os.Remove(filepath.Join(root, f.Path))
				} else {
					hosttest.WriteFile(t, root, f.Path, f.Content)
				}
			}
		}
	}
}

// bookwormSources is Debian 12's default deb822 sources: main only.
const bookwormSources = `Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`

const nvidiaRepo = `repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600
}
`

func TestPlanRepositories(t *testing.T) {
	root := t.TempDir()
	hosttest.WriteFile(t, root, "/usr/share/keyrings/cuda-archive-keyring.gpg", "key")
	h := hosttest.New(t, root)
	obs := &facts.Observation{OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Codename: "jammy", Family: "deb"}, RepositoryFiles: ObserveFiles(h, "deb")}
	s := plantest.LoadSpec(t, nvidiaRepo)
	pl := planner.New(Kind.Provider())
	plan := plantest.Plan(t, pl, s, obs)
	if len(plan.Steps) != 1 || plan.Steps[0].Address != "repository.cuda" || plan.Steps[0].Action != planpkg.Create {
		t.Fatalf("steps %+v", plan.Steps)
	}
	var files []planpkg.FileOp
	for _, op := range plan.Steps[0].Operations {
		files = append(files, *op.File)
	}
	want := []planpkg.FileOp{
		{Path: "/etc/apt/sources.list.d/gpuenv-cuda.sources", Mode: 0o644, After: []string{"apt-get", "update"}, Content: `# Written by gpuenv for repository "cuda".
Types: deb
URIs: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/
Suites: /
Signed-By: /usr/share/keyrings/cuda-archive-keyring.gpg
`},
		{Path: "/etc/apt/preferences.d/gpuenv-cuda.pref", Mode: 0o644, Content: `# Written by gpuenv for repository "cuda".
Package: *
Pin: origin "developer.download.nvidia.com"
Pin-Priority: 600
`},
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if got := plan.Steps[0].After["priority"]; got != "600" {
		t.Errorf("after %v", plan.Steps[0].After)
	}
	applyFiles(t, root, plan.Steps)
	obs.RepositoryFiles = ObserveFiles(h, "deb")
	plantest.Converged(t, pl, s, obs, "applying")

	// A changed priority rewrites the pin; absent removes both files.
	s2 := plantest.LoadSpec(t, strings.Replace(nvidiaRepo, "priority = 600", "priority = 700", 1))
	plan, _ = pl.Plan(context.Background(), s2, obs)
	if len(plan.Steps) != 1 || plan.Steps[0].Action != planpkg.Update || len(plan.Steps[0].Operations) != 1 {
		t.Errorf("priority change: %+v", plan.Steps)
	}
	s3 := plantest.LoadSpec(t, "repository \"cuda\" {\n  absent = true\n}\n")
	plan, _ = pl.Plan(context.Background(), s3, obs)
	if len(plan.Steps) != 1 || plan.Steps[0].Action != planpkg.Delete || len(plan.Steps[0].Operations) != 2 {
		t.Fatalf("absent: %+v", plan.Steps)
	}
	applyFiles(t, root, plan.Steps)
	obs.RepositoryFiles = ObserveFiles(h, "deb")
	plantest.Converged(t, pl, s3, obs, "removing")
}

func TestPlanKeyringURL(t *testing.T) {
	s := plantest.LoadSpec(t, "repository \"cuda\" {\n  url = \"https://example.com/repo/\"\n  keyring = \"https://example.com/key.gpg\"\n}\n")
	_, diags := planner.New(Kind.Provider()).Plan(context.Background(), s, &facts.Observation{OS: facts.OS{ID: "ubuntu", Family: "deb"}})
	if !diags.HasErrors() || diags[0].Summary != "Keyring URL not usable for apt" || diags[0].Subject.Start.Line != 3 {
		t.Errorf("diagnostics %v", diags)
	}
}

func TestPlanComponents(t *testing.T) {
	debian := facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}
	driver := "driver {\n  version = \"535.*\"\n  kernel_modules = \"proprietary\"\n}\n"
	tests := []struct {
		name    string
		sources map[string]string
		src     string
		want    string // the components file, "" for no step
	}{
		{
			name:    "default Debian 12 sources",
			sources: map[string]string{"/etc/apt/sources.list.d/debian.sources": bookwormSources},
			src:     driver,
			want: `# Written by gpuenv: the archive components the spec's Debian packages come from.
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`,
		},
		{
			name:    "one-line sources that already enable non-free",
			sources: map[string]string{"/etc/apt/sources.list": "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n# deb-src http://deb.debian.org/debian bookworm main\ndeb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bookworm-security main contrib non-free\n"},
			src:     driver,
		},
		{
			name:    "the spec's own repositories enable them",
			sources: map[string]string{"/etc/apt/sources.list.d/debian.sources": bookwormSources},
			src: driver + `repository "nf" {
  url        = "https://deb.debian.org/debian"
  suites     = ["bookworm", "bookworm-updates"]
  components = ["contrib", "non-free"]
}
repository "nfs" {
  url        = "https://security.debian.org/debian-security"
  suites     = ["bookworm-security"]
  components = ["contrib", "non-free"]
}
`,
		},
		{
			name:    "open modules also need contrib, and no sources at all",
			sources: map[string]string{},
			src:     "driver {\n  kernel_modules = \"open\"\n}\n",
			want: `# Written by gpuenv: the archive components the spec's Debian packages come from.
Types: deb
URIs: https://deb.debian.org/debian
Suites: bookworm
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.sources {
				hosttest.WriteFile(t, root, p, c)
			}
			h, _ := host.New(root)
			repos, warns := Observe(h, "deb")
			if len(warns) > 0 {
				t.Fatal(warns)
			}
			obs := &facts.Observation{OS: debian, Repositories: repos, RepositoryFiles: ObserveFiles(h, "deb")}
			s := plantest.LoadSpec(t, tt.src)
			pl := planner.New(Kind.Provider())
			plan := plantest.Plan(t, pl, s, obs)
			st := plan.Step(pkgkit.ComponentsAddress)
			if tt.want == "" {
				if st != nil {
					t.Fatalf("unexpected %+v", st)
				}
				return
			}
			if st == nil {
				t.Fatalf("no components step in %+v", plan.Steps)
			}
			if diff := cmp.Diff(tt.want, st.Operations[0].File.Content); diff != "" {
				t.Errorf("file (-want +got):\n%s", diff)
			}
			applyFiles(t, root, []planpkg.Step{*st})
			obs.Repositories, _ = Observe(h, "deb")
			again, _ := pl.Plan(context.Background(), s, obs)
			if again.Step(pkgkit.ComponentsAddress) != nil {
				t.Error("the components are enabled after applying, and still planned")
			}
		})
	}
}

func TestParseSources(t *testing.T) {
	got := ParseDeb822("d.sources", []byte(bookwormSources+"\nTypes: deb-src\nURIs: http://x\nSuites: bookworm\nComponents: main\n\nTypes: deb\nURIs: http://y\nSuites: sid\nComponents: main\nEnabled: no\n"))
	if len(got) != 2 || !slices.Equal(got[0].Suites, []string{"bookworm", "bookworm-updates"}) || got[1].URIs[0] != "http://deb.debian.org/debian-security" {
		t.Errorf("deb822 %+v", got)
	}
	one := ParseSourcesList("s.list", []byte("deb [arch=amd64 signed-by=/k.gpg] https://r/ / \n#deb http://x bookworm main\ndeb-src http://x bookworm main\n"))
	if len(one) != 1 || one[0].URIs[0] != "https://r/" || one[0].Suites[0] != "/" || len(one[0].Components) != 0 {
		t.Errorf("one-line %+v", one)
	}
}

// TestObserveFiles: gpuenv's own files of the host's package family are
// digested and others passed over; keyrings are those of the family's
// usual directories and those gpuenv's files or the host's sources name
// elsewhere, present ones only, each with the fingerprints of its keys
// or why it has none.
func TestObserveFiles(t *testing.T) {
	root := t.TempDir()
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/gpuenv-mirror.sources", "Types: deb\nURIs: http://mirror/\nSuites: /\nSigned-By: /srv/keys/mirror.gpg\n")
	hosttest.WriteFile(t, root, "/etc/apt/sources.list.d/other.list", "deb [signed-by=/srv/keys/other.gpg] http://other/ /\n")
	hosttest.WriteFile(t, root, "/etc/yum.repos.d/gpuenv-cuda.repo", "[gpuenv-cuda]\ngpgkey=file:///srv/keys/missing.gpg\n")
	hosttest.WriteFile(t, root, "/srv/keys/mirror.gpg", "mirror key")
	cudaKey, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "keys", "fixture-cuda.gpg"))
	if err != nil {
		t.Fatal(err)
	}
	hosttest.WriteFile(t, root, "/srv/keys/other.gpg", string(cudaKey))
	hosttest.WriteFile(t, root, "/usr/share/keyrings/debian-archive-keyring.gpg", "debian key")
	h, _ := host.New(root)
	sources, _ := Observe(h, "deb")
	got := ObserveFiles(h, "deb", sources...)
	sum := func(s string) string { return planner.Digest(s) }
	const notKey = "not an OpenPGP keyring: a packet header lacks its first bit"
	want := facts.RepositoryFiles{
		Files: []facts.FileDigest{
			{Path: "/etc/apt/sources.list.d/gpuenv-mirror.sources", SHA256: sum("Types: deb\nURIs: http://mirror/\nSuites: /\nSigned-By: /srv/keys/mirror.gpg\n")},
		},
		Keyrings: []facts.FileDigest{
			{Path: "/srv/keys/mirror.gpg", SHA256: sum("mirror key"), KeyError: notKey},
			{Path: "/srv/keys/other.gpg", SHA256: sum(string(cudaKey)), Fingerprints: []string{"7D5AB3C8EA6E6296C742F6104948E0156F695994"}},
			{Path: "/usr/share/keyrings/debian-archive-keyring.gpg", SHA256: sum("debian key"), KeyError: notKey},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ObserveFiles (-want +got):\n%s", diff)
	}
	// An RPM host: dnf's files and keyrings only.
	want = facts.RepositoryFiles{
		Files:    []facts.FileDigest{{Path: "/etc/yum.repos.d/gpuenv-cuda.repo", SHA256: sum("[gpuenv-cuda]\ngpgkey=file:///srv/keys/missing.gpg\n")}},
		Keyrings: []facts.FileDigest{},
	}
	if diff := cmp.Diff(want, ObserveFiles(h, "rpm")); diff != "" {
		t.Errorf("ObserveFiles on RPM (-want +got):\n%s", diff)
	}
}

// A line longer than a line scanner's buffer does not end the file: the
// repositories after it are still read.
func TestParseSourcesListLongLine(t *testing.T) {
	data := "# " + strings.Repeat("x", 128<<10) + "\ndeb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /\n"
	got := ParseSourcesList("s.list", []byte(data))
	if len(got) != 1 || got[0].URIs[0] != "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/" {
		t.Errorf("after a 128 KiB comment: %+v", got)
	}
}

// keyFile is one of the fixtures' keys (testdata/keys).
func keyFile(t *testing.T, name string) string {
	data, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "keys", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const fixtureCUDAKey = "7D5AB3C8EA6E6296C742F6104948E0156F695994"

// TestPlanKeyFingerprint: a keyring holding exactly the named key
// passes; another key, a key more, or a file that is no keyring are
// refused at key_fingerprint, naming what the keyring holds; a keyring
// not there yet is a warning that names the key wanted.
func TestPlanKeyFingerprint(t *testing.T) {
	const kr = "/usr/share/keyrings/cuda-archive-keyring.gpg"
	specText := "repository \"cuda\" {\n  url             = \"https://example.com/repo/\"\n  keyring         = \"" + kr + "\"\n  key_fingerprint = \"" + fixtureCUDAKey + "\"\n}\n"
	for name, tc := range map[string]struct {
		key     string // "" when there is none
		summary string
		detail  string
	}{
		"same key":        {key: keyFile(t, "fixture-cuda.gpg")},
		"other key":       {key: keyFile(t, "fixture-other.asc"), summary: `The keyring of repository "cuda" holds another key`, detail: "holds 8E48DF5BF0BD1A8947BE2652DC1F376763516D09"},
		"key more":        {key: keyFile(t, "fixture-both.gpg"), summary: `The keyring of repository "cuda" holds more keys than the one it names`, detail: "holds 8E48DF5BF0BD1A8947BE2652DC1F376763516D09 as well"},
		"no keyring file": {key: "key", summary: `The keyring of repository "cuda" cannot be checked`, detail: "not an OpenPGP keyring"},
		"missing":         {},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if tc.key != "" {
				hosttest.WriteFile(t, root, kr, tc.key)
			}
			h := hosttest.New(t, root)
			obs := &facts.Observation{OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Codename: "jammy", Family: "deb"}, RepositoryFiles: ObserveFiles(h, "deb")}
			plan, diags := planner.New(Kind.Provider()).Plan(context.Background(), plantest.LoadSpec(t, specText), obs)
			if tc.summary == "" {
				if diags.HasErrors() {
					t.Fatalf("refused: %v", diags)
				}
				warned := plan != nil && slices.ContainsFunc(plan.Warnings, func(w finding.Finding) bool {
					return strings.Contains(w.Detail, "key_fingerprint asks for the key "+fixtureCUDAKey)
				})
				if warned != (tc.key == "") {
					t.Errorf("warning that names the key wanted: %v, want %v (%+v)", warned, tc.key == "", plan)
				}
				return
			}
			if len(diags) != 1 || diags[0].Summary != tc.summary || !strings.Contains(diags[0].Detail, tc.detail) || !strings.Contains(diags[0].Detail, fixtureCUDAKey) || diags[0].Subject.Start.Line != 4 {
				t.Errorf("diagnostics %v; want %q saying %q and the key wanted, at key_fingerprint", diags, tc.summary, tc.detail)
			}
		})
	}
}

// TestPlanHostSource: a repository the host's own sources enable as the
// block asks is not written again (a second entry for one repository,
// which apt refuses when the keys differ), nor its pin when the indexes
// show the priority; a source that differs in its key or suites is not
// the same repository, and gpuenv writes its own.
func TestPlanHostSource(t *testing.T) {
	const list = "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list"
	const url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
	for name, tc := range map[string]struct {
		line     string
		priority int // of the source's index; 0: no index
		want     []string
	}{
		"same":              {line: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + url + " /", priority: 600},
		"same, not pinned":  {line: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + url + " /", priority: 500, want: []string{"/etc/apt/preferences.d/gpuenv-cuda.pref"}},
		"same, no lists":    {line: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + url + " /", want: []string{"/etc/apt/preferences.d/gpuenv-cuda.pref"}},
		"no trailing slash": {line: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + strings.TrimSuffix(url, "/") + " /", priority: 600},
		"other keyring":     {line: "deb [signed-by=/etc/apt/keyrings/other.gpg] " + url + " /", priority: 600, want: []string{"/etc/apt/sources.list.d/gpuenv-cuda.sources", "/etc/apt/preferences.d/gpuenv-cuda.pref"}},
		"no keyring":        {line: "deb " + url + " /", priority: 600, want: []string{"/etc/apt/sources.list.d/gpuenv-cuda.sources", "/etc/apt/preferences.d/gpuenv-cuda.pref"}},
		"other suite":       {line: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] " + url + " ./", priority: 600, want: []string{"/etc/apt/sources.list.d/gpuenv-cuda.sources", "/etc/apt/preferences.d/gpuenv-cuda.pref"}},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			hosttest.WriteFile(t, root, "/usr/share/keyrings/cuda-archive-keyring.gpg", keyFile(t, "fixture-cuda.gpg"))
			hosttest.WriteFile(t, root, list, tc.line+"\n")
			h := hosttest.New(t, root)
			repos, _ := Observe(h, "deb")
			obs := &facts.Observation{OS: facts.OS{ID: "ubuntu", VersionID: "22.04", Codename: "jammy", Family: "deb"}, Repositories: repos, RepositoryFiles: ObserveFiles(h, "deb", repos...)}
			if tc.priority != 0 {
				obs.PackageIndexes.Indexes = []facts.PackageIndex{{Path: "/var/lib/apt/lists/x_Packages", Source: facts.IndexSource{File: list, URI: repos[0].URIs[0], Suite: "/"}, Priority: tc.priority}}
			}
			plan := plantest.Plan(t, planner.New(Kind.Provider()), plantest.LoadSpec(t, nvidiaRepo), obs)
			var got []string
			for _, s := range plan.Steps {
				for _, op := range s.Operations {
					got = append(got, op.File.Path)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("files written %v, want %v", got, tc.want)
			}
		})
	}
}
