package compat

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestCheck(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
}

// allSources gathers the Source of every row of every table.
func allSources() []Source {
	var families []CUDAFamily
	for _, m := range []uint64{9, 10, 11, 12, 13} {
		f, _ := CUDAFamilyFor(m)
		families = append(families, f)
	}
	var variants []PyTorchVariant
	for _, r := range TorchReleases() {
		variants = append(variants, r.Variants...)
	}
	var out []Source
	// Every row type keeps its citation in a field named Source.
	for _, rows := range []any{
		CUDAReleases(), families, DriverBranches(), Architectures(), Chips(), CUDAArchs(), GPUs(),
		TorchReleases(), variants, TensorFlowReleases(), JAXPlugins(),
		CuDNNBuilds(), PackageRows(), must(loadDistro()), FrameworkLibrariesRows(), ToolkitFacts(),
	} {
		v := reflect.ValueOf(rows)
		for i := range v.Len() {
			out = append(out, v.Index(i).FieldByName("Source").Interface().(Source))
		}
	}
	return out
}

func TestEveryRowHasSource(t *testing.T) {
	srcs := allSources()
	if len(srcs) < 250 {
		t.Fatalf("only %d rows loaded; a table is missing", len(srcs))
	}
	keys := map[string]int{}
	for _, s := range srcs {
		if s.Table == "" || s.Key == "" || s.Line == 0 || len(s.Refs) == 0 {
			t.Errorf("row without a complete source: %+v", s)
		}
		cites := slices.ContainsFunc(s.Refs, func(r Ref) bool { return r.ID == idUnverified })
		if cites != !s.Verified() {
			t.Errorf("%s: unverified id cited %v, unverified fields %q", s, cites, s.Unverified)
		}
		for _, r := range s.Refs {
			if r.Citation == "" {
				t.Errorf("%s: reference %q has no citation", s, r.ID)
			}
		}
		keys[s.Table+" "+s.Key]++
	}
	for k, n := range keys {
		if n > 1 {
			t.Errorf("key %q appears %d times", k, n)
		}
	}
}

func TestEverySourceIsUsed(t *testing.T) {
	used := map[string]bool{}
	for _, s := range allSources() {
		for _, r := range s.Refs {
			used[r.ID] = true
		}
	}
	for id := range Sources() {
		if !used[id] {
			t.Errorf("source %q is cited by no row", id)
		}
	}
}

func TestCUDADriversRise(t *testing.T) {
	rows := CUDAReleases()
	var prev CUDARelease
	for _, r := range rows {
		if r.Driver.IsZero() {
			if !strings.Contains(r.Notes, "not read") {
				t.Errorf("%s has no driver and no note saying why", r.Source)
			}
			continue
		}
		if !prev.Driver.IsZero() && r.Driver.Compare(prev.Driver) < 0 {
			t.Errorf("%s: driver %s is below %s of CUDA %s", r.Source, r.Driver, prev.Driver, prev.Version)
		}
		prev = r
	}
}

func TestCUDAFamiliesAgreeWithReleases(t *testing.T) {
	last := map[uint64]CUDARelease{}
	for _, r := range CUDAReleases() {
		f, ok := CUDAFamilyFor(r.Version.Major())
		if !ok {
			t.Errorf("%s: no cuda_families row for major %d", r.Source, r.Version.Major())
			continue
		}
		for _, s := range f.Skipped {
			if s.Equal(mm(r.Version)) {
				t.Errorf("%s: %s is listed as never released", r.Source, s)
			}
		}
		if !r.Driver.IsZero() {
			last[r.Version.Major()] = r
		}
	}
	for major, r := range last {
		f, _ := CUDAFamilyFor(major)
		if !f.MinorCompatMin.IsZero() && f.MinorCompatMin.Compare(r.Driver) > 0 {
			t.Errorf("%s: floor %s is above the driver %s of the family's newest release", f.Source, f.MinorCompatMin, r.Driver)
		}
	}
}

func TestBranchesAgreeWithReleases(t *testing.T) {
	var prev DriverBranch
	for _, b := range DriverBranches() {
		if !prev.CUDA.IsZero() && b.CUDA.Compare(prev.CUDA) <= 0 {
			t.Errorf("%s: CUDA %s does not rise above %s", b.Source, b.CUDA, prev.CUDA)
		}
		prev = b
	}
	// A toolkit's own driver must report at least that toolkit's CUDA,
	// or nvidia-smi and the release notes disagree.
	for _, r := range CUDAReleases() {
		if r.Driver.IsZero() {
			continue
		}
		if got := MaxCUDAForDriver(r.Driver); got.Compare(mm(r.Version)) < 0 {
			t.Errorf("%s: driver %s reports CUDA %s, below the release", r.Source, r.Driver, got)
		}
	}
}

func TestGPUsAgreeWithArchitectures(t *testing.T) {
	for _, g := range GPUs() {
		a, ok := Arch(g.Arch)
		if !ok {
			t.Fatalf("%s: unknown architecture", g.Source)
		}
		if got, ok := ArchForCC(g.CC); !ok || got.Name != a.Name {
			t.Errorf("%s: capability %s maps to %q, not %q", g.Source, g.CC, got.Name, a.Name)
		}
		if !g.MinDriver.IsZero() {
			if a.FirstBranch != 0 && g.MinDriver.Major() < a.FirstBranch {
				t.Errorf("%s: min driver %s predates %s's first branch R%d", g.Source, g.MinDriver, a.Title, a.FirstBranch)
			}
			if ok, why := GPUSupportedBy(g, g.MinDriver); !ok {
				t.Errorf("%s: not supported by its own minimum driver: %s", g.Source, why)
			}
		}
		if !g.OpenREADME.IsZero() && a.Open != OpenUnsupported && g.OpenREADME.Major() < 515 {
			t.Errorf("%s: open README release %s predates the open modules", g.Source, g.OpenREADME)
		}
	}
}

func TestFrameworkBuildsAgree(t *testing.T) {
	for _, rel := range TorchReleases() {
		if len(rel.Variants) == 0 {
			t.Errorf("%s: no variants", rel.Source)
		}
		if rel.PythonMin.Compare(rel.PythonMax) > 0 {
			t.Errorf("%s: python range %s to %s", rel.Source, rel.PythonMin, rel.PythonMax)
		}
		for _, v := range rel.Variants {
			if _, err := LookupCUDA(v.CUDA); err != nil {
				t.Errorf("%s: %v", v.Source, err)
			}
			if !v.CuDNN.IsZero() {
				if ok, why := CuDNNSupportsCUDA(v.CuDNN, v.CUDA); !ok {
					t.Errorf("%s: %s", v.Source, why)
				}
			}
			for _, cc := range slices.Concat(v.SASS, v.PTX) {
				if _, ok := ArchForCC(cc); !ok {
					t.Errorf("%s: capability %s has no architecture", v.Source, cc)
				}
			}
			u, err := url.Parse(v.IndexURL())
			if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "/whl/"+v.Variant || u.RawQuery != "" {
				t.Errorf("%s: index URL %q is malformed", v.Source, v.IndexURL())
			}
		}
	}
	for _, b := range TensorFlowReleases() {
		if _, err := LookupCUDA(b.CUDA); err != nil {
			t.Errorf("%s: %v", b.Source, err)
		}
		if ok, why := CuDNNSupportsCUDA(b.CuDNN, b.CUDA); !ok {
			t.Errorf("%s: %s", b.Source, why)
		}
	}
	for _, j := range JAXPlugins() {
		// JAX states its driver floor as a branch ("525"), so compare
		// branches with the family's minor-version compatibility floor.
		f, ok := CUDAFamilyFor(j.CUDAMajor)
		if !ok || j.MinDriver.Major() < f.MinorCompatMin.Major() {
			t.Errorf("%s: driver floor %s is below CUDA %d's floor %s", j.Source, j.MinDriver, j.CUDAMajor, f.MinorCompatMin)
		}
		if want := fmt.Sprintf("cuda%d", j.CUDAMajor); !strings.Contains(j.Plugin, want) || !strings.Contains(j.PJRT, want) || !strings.HasPrefix(j.Extra, want) {
			t.Errorf("%s: plugin %q, pjrt %q or extra %q does not name CUDA %d", j.Source, j.Plugin, j.PJRT, j.Extra, j.CUDAMajor)
		}
	}
	for _, c := range CuDNNBuilds() {
		if ok, how := DriverSupportsCUDA(c.MinDriver, c.CUDAFirst); !ok {
			t.Errorf("%s: its driver floor does not run CUDA %s: %s", c.Source, c.CUDAFirst, how)
		}
	}
}

// TestEveryPackageRowExpands builds, for every naming rule, a query the
// rule should answer and checks the rule's name comes back fully expanded.
func TestEveryPackageRowExpands(t *testing.T) {
	for _, p := range PackageRows() {
		q := PackageQuery{
			OS:        p.OS,
			Repo:      p.Repo,
			Component: p.Component,
			Flavor:    p.Flavor,
			Server:    p.Server == "yes",
			CUDA:      version.MustParse("12.4.1"),
			CuDNN:     version.MustParse("9.1.0.70"),
		}
		if len(p.OSVersions) > 0 {
			q.OSVersion = p.OSVersions[0]
		}
		if p.When == WhenBranch {
			// The newest branch the row's own constraint admits, so that
			// rows bounded above (names that lost the branch at 590) are
			// asked about a branch they name.
			for _, b := range []uint64{595, 580, 550} {
				if p.Applies.IsZero() || p.Applies.Check(version.MustParse(strconv.FormatUint(b, 10))) {
					q.Branch = b
					break
				}
			}
		}
		switch {
		case p.OS == "debian" && p.Repo == RepoDistro:
			q.CUDA, q.CuDNN = version.MustParse("11.8.0"), version.MustParse("8.5.0.96")
		case strings.HasPrefix(p.Component, "cudnn") && p.Applies.String() == "< 9":
			q.CuDNN = version.MustParse("8.9.7.29")
		}
		got, err := Packages(q)
		if err != nil {
			t.Errorf("%s: %v", p.Source, err)
			continue
		}
		found := false
		for _, g := range got {
			if strings.ContainsAny(g.Name+g.Version, "{}") {
				t.Errorf("%s: unexpanded %q %q", p.Source, g.Name, g.Version)
			}
			found = found || g.Row.Source.Line == p.Source.Line
		}
		if !found {
			t.Errorf("%s: not among the answers to its own query %+v", p.Source, got)
		}
	}
}

func TestDistroVersionsSorted(t *testing.T) {
	rows := must(loadDistro())
	for i, p := range rows {
		if _, err := version.CompareDebian(p.Version, p.Version); err != nil {
			t.Errorf("%s: %v", p.Source, err)
			continue
		}
		if i == 0 || comparePackageNames(rows[i-1], p) != 0 {
			continue
		}
		if c, err := version.CompareDebian(rows[i-1].Version, p.Version); err != nil || c >= 0 {
			t.Errorf("%s: not above %s", p.Source, rows[i-1].Version)
		}
	}
}

func TestParseTableRejects(t *testing.T) {
	cols := []string{"a", "b"}
	for _, tc := range []struct{ name, data, want string }{
		{"no header", "# only a comment\n", "no header"},
		{"unknown column", "a\tb\tc\n", `unknown column "c"`},
		{"missing column", "a\n", `missing column "b"`},
		{"repeated column", "a\ta\tb\n", "appears twice"},
		{"too many cells", "a\tb\n1\t2\t3\n", "t.tsv:2: 3 cells"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTable("t.tsv", []byte(tc.data), cols...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
	recs, err := parseTable("t.tsv", []byte("# c\n a \t b \n\n x\n"), cols...)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].get("a") != "x" || recs[0].get("b") != "" || recs[0].line != 4 {
		t.Errorf("padded header and short row read as %+v", recs)
	}
}

func TestSourceColumnRules(t *testing.T) {
	refs := map[string]Ref{"doc": {"doc", "a document"}, idUnverified: {idUnverified, "memory"}}
	for _, tc := range []struct{ source, unverified, want string }{
		{"doc", "", ""},
		{"doc,unverified", "cc", ""},
		{"", "", "every row names its source"},
		{"nope", "", `unknown source id "nope"`},
		{"doc,unverified", "", "name the unverified fields"},
		{"doc", "cc", `does not cite "unverified"`},
	} {
		recs, err := parseTable("t.tsv", []byte("key\tsource\tunverified\nk\t"+tc.source+"\t"+tc.unverified+"\n"), "key", "source", "unverified")
		if err != nil {
			t.Fatal(err)
		}
		var d decoder
		s := d.source(recs[0], "t", "k", refs)
		switch {
		case tc.want == "" && d.err != nil:
			t.Errorf("%q/%q: unexpected error %v", tc.source, tc.unverified, d.err)
		case tc.want != "" && (d.err == nil || !strings.Contains(d.err.Error(), tc.want)):
			t.Errorf("%q/%q: error %v, want %q", tc.source, tc.unverified, d.err, tc.want)
		case tc.want == "" && s.Verified() != (tc.unverified == ""):
			t.Errorf("%q/%q: Verified() = %v", tc.source, tc.unverified, s.Verified())
		}
	}
}

func TestSourceString(t *testing.T) {
	r, err := LookupCUDA(version.MustParse("12.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	want := "cuda_releases row 12.2.1 (cuda-rn, unverified; unverified: runfile driver)"
	if got := r.Source.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if c := r.Source.Citations(); len(c) != 2 || !strings.HasPrefix(c[0], "cuda-rn: NVIDIA CUDA Toolkit release notes") {
		t.Errorf("Citations() = %q", c)
	}
}
