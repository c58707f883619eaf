package compat

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// Package repositories.
const (
	RepoDistro = "distro" // the operating system's own archive
	RepoNVIDIA = "nvidia" // NVIDIA's CUDA repository
)

// When a package row applies, by whether a driver branch was chosen.
const (
	WhenBranch = "branch" // only when a branch is chosen
	WhenLatest = "latest" // only when none is
)

// PackageRow is one package-naming rule.
type PackageRow struct {
	OS         string   // "ubuntu", "debian", "rhel"
	OSVersions []string // empty: any release
	Repo       string   // RepoDistro or RepoNVIDIA
	Component  string   // "driver", "utils", "toolkit", "cudnn", …
	Flavor     Flavor   // empty: either flavour
	Server     string   // "yes", "no" or "" (either): Ubuntu's -server series
	When       string   // WhenBranch, WhenLatest or "" (always)
	// Applies constrains the component's own version: the driver branch,
	// or the CUDA or cuDNN version for those components.
	Applies version.Constraint
	Name    string // template, e.g. "nvidia-driver-{branch}-open"
	Version string // template of the version to pin; empty: not derived
	Notes   string
	Source  Source
}

// PackageQuery asks which packages provide a component.
type PackageQuery struct {
	OS        string // "ubuntu", "debian", "rhel" (os-release ID)
	OSVersion string // "22.04", "12", "9" (os-release VERSION_ID, major for RHEL)
	Repo      string // RepoDistro or RepoNVIDIA
	Component string
	Flavor    Flavor // needed for flavour-specific components such as "driver"
	Server    bool   // Ubuntu's -server driver series
	Branch    uint64 // driver branch; 0: none chosen
	CUDA      version.Version
	CuDNN     version.Version
}

// Package is a package to install, with the version to pin where the
// request determines it ("12.4.1-1" for cuda-toolkit-12-4 and CUDA 12.4.1).
type Package struct {
	Name    string
	Version string
	Row     PackageRow
}

var placeholders = []string{"{branch}", "{cuda}", "{cuda_major}", "{cuda_minor}", "{cudnn}", "{cudnn_major}"}

var packagesTable = loaded(loadPackages)

func loadPackages() ([]PackageRow, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("packages.tsv", "os", "os_version", "repo", "component", "flavor", "server", "when", "applies", "name", "version", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]PackageRow, 0, len(recs))
	keys := map[string]int{}
	for _, r := range recs {
		p := PackageRow{
			OS:        d.required(r, "os"),
			Repo:      d.oneOf(r, "repo", RepoDistro, RepoNVIDIA),
			Component: d.required(r, "component"),
			Flavor:    Flavor(d.oneOf(r, "flavor", "", string(FlavorOpen), string(FlavorProprietary))),
			Server:    d.oneOf(r, "server", "", "yes", "no"),
			When:      d.oneOf(r, "when", "", WhenBranch, WhenLatest),
			Applies:   d.constraint(r, "applies"),
			Name:      d.required(r, "name"),
			Version:   d.str(r, "version"),
			Notes:     d.str(r, "notes"),
		}
		if s := r.get("os_version"); s != "" {
			p.OSVersions = strings.Split(s, ",")
		}
		var sel []string
		for _, c := range []string{"os", "os_version", "repo", "component", "flavor", "server", "when", "applies"} {
			sel = append(sel, r.get(c))
		}
		key := strings.Join(sel, "|")
		p.Source = d.source(r, "packages", fmt.Sprintf("%s %s %s %s %s", p.OS, r.get("os_version"), p.Repo, p.Component, p.Name), refs)
		if prev, dup := keys[key]; dup {
			d.fail(r, "name", "same selector columns as line %d", prev)
		}
		keys[key] = r.line
		for _, tmpl := range []struct{ col, s string }{{"name", p.Name}, {"version", p.Version}} {
			rest := tmpl.s
			for _, ph := range placeholders {
				rest = strings.ReplaceAll(rest, ph, "")
			}
			if strings.ContainsAny(rest, "{}") {
				d.fail(r, tmpl.col, "%q has an unknown placeholder (known: %s)", tmpl.s, strings.Join(placeholders, " "))
			}
		}
		if strings.Contains(p.Name, "{branch}") != (p.When == WhenBranch) {
			d.fail(r, "when", "a name with {branch} needs when=branch, and only such a name")
		}
		rows = append(rows, p)
	}
	return rows, d.err
}

// PackageRows returns every package-naming rule, in file order.
func PackageRows() []PackageRow { return slices.Clone(must(packagesTable())) }

// CPUOnly reports whether the row is a framework package built without
// CUDA, as its notes say: the distribution's PyTorch on Debian 12.
func (r PackageRow) CPUOnly() bool { return strings.Contains(strings.ToLower(r.Notes), "cpu-only") }

// RowsFor are the rows of an OS release for a repository and component,
// whatever their flavour or branch, in the table's order.
func RowsFor(osID, osVersion, repo, component string) []PackageRow {
	var out []PackageRow
	for _, p := range must(packagesTable()) {
		if p.OS == osID && p.Repo == repo && p.Component == component &&
			(len(p.OSVersions) == 0 || slices.Contains(p.OSVersions, osVersion)) {
			out = append(out, p)
		}
	}
	return out
}

// DistroFramework is the row of the distribution's package of a framework
// component ("pytorch") on an OS release, the first of RowsFor as the
// resolver picks it; false when the tables name none.
func DistroFramework(osID, osVersion, component string) (PackageRow, bool) {
	rows := RowsFor(osID, osVersion, RepoDistro, component)
	if len(rows) == 0 {
		return PackageRow{}, false
	}
	return rows[0], true
}

// subject returns the version a component's Applies constraint is
// evaluated on, zero when the query does not give it.
func (q PackageQuery) subject() version.Version {
	switch {
	case q.Component == "toolkit":
		return q.CUDA
	case strings.HasPrefix(q.Component, "cudnn"):
		return q.CuDNN
	case q.Component == "pytorch":
		return version.Version{}
	case q.Branch != 0:
		return version.MustParse(strconv.FormatUint(q.Branch, 10))
	}
	return version.Version{}
}

func (p PackageRow) matches(q PackageQuery) bool {
	if p.OS != q.OS || p.Repo != q.Repo || p.Component != q.Component {
		return false
	}
	if len(p.OSVersions) > 0 && !slices.Contains(p.OSVersions, q.OSVersion) {
		return false
	}
	if p.Flavor != "" && p.Flavor != q.Flavor {
		return false
	}
	if p.Server == "yes" && !q.Server || p.Server == "no" && q.Server {
		return false
	}
	if p.When == WhenBranch && q.Branch == 0 || p.When == WhenLatest && q.Branch != 0 {
		return false
	}
	// A constraint is checked only against a version the query gives, so
	// that asking without one lists every candidate.
	if v := q.subject(); !p.Applies.IsZero() && !v.IsZero() && !p.Applies.Check(v) {
		return false
	}
	return true
}

// Packages returns the packages that provide a component from a
// repository on an operating system, with the version to pin where the
// query determines it. It fails when no row matches or a name needs a
// value the query leaves out.
func Packages(q PackageQuery) ([]Package, error) {
	var out []Package
	for _, p := range must(packagesTable()) {
		if !p.matches(q) {
			continue
		}
		name, ok := expand(p.Name, q)
		if !ok {
			return nil, fmt.Errorf("%s needs more of the request than %s (%s)", p.Name, describe(q), p.Source)
		}
		ver, ok := expand(p.Version, q)
		if !ok {
			ver = ""
		}
		out = append(out, Package{Name: name, Version: ver, Row: p})
	}
	if len(out) == 0 {
		return nil, noPackage(q)
	}
	return out, nil
}

// noPackage is Packages' error when no row matches. Planning asks about
// components a repository does not have as a matter of course and drops
// the error, so its message is spelled only when read.
type noPackage PackageQuery

func (e noPackage) Error() string {
	return fmt.Sprintf("no package provides %s: %v", describe(PackageQuery(e)), ErrUnknown)
}

func (e noPackage) Unwrap() error { return ErrUnknown }

// describe spells a query for error messages.
func describe(q PackageQuery) string {
	s := fmt.Sprintf("%s from %s on %s %s", q.Component, q.Repo, q.OS, q.OSVersion)
	var with []string
	if q.Flavor != "" {
		with = append(with, string(q.Flavor)+" modules")
	}
	if q.Server {
		with = append(with, "server series")
	}
	if q.Branch != 0 {
		with = append(with, fmt.Sprintf("branch %d", q.Branch))
	}
	if !q.CUDA.IsZero() {
		with = append(with, "CUDA "+q.CUDA.String())
	}
	if !q.CuDNN.IsZero() {
		with = append(with, "cuDNN "+q.CuDNN.String())
	}
	if len(with) > 0 {
		s += " (" + strings.Join(with, ", ") + ")"
	}
	return s
}

// expand fills a template's placeholders from the query. It reports false
// when a placeholder needs a value the query lacks: {cuda} needs a full
// X.Y.Z version and {cudnn} all four parts, since a package version pins
// an exact release.
func expand(tmpl string, q PackageQuery) (string, bool) {
	if !strings.Contains(tmpl, "{") {
		return tmpl, true
	}
	cuda, cudnn := nparts(q.CUDA), nparts(q.CuDNN)
	values := map[string]string{}
	if q.Branch != 0 {
		values["{branch}"] = strconv.FormatUint(q.Branch, 10)
	}
	if cuda >= 1 {
		values["{cuda_major}"] = strconv.FormatUint(q.CUDA.Major(), 10)
	}
	if cuda >= 2 {
		values["{cuda_minor}"] = strconv.FormatUint(q.CUDA.Minor(), 10)
	}
	if cuda >= 3 {
		values["{cuda}"] = q.CUDA.Trunc(3).String()
	}
	if cudnn >= 1 {
		values["{cudnn_major}"] = strconv.FormatUint(q.CuDNN.Major(), 10)
	}
	if cudnn >= 4 {
		values["{cudnn}"] = q.CuDNN.Trunc(4).String()
	}
	out := tmpl
	for _, ph := range placeholders {
		if !strings.Contains(out, ph) {
			continue
		}
		v, ok := values[ph]
		if !ok {
			return "", false
		}
		out = strings.ReplaceAll(out, ph, v)
	}
	return out, true
}

// DistroPackage is a package version seen in a distribution's archive.
type DistroPackage struct {
	OS, OSVersion string
	Package       string
	Version       string // Debian or RPM version, as the archive spells it
	Suite         string // "bookworm-security/non-free"
	Notes         string
	Source        Source
}

var distroTable = loaded(loadDistro)

func loadDistro() ([]DistroPackage, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("distro_packages.tsv", "os", "os_version", "package", "version", "suite", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]DistroPackage, 0, len(recs))
	for _, r := range recs {
		p := DistroPackage{
			OS:        d.required(r, "os"),
			OSVersion: d.required(r, "os_version"),
			Package:   d.required(r, "package"),
			Version:   d.required(r, "version"),
			Suite:     d.required(r, "suite"),
			Notes:     d.str(r, "notes"),
		}
		p.Source = d.source(r, "distro_packages", fmt.Sprintf("%s %s %s=%s", p.OS, p.OSVersion, p.Package, p.Version), refs)
		// Versions within a package are ordered by the tests: Debian
		// comparison is too slow to repeat on every load.
		if n := len(rows); n > 0 && comparePackageNames(rows[n-1], p) > 0 {
			d.fail(r, "package", "rows must be sorted by os, os_version and package")
		}
		rows = append(rows, p)
	}
	return rows, d.err
}

// comparePackageNames orders rows by os, release and package name.
func comparePackageNames(a, b DistroPackage) int {
	if c := strings.Compare(a.OS, b.OS); c != 0 {
		return c
	}
	if c := strings.Compare(a.OSVersion, b.OSVersion); c != 0 {
		return c
	}
	return strings.Compare(a.Package, b.Package)
}

// DistroComponents returns the archive components other than main that a
// release's GPU packages live in ("contrib", "non-free" for Debian 12),
// sorted.
func DistroComponents(os, osVersion string) []string {
	var out []string
	for _, p := range must(distroTable()) {
		if p.OS != os || p.OSVersion != osVersion {
			continue
		}
		if _, comp, ok := strings.Cut(p.Suite, "/"); ok && comp != "main" && !slices.Contains(out, comp) {
			out = append(out, comp)
		}
	}
	slices.Sort(out)
	return out
}

// DistroPackages returns the versions of a package seen in a release's
// archive, oldest first.
func DistroPackages(os, osVersion, pkg string) []DistroPackage {
	var out []DistroPackage
	for _, p := range must(distroTable()) {
		if p.OS == os && p.OSVersion == osVersion && p.Package == pkg {
			out = append(out, p)
		}
	}
	return out
}
