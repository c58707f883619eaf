package pkgkit

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// aptPolicy is apt-cache policy's output on a Debian 12 machine, kept
// with pkgdb, which parses it (see its TestParseAptPolicy).
var aptPolicy = func() string {
	data, err := os.ReadFile("../pkgdb/testdata/apt-cache-policy")
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// aptMadison is apt-cache madison's output on the same machine.
const aptMadison = `nvidia-driver | 535.309.01-0+deb12u1 | http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages
nvidia-driver | 535.261.03-1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages
nvidia-cuda-toolkit | 11.8.89~11.8.0-5~deb12u1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages
python3-torch | 1.13.1+dfsg-4 | http://deb.debian.org/debian bookworm/main amd64 Packages
`

func TestParseMadison(t *testing.T) {
	lines, err := ParseMadison([]byte(aptMadison))
	if err != nil {
		t.Fatal(err)
	}
	want := []MadisonLine{
		{"nvidia-driver", "535.309.01-0+deb12u1", "http://deb.debian.org/debian-security bookworm-security/non-free amd64 Packages"},
		{"nvidia-driver", "535.261.03-1", "http://deb.debian.org/debian bookworm/non-free amd64 Packages"},
		{"nvidia-cuda-toolkit", "11.8.89~11.8.0-5~deb12u1", "http://deb.debian.org/debian bookworm/non-free amd64 Packages"},
		{"python3-torch", "1.13.1+dfsg-4", "http://deb.debian.org/debian bookworm/main amd64 Packages"},
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseMadison([]byte("nvidia-driver 535\n")); err == nil {
		t.Error("a line without separators parsed")
	}
}

// dnfList is dnf 4's list --showduplicates layout (no dnf runs on the
// Debian machine these tests were written on): an installed section, an
// available one, an epoch, and a name.arch too long for its column, which
// dnf wraps onto a line of its own.
const dnfList = `Last metadata expiration check: 0:12:03 ago on Mon 02 Sep 2024 10:00:00 AM UTC.
Installed Packages
cuda-toolkit-12-4.x86_64                12.4.1-1                 @cuda-rhel9-x86_64
Available Packages
cuda-toolkit-12-4.x86_64                12.4.0-1                 cuda-rhel9-x86_64
cuda-toolkit-12-4.x86_64                12.4.1-1                 cuda-rhel9-x86_64
kmod-nvidia-open-dkms.x86_64
                                        3:550.54.15-1.el9        cuda-rhel9-x86_64
nvidia-open.noarch                      3:570.86.15-1.el9        cuda-rhel9-x86_64
nvidia-open.noarch                      3:570.124.06-1.el9       cuda-rhel9-x86_64
`

func TestParseDnfList(t *testing.T) {
	got := ParseDnfList([]byte(dnfList))
	want := []DnfPackage{
		{Name: "cuda-toolkit-12-4", Arch: "x86_64", Version: "12.4.1-1", Repo: "cuda-rhel9-x86_64", Installed: true},
		{Name: "cuda-toolkit-12-4", Arch: "x86_64", Version: "12.4.0-1", Repo: "cuda-rhel9-x86_64"},
		{Name: "cuda-toolkit-12-4", Arch: "x86_64", Version: "12.4.1-1", Repo: "cuda-rhel9-x86_64"},
		{Name: "kmod-nvidia-open-dkms", Arch: "x86_64", Version: "3:550.54.15-1.el9", Repo: "cuda-rhel9-x86_64"},
		{Name: "nvidia-open", Arch: "noarch", Version: "3:570.86.15-1.el9", Repo: "cuda-rhel9-x86_64"},
		{Name: "nvidia-open", Arch: "noarch", Version: "3:570.124.06-1.el9", Repo: "cuda-rhel9-x86_64"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// recorder answers commands with canned output and records them.
type recorder struct {
	out  map[string]string // by argv[0] after chroot
	err  error
	runs []host.Command
}

func (r *recorder) Run(_ context.Context, c host.Command) error {
	r.runs = append(r.runs, c)
	argv := c.Argv
	if argv[0] == "chroot" {
		argv = argv[2:]
	}
	if c.Stdout != nil {
		io.WriteString(c.Stdout, r.out[argv[0]])
	}
	return r.err
}

func newHost(t *testing.T, r host.Runner) *host.Host {
	t.Helper()
	return hosttest.New(t, t.TempDir(), host.WithRunner(r))
}

func TestCandidatesApt(t *testing.T) {
	rec := &recorder{out: map[string]string{"apt-cache": aptPolicy}}
	h := newHost(t, rec)
	c := NewCandidates(h)
	c.Expect("apt", "nvidia-cuda-toolkit", "libnvidia-ml1", "bad name; rm -rf /")
	ctx := context.Background()
	got, err := c.Versions(ctx, "apt", "nvidia-driver")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"535.309.01-0+deb12u1", "535.261.03-1"}) {
		t.Errorf("versions %v", got)
	}
	wantArgv := []string{"chroot", h.Root(), "apt-cache", "policy", "nvidia-driver", "nvidia-cuda-toolkit", "libnvidia-ml1"}
	if len(rec.runs) != 1 || !slices.Equal(rec.runs[0].Argv, wantArgv) || !slices.Contains(rec.runs[0].Env, "LC_ALL=C") {
		t.Fatalf("runs %+v, want one run of %v under LC_ALL=C", rec.runs, wantArgv)
	}
	// The expected names were answered by the same command.
	if got, _ := c.Versions(ctx, "apt", "nvidia-cuda-toolkit"); !slices.Equal(got, []string{"11.8.89~11.8.0-5~deb12u1"}) {
		t.Errorf("toolkit %v", got)
	}
	if got, _ := c.Versions(ctx, "apt", "libnvidia-ml1"); len(got) != 2 {
		t.Errorf("libnvidia-ml1 %v", got)
	}
	if c.Runs() != 1 {
		t.Errorf("%d runs, want 1: answers are cached", c.Runs())
	}
	if _, err := c.Versions(ctx, "apt", "nvidia-driver; reboot"); err == nil || c.Runs() != 1 {
		t.Errorf("an invalid name must fail without a run: %v, %d runs", err, c.Runs())
	}
	if got, err := c.Versions(ctx, "apt", "no-such-package"); err != nil || len(got) != 0 {
		t.Errorf("unknown package: %v, %v", got, err)
	}
}

func TestCandidatesDnf(t *testing.T) {
	rec := &recorder{out: map[string]string{"dnf": dnfList}}
	c := NewCandidates(newHost(t, rec))
	got, err := c.Versions(context.Background(), "dnf", "nvidia-open")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"3:570.124.06-1.el9", "3:570.86.15-1.el9"}) {
		t.Errorf("versions %v, want newest first", got)
	}
	if got, _ := c.Versions(context.Background(), "dnf", "cuda-toolkit-12-4"); !slices.Equal(got, []string{"12.4.1-1", "12.4.0-1"}) {
		t.Errorf("toolkit %v", got)
	}
	rec = &recorder{out: map[string]string{"dnf": "Error: No matching Packages to list\n"}, err: errors.New("exit status 1")}
	if got, err := NewCandidates(newHost(t, rec)).Versions(context.Background(), "dnf", "nvidia-open"); err != nil || len(got) != 0 {
		t.Errorf("dnf's answer for an unknown name: %v, %v", got, err)
	}
	rec = &recorder{err: errors.New("exit status 100")}
	if _, err := NewCandidates(newHost(t, rec)).Versions(context.Background(), "apt", "nvidia-open"); err == nil {
		t.Error("a failing apt-cache must be an error")
	}
}

// table is a planner.Candidates with fixed answers.
type table map[string][]string

func (tb table) Versions(_ context.Context, _ plan.Manager, name string) ([]string, error) {
	return tb[name], nil
}

var _ planner.Candidates = table{}

func TestPick(t *testing.T) {
	pkgs := func(names ...string) []planner.PackageName {
		var out []planner.PackageName
		for _, n := range names {
			out = append(out, planner.PackageName{Name: n})
		}
		return out
	}
	archive := debianArchive()
	asked := table{"nvidia-driver": {"999.1-1"}, "cuda-drivers": {"999.1-1"}}
	tests := []struct {
		name    string
		cands   table
		q       PickQuery
		want    string
		note    string
		wantErr string
		pins    string // name=version … of Install, when set
	}{
		{
			name:  "newest within the constraint",
			cands: table{"nvidia-driver": {"550.54.15-1", "535.309.01-0+deb12u1", "535.261.03-1"}},
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint("535.*")},
			want:  "535.309.01-0+deb12u1",
		},
		{
			name:  "a version every package of the set has",
			cands: table{"nvidia-driver": {"535.309.01-0+deb12u1", "535.261.03-1"}, "nvidia-open-kernel-dkms": {"535.261.03-1"}},
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver", "nvidia-open-kernel-dkms")},
			want:  "535.261.03-1",
		},
		{
			name:  "the archive table when apt lists nothing yet",
			cands: table{},
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint("535.*"), OS: "debian", OSVersion: "12"},
			want:  "535.309.01-0+deb12u1",
			note:  "apt-cache does not list nvidia-driver yet, so the version comes from gpuenv's table of the archive (bookworm-security/non-free",
		},
		{
			name:  "the derived version when neither knows",
			cands: table{},
			q:     PickQuery{Manager: "apt", Packages: []planner.PackageName{{Name: "cuda-toolkit-12-4", Version: "12.4.1-1", From: "packages row x"}}},
			want:  "12.4.1-1",
			note:  "apt-cache does not list cuda-toolkit-12-4 yet, so the version is the one gpuenv's package tables derive (packages row x)",
		},
		{
			name:    "nothing fits",
			cands:   table{"nvidia-driver": {"535.309.01-0+deb12u1"}},
			q:       PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint(">= 550")},
			wantErr: `no version of nvidia-driver fits ">= 550": apt-cache lists 535.309.01-0+deb12u1`,
		},
		{
			name:    "nothing known",
			cands:   table{},
			q:       PickQuery{Manager: "apt", Packages: pkgs("nvidia-open")},
			wantErr: "apt-cache lists no version of nvidia-open, and gpuenv's tables know none either (is its repository configured?)",
		},
		// Where the archive knows the source, the version is what apt
		// would install from that source's indexes alone, the package
		// manager's answer (asked) is not used, and what does not fit
		// says what the source has.
		{
			name:  "apt's choice within the source, and what decided",
			cands: asked,
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint(">= 535"), Source: spec.SourceDistro, Archive: archive},
			want:  "535.309.01-0+deb12u1",
			note:  "apt prefers 535.309.01-0+deb12u1 at priority 500 (default) over the newer 550.163.01-2~bpo12+1 at priority 100 (ButAutomaticUpgrades in bookworm-backports)",
		},
		{
			name:  "a lower priority where nothing else fits",
			cands: asked,
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint("550.*"), Source: spec.SourceDistro, Archive: archive},
			want:  "550.163.01-2~bpo12+1",
		},
		{
			name:  "another source's versions are not this one's",
			cands: asked,
			q:     PickQuery{Manager: "apt", Packages: pkgs("cuda-drivers"), Source: spec.SourceNVIDIA, Archive: archive},
			want:  "570.86.15-1",
		},
		{
			name:    "nothing in the source fits",
			cands:   asked,
			q:       PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Versions: version.MustParseConstraint(">= 560"), Source: spec.SourceDistro, Archive: archive},
			wantErr: `no version of nvidia-driver fits ">= 560": Debian 12's archive (bookworm, bookworm-backports) offers 535.309.01-0+deb12u1, 550.163.01-2~bpo12+1`,
		},
		{
			name:    "a package of the set the source lacks",
			cands:   asked,
			q:       PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver", "nvidia-open-kernel-dkms"), Source: spec.SourceDistro, Archive: archive},
			wantErr: "Debian 12's archive (bookworm, bookworm-backports) offers no nvidia-open-kernel-dkms",
		},
		{
			name:    "a package the source lacks",
			cands:   asked,
			q:       PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver"), Source: spec.SourceNVIDIA, Archive: archive},
			wantErr: "NVIDIA's repository (https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/) offers no nvidia-driver",
		},
		{
			name:  "dnf versions compare by their upstream part",
			cands: table{"nvidia-open": {"3:580.95.05-1.el9", "3:570.124.06-1.el9"}},
			q:     PickQuery{Manager: "dnf", Packages: pkgs("nvidia-open"), Versions: version.MustParseConstraint("570.*")},
			want:  "3:570.124.06-1.el9",
		},
		// NVIDIA's rhel9 repository: cuda-drivers at 0:V-1, the driver's
		// other packages at 3:V-1.el9. They go together by upstream
		// version, each installed at its own EVR.
		{
			name: "a dnf driver set of mixed epochs and releases",
			cands: table{
				"cuda-drivers":            {"550.90.07-1", "550.54.15-1"},
				"kmod-nvidia-latest-dkms": {"3:550.90.07-1.el9", "3:550.54.15-1.el9"},
			},
			q:    PickQuery{Manager: "dnf", Packages: pkgs("cuda-drivers", "kmod-nvidia-latest-dkms"), Versions: version.MustParseConstraint("550.90.07")},
			want: "550.90.07-1",
			pins: "cuda-drivers=550.90.07-1 kmod-nvidia-latest-dkms=3:550.90.07-1.el9",
		},
		{
			name:    "a dnf driver set one package of which lacks the upstream version",
			cands:   table{"cuda-drivers": {"550.90.07-1"}, "kmod-nvidia-latest-dkms": {"3:550.54.15-1.el9"}},
			q:       PickQuery{Manager: "dnf", Packages: pkgs("cuda-drivers", "kmod-nvidia-latest-dkms")},
			wantErr: `no version of cuda-drivers fits any version: dnf lists 550.90.07-1 (no kmod-nvidia-latest-dkms 550.90.07)`,
		},
		{
			name:  "apt pins every package of a set at the one version",
			cands: table{"nvidia-driver": {"535.261.03-1"}, "nvidia-kernel-dkms": {"535.261.03-1"}},
			q:     PickQuery{Manager: "apt", Packages: pkgs("nvidia-driver", "nvidia-kernel-dkms")},
			want:  "535.261.03-1",
			pins:  "nvidia-driver=535.261.03-1 nvidia-kernel-dkms=535.261.03-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pick(context.Background(), tt.cands, tt.q)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tt.want || !strings.HasPrefix(got.Note, tt.note) || (tt.note == "") != (got.Note == "") {
				t.Errorf("picked %+v, want %s with note %q", got, tt.want, tt.note)
			}
			if tt.pins != "" {
				var pins []string
				for _, p := range got.Install(tt.q.Manager, tt.q.Packages).Install {
					pins = append(pins, p.Name+"="+p.Version)
				}
				if g := strings.Join(pins, " "); g != tt.pins {
					t.Errorf("installs %s, want %s", g, tt.pins)
				}
			}
		})
	}
}

// refusing is a runner that fails the test on any command.
type refusing struct{ t *testing.T }

func (r refusing) Run(_ context.Context, c host.Command) error {
	r.t.Errorf("a process was started: %q", c.Argv)
	return errors.New("refused")
}

func TestCandidatesFromIndexes(t *testing.T) {
	c := NewCandidates(newHost(t, refusing{t}))
	ix := &facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{{Path: "/var/lib/apt/lists/x_Packages"}},
		Packages: []facts.IndexedPackage{
			{Name: "nvidia-driver", Versions: []facts.IndexedVersion{
				{Version: "535.309.01-0+deb12u1", Origins: []string{"/var/lib/apt/lists/x_Packages"}},
				{Version: "535.300.00-1", Installed: true, Origins: []string{}},
				{Version: "535.261.03-1", Origins: []string{"/var/lib/apt/lists/x_Packages"}},
			}},
		},
	}
	c.UseIndexes(ix)
	ctx := context.Background()
	got, err := c.Versions(ctx, "apt", "nvidia-driver")
	if err != nil || !slices.Equal(got, []string{"535.309.01-0+deb12u1", "535.261.03-1"}) {
		t.Errorf("versions %v, %v: want what the indexes list, not the version only installed", got, err)
	}
	if got, err := c.Versions(ctx, "apt", "nvidia-cuda-toolkit"); err != nil || len(got) != 0 {
		t.Errorf("a package no index lists: %v, %v", got, err)
	}
	if _, err := c.Versions(ctx, "apt", "nvidia-driver; reboot"); err == nil {
		t.Error("an invalid name must fail")
	}
	if c.Runs() != 0 {
		t.Errorf("%d runs", c.Runs())
	}

	// Without an index of the manager, it is asked, as before.
	rec := &recorder{out: map[string]string{"apt-cache": aptPolicy}}
	c = NewCandidates(newHost(t, rec))
	c.UseIndexes(&facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{}})
	if got, err := c.Versions(ctx, "apt", "nvidia-driver"); err != nil || len(got) != 2 || c.Runs() != 1 {
		t.Errorf("empty lists: %v, %v, %d runs", got, err, c.Runs())
	}
	// dnf's indexes do not answer for apt.
	c = NewCandidates(newHost(t, rec))
	c.UseIndexes(&facts.PackageIndexes{Manager: "dnf", Indexes: ix.Indexes, Packages: ix.Packages})
	if _, err := c.Versions(ctx, "apt", "nvidia-driver"); err != nil || c.Runs() != 1 {
		t.Errorf("another manager's indexes: %v, %d runs", err, c.Runs())
	}
}

// TestFactsCandidates: for a host known only by its saved observation,
// the indexes the observation holds answer as they would on the host;
// what they cannot answer is an error saying what the observation lacks,
// never a question to this machine's package manager.
func TestFactsCandidates(t *testing.T) {
	ctx := context.Background()
	listed := &facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{{Path: "/var/lib/apt/lists/x_Packages"}},
		Packages: []facts.IndexedPackage{{Name: "nvidia-driver", Versions: []facts.IndexedVersion{
			{Version: "535.309.01-0+deb12u1", Origins: []string{"/var/lib/apt/lists/x_Packages"}},
		}}},
	}
	unfetched := &facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{},
		Missing: []facts.IndexSource{{File: "/etc/apt/sources.list", URI: "http://deb.debian.org/debian", Suite: "bookworm", Component: "main"}}}
	for _, tc := range []struct {
		name     string
		ix       *facts.PackageIndexes
		manager  plan.Manager
		pkg      string
		want     []string
		whyError string
	}{
		{"listed", listed, "apt", "nvidia-driver", []string{"535.309.01-0+deb12u1"}, ""},
		{"lists not fetched", unfetched, "apt", "nvidia-driver", nil, ""},
		{"no indexes", nil, "apt", "nvidia-driver", nil, "the versions of nvidia-driver that apt can install are not in the observation: it holds no package index"},
		{"no indexes recorded", &facts.PackageIndexes{}, "apt", "nvidia-driver", nil, "not in the observation: it holds no package index"},
		{"another manager", listed, "dnf", "nvidia-driver", nil, "not in the observation: it holds the indexes of apt, not of dnf"},
		{"not kept", listed, "apt", "python3-numpy", nil, "not in the observation: it keeps only the GPU-related packages of the indexes, and python3-numpy is not one"},
		{"dnf without a cache", &facts.PackageIndexes{Manager: "dnf", Indexes: []facts.PackageIndex{}}, "dnf", "nvidia-driver", nil, "not in the observation: it holds no index of dnf's configured sources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFactsCandidates()
			if tc.ix != nil {
				c.UseIndexes(tc.ix)
			}
			got, err := c.Versions(ctx, tc.manager, tc.pkg)
			if tc.whyError == "" {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Errorf("versions %v, %v; want %v", got, err, tc.want)
				}
			} else if !errors.Is(err, ErrNotObserved) || !strings.Contains(err.Error(), tc.whyError) {
				t.Errorf("error %v; want ErrNotObserved saying %q", err, tc.whyError)
			}
			if c.Runs() != 0 {
				t.Errorf("%d package-manager commands", c.Runs())
			}
		})
	}
}

// unlisted is a table whose manager has configured sources with no index
// on disk.
type unlisted struct {
	table
	missing []facts.IndexSource
}

func (u unlisted) Unfetched(plan.Manager) []facts.IndexSource { return u.missing }

// Where configured sources have no index on disk, what the indexes lack is
// known after apply, which refreshes them first: never guessed from
// gpuenv's tables, and not an error. What the indexes on disk offer is
// still picked from them.
func TestPickBeforeTheRefresh(t *testing.T) {
	missing := []facts.IndexSource{{URI: "http://deb.debian.org/debian", Suite: "bookworm", Component: "non-free"}}
	q := PickQuery{Manager: "apt", Packages: []planner.PackageName{{Name: "nvidia-driver"}}, Versions: version.MustParseConstraint("535.*"), OS: "debian", OSVersion: "12"}
	for _, tc := range []struct {
		name  string
		cands unlisted
		want  Picked
	}{
		{"nothing on disk", unlisted{table{}, missing}, Picked{Constraint: "535.*",
			Note: `apt-get update has not fetched the index of a configured source, so the version of nvidia-driver is known after apply: the newest the fetched indexes list that satisfies "535.*"`}},
		{"nothing on disk fits", unlisted{table{"nvidia-driver": {"525.147.05-4"}}, missing}, Picked{Constraint: "535.*",
			Note: `apt-get update has not fetched the index of a configured source, so the version of nvidia-driver is known after apply: the newest the fetched indexes list that satisfies "535.*" (the indexes on disk list 525.147.05-4)`}},
		{"on disk", unlisted{table{"nvidia-driver": {"535.261.03-1"}}, missing}, Picked{Version: "535.261.03-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Pick(context.Background(), tc.cands, q)
			if err != nil || !cmp.Equal(got, tc.want) {
				t.Errorf("picked %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// Before the first apt-get update the indexes answer that nothing is
// listed, without asking apt, and name the sources that are not fetched.
func TestCandidatesBeforeTheRefresh(t *testing.T) {
	c := NewCandidates(newHost(t, refusing{t}))
	missing := []facts.IndexSource{{File: "/etc/apt/sources.list", URI: "http://deb.debian.org/debian", Suite: "bookworm", Component: "main"}}
	c.UseIndexes(&facts.PackageIndexes{Manager: "apt", Indexes: []facts.PackageIndex{}, Missing: missing})
	if got, err := c.Versions(context.Background(), "apt", "nvidia-driver"); err != nil || len(got) != 0 || c.Runs() != 0 {
		t.Errorf("versions %v, %v, %d runs: want none, and no process", got, err, c.Runs())
	}
	if got := c.Unfetched("apt"); len(got) != 1 || got[0] != missing[0] {
		t.Errorf("unfetched %+v", got)
	}
	if got := c.Unfetched("dnf"); got != nil {
		t.Errorf("dnf's unfetched sources from apt's indexes: %+v", got)
	}
}

// debianArchive is Debian 12 with bookworm (500), bookworm-backports (100)
// and NVIDIA's repository, as the planner reads their indexes. bookworm's
// contrib is fetched too (and lists nothing the tests ask for): without
// it, what Debian offers would be known only after apply.
func debianArchive() *planner.Archive {
	const (
		main      = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_non-free_binary-amd64_Packages"
		contrib   = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_contrib_binary-amd64_Packages"
		backports = "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm-backports_non-free_binary-amd64_Packages"
		nvidia    = "/var/lib/apt/lists/developer.download.nvidia.com_compute_cuda_repos_debian12_x86%5f64_Packages"
	)
	v := func(ver string, prio int, from string, origin string) facts.IndexedVersion {
		return facts.IndexedVersion{Version: ver, Priority: prio, PriorityFrom: from, Origins: []string{origin}}
	}
	obs := &facts.Observation{OS: facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}}
	obs.PackageIndexes = facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{
			{Path: main, Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm", Component: "non-free"}, Release: &facts.ReleaseData{Origin: "Debian", Suite: "stable", Codename: "bookworm"}},
			{Path: contrib, Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm", Component: "contrib"}, Release: &facts.ReleaseData{Origin: "Debian", Suite: "stable", Codename: "bookworm"}},
			{Path: backports, Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm-backports", Component: "non-free"}, Release: &facts.ReleaseData{Origin: "Debian", Suite: "stable-backports", Codename: "bookworm-backports"}},
			{Path: nvidia, Source: facts.IndexSource{URI: "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/", Suite: "/"}, Site: "developer.download.nvidia.com"},
		},
		Packages: []facts.IndexedPackage{
			{Name: "cuda-drivers", Versions: []facts.IndexedVersion{v("570.86.15-1", 500, "default", nvidia)}},
			{Name: "nvidia-driver", Versions: []facts.IndexedVersion{
				v("550.163.01-2~bpo12+1", 100, "ButAutomaticUpgrades in bookworm-backports", backports),
				v("535.309.01-0+deb12u1", 500, "default", main),
			}},
			{Name: "nvidia-kernel-dkms", Versions: []facts.IndexedVersion{v("535.309.01-0+deb12u1", 500, "default", main)}},
		},
	}
	return planner.NewArchive(obs, nil)
}

// A source whose own index awaits an update offers what is known after
// apply, even where another source's indexes list the package: what they
// list is not what it offers.
func TestPickSourceAwaitingItsIndex(t *testing.T) {
	obs := &facts.Observation{OS: facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}}
	debian := "/var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_non-free_binary-amd64_Packages"
	obs.PackageIndexes = facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{
			{Path: debian, Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm", Component: "non-free"}, Release: &facts.ReleaseData{Origin: "Debian", Codename: "bookworm"}},
			{Path: strings.Replace(debian, "non-free", "contrib", 1), Source: facts.IndexSource{URI: "http://deb.debian.org/debian/", Suite: "bookworm", Component: "contrib"}, Release: &facts.ReleaseData{Origin: "Debian", Codename: "bookworm"}},
		},
		Missing:  []facts.IndexSource{{URI: "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/", Suite: "/"}},
		Packages: []facts.IndexedPackage{{Name: "cuda-toolkit-12-4", Versions: []facts.IndexedVersion{{Version: "12.4.1-1", Priority: 500, Origins: []string{debian}}}}},
	}
	cands := unlisted{table{"cuda-toolkit-12-4": {"12.4.1-1"}}, obs.PackageIndexes.Missing}
	q := PickQuery{Manager: "apt", Packages: []planner.PackageName{{Name: "cuda-toolkit-12-4"}}, Versions: version.MustParseConstraint("12.4.*"),
		Archive: planner.NewArchive(obs, nil), Source: spec.SourceNVIDIA}
	got, err := Pick(context.Background(), cands, q)
	if err != nil || got.Version != "" || got.Constraint != "12.4.*" || !strings.Contains(got.Note, "known after apply") {
		t.Errorf("picked %+v, %v; want the version known after apply", got, err)
	}
	q.Source = spec.SourceDistro
	if got, err := Pick(context.Background(), cands, q); err != nil || got.Version != "12.4.1-1" {
		t.Errorf("from the distribution's fetched index: %+v, %v", got, err)
	}
}

// dnf without a metadata cache is asked, as before: apply pins no version
// left to it for dnf, so none is.
func TestCandidatesDnfWithoutCache(t *testing.T) {
	rec := &recorder{out: map[string]string{"dnf": dnfList}}
	c := NewCandidates(newHost(t, rec))
	c.UseIndexes(&facts.PackageIndexes{Manager: "dnf", Indexes: []facts.PackageIndex{}, Missing: []facts.IndexSource{{URI: "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64", Repo: "cuda-rhel9-x86_64"}}})
	if got, err := c.Versions(context.Background(), "dnf", "nvidia-open"); err != nil || len(got) == 0 || c.Runs() != 1 {
		t.Errorf("versions %v, %v, %d runs: want dnf's answer", got, err, c.Runs())
	}
	if got := c.Unfetched("dnf"); got != nil {
		t.Errorf("unfetched dnf sources %+v: want none", got)
	}
}
