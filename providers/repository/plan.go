// Package repository plans the package repositories a spec configures,
// and enables the archive components (Debian's contrib and non-free)
// that the spec's distribution packages come from. Its Candidates asks
// the package managers which versions they can install.
package repository

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/spec"
)

// Files gpuenv writes for repositories.
const (
	SourcesDir     = "/etc/apt/sources.list.d"
	PreferencesDir = "/etc/apt/preferences.d"
	YumReposDir    = "/etc/yum.repos.d"
	SourcesList    = "/etc/apt/sources.list"
	ComponentsFile = SourcesDir + "/gpuenv-distro-components.sources"
	// DebianKeyring signs Debian's archive; debian-archive-keyring
	// installs it on every Debian system.
	DebianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
)

// Provider plans repository.<name> steps and the components step, from
// the observed sources and gpuenv's own repository files
// (facts.RepositoryFiles, which ObserveFiles reads).
type Provider struct{}

// Expecter is the optional capability of a planner.Candidates to learn
// in advance which packages providers may ask about (Candidates.Expect).
type Expecter interface {
	Expect(manager plan.Manager, names ...string)
}

var _ kind.Planner = Provider{}

// Plan compares each repository's files with the root's.
func (p Provider) Plan(_ context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	family := req.Facts.OS.Family
	p.expect(req)
	for _, r := range req.Spec.Repositories {
		files, diags := p.repositoryFiles(r, family)
		if d := checkKey(req.Facts.RepositoryFiles, r); d != nil {
			diags = append(diags, d)
		}
		resp.Diagnostics = append(resp.Diagnostics, diags...)
		if diags.HasErrors() {
			continue
		}
		if !r.IsAbsent() {
			files = withoutHostSource(req.Facts, r, family, files)
		}
		if s := fileStep(req.Facts.RepositoryFiles, "repository."+r.Name, r.IsAbsent(), files, fmt.Sprintf("repository %q (%s)", r.Name, r.URL.Value)); s != nil {
			if s.After != nil {
				s.After = repositoryValues(r)
			}
			resp.Steps = append(resp.Steps, *s)
		}
		if !r.IsAbsent() && strings.HasPrefix(r.Keyring.Value, "/") {
			if !hasKeyring(req.Facts.RepositoryFiles, r.Keyring.Value) {
				detail := fmt.Sprintf("apt refuses a repository whose Signed-By key it cannot read. Put the repository's key at %s before applying (for NVIDIA's repositories, the cuda-keyring package installs it).", r.Keyring.Value)
				if family == "rpm" {
					detail = fmt.Sprintf("dnf refuses the packages of a repository with gpgcheck=1 whose key it cannot read. Put the repository's key at %s before applying.", r.Keyring.Value)
				}
				if fp := r.KeyFingerprint.Value; fp != "" {
					detail += fmt.Sprintf(" key_fingerprint asks for the key %s; gpuenv checks it once the keyring is there, and refuses another.", fp)
				}
				resp.Warnings = append(resp.Warnings, finding.Finding{
					Summary:  fmt.Sprintf("The keyring of repository %q is missing", r.Name),
					Detail:   detail,
					Evidence: []string{keyringEvidence(r.Keyring.Value)},
				})
			}
		}
	}
	if s := p.componentsStep(req); s != nil {
		resp.Steps = append(resp.Steps, *s)
	}
	if req.Desired != nil {
		if s := nvidiaStep(req); s != nil {
			resp.Steps = append(resp.Steps, *s)
		}
	}
	return resp
}

// expect tells the request's Candidates, when it can learn them, which
// packages the spec installs. It runs first among the providers and
// starts nothing.
func (p Provider) expect(req *planner.Request) {
	d := req.Desired
	ex, ok := req.Candidates.(Expecter)
	if !ok || d == nil || d.Manager == "" {
		return
	}
	var names []string
	add := func(pns []planner.PackageName) {
		for _, pn := range pns {
			names = append(names, pn.Name)
		}
	}
	if d.Driver != nil && !d.Driver.Absent {
		add(d.Driver.Packages)
		if rel := req.Facts.Kernel.Release; rel != "" && d.Driver.KernelModules != spec.KernelModulesNone && d.NoKernel == "" {
			if req.Facts.OS.Family == "rpm" {
				names = append(names, "kernel-devel-"+rel)
			} else {
				names = append(names, "linux-headers-"+rel)
			}
		}
	}
	if d.CUDA != nil && !d.CUDA.Absent {
		add(d.CUDA.Packages)
	}
	if d.CuDNN != nil && !d.CuDNN.Absent {
		add(d.CuDNN.Packages)
	}
	for _, f := range d.Frameworks {
		if f.Source == spec.SourceDistro && f.Package != "" {
			names = append(names, f.Package)
		}
	}
	ex.Expect(d.Manager, names...)
}

// repositoryValues are a repository's attributes as a step shows them.
func repositoryValues(r *spec.Repository) map[string]string {
	v := map[string]string{
		"url":    r.URL.Value,
		"suites": strings.Join(r.Suites.Or(spec.DefaultSuites), " "),
	}
	if len(r.Components.Value) > 0 {
		v["components"] = strings.Join(r.Components.Value, " ")
	}
	if r.Keyring.Value != "" {
		v["keyring"] = r.Keyring.Value
	}
	if r.Priority.Set {
		v["priority"] = strconv.Itoa(r.Priority.Value)
	}
	return v
}

// repoFile is one file a repository is made of.
type repoFile struct {
	Path, Content string
	After         []string
}

// repositoryFiles returns the files of a repository for the host's
// package family: a deb822 sources file (and a pin file for a priority),
// or a dnf .repo file.
func (p Provider) repositoryFiles(r *spec.Repository, family string) ([]repoFile, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	keyring := r.Keyring.Value
	if strings.HasPrefix(keyring, "https://") || strings.HasPrefix(keyring, "http://") {
		if family != "rpm" {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Keyring URL not usable for apt",
				Detail:   "A plan is data that says exactly what each file will hold, and gpuenv does not reach the network to plan: fetch the key into the root (for NVIDIA's repositories, install cuda-keyring) and set keyring to its path.",
				Subject:  r.Keyring.Range.Ptr(),
			})
			return nil, diags
		}
	}
	if u, err := url.Parse(keyring); err == nil && u.Scheme == "file" && family != "rpm" {
		keyring = u.Path
	}
	if family == "rpm" {
		var b strings.Builder
		fmt.Fprintf(&b, "# Written by gpuenv for repository %q.\n[gpuenv-%s]\nname=gpuenv repository %s\nbaseurl=%s\nenabled=1\n", r.Name, r.Name, r.Name, r.URL.Value)
		if keyring != "" {
			if strings.HasPrefix(keyring, "/") {
				keyring = "file://" + keyring
			}
			fmt.Fprintf(&b, "gpgcheck=1\ngpgkey=%s\n", keyring)
		}
		return []repoFile{{Path: path.Join(YumReposDir, "gpuenv-"+r.Name+".repo"), Content: b.String(), After: []string{"dnf", "makecache"}}}, nil
	}
	suites := r.Suites.Or(spec.DefaultSuites)
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by gpuenv for repository %q.\nTypes: deb\nURIs: %s\nSuites: %s\n", r.Name, r.URL.Value, strings.Join(suites, " "))
	if len(r.Components.Value) > 0 {
		fmt.Fprintf(&b, "Components: %s\n", strings.Join(r.Components.Value, " "))
	}
	if keyring != "" {
		fmt.Fprintf(&b, "Signed-By: %s\n", keyring)
	}
	files := []repoFile{{Path: path.Join(SourcesDir, "gpuenv-"+r.Name+".sources"), Content: b.String(), After: []string{"apt-get", "update"}}}
	pin := path.Join(PreferencesDir, "gpuenv-"+r.Name+".pref")
	if r.Priority.Set && r.Priority.Value != spec.DefaultPriority {
		origin := ""
		if u, err := url.Parse(r.URL.Value); err == nil {
			origin = u.Hostname()
		}
		files = append(files, repoFile{Path: pin, Content: fmt.Sprintf("# Written by gpuenv for repository %q.\nPackage: *\nPin: origin %s\nPin-Priority: %d\n", r.Name, strconv.Quote(origin), r.Priority.Value)})
	} else {
		// No pin wanted: an earlier one is removed.
		files = append(files, repoFile{Path: pin})
	}
	return files, nil
}

// fileStep plans writing files (or removing them when absent, or when a
// file has no content); nil when the root already has them so.
func fileStep(observed facts.RepositoryFiles, address string, absent bool, files []repoFile, what string) *plan.Step {
	var ops []plan.Operation
	before, after := map[string]string{}, map[string]string{}
	created := true
	var changed []string
	var code plan.ReasonCode // the first change's
	because := func(c plan.ReasonCode) {
		if code == "" {
			code = c
		}
	}
	for _, f := range files {
		cur, exists := fileDigest(observed.Files, f.Path)
		if exists {
			created = false
			before[f.Path] = "present"
		}
		remove := absent || f.Content == ""
		switch {
		case remove && !exists:
			continue
		case remove:
			ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: f.Path, Remove: true, After: f.After}})
			changed = append(changed, "removes "+f.Path)
			because(plan.ReasonNotRequested)
		case exists && cur != "" && cur == planner.Digest(f.Content):
			after[f.Path] = "present"
			continue
		default:
			ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: f.Path, Content: f.Content, Mode: 0o644, After: f.After}})
			after[f.Path] = "present"
			if exists {
				changed = append(changed, "rewrites "+f.Path+", which differs from the spec")
				because(plan.ReasonContentDiffers)
			} else {
				changed = append(changed, "writes "+f.Path)
				because(plan.ReasonMissing)
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	action := plan.Update
	switch {
	case absent:
		action = plan.Delete
		after = nil
	case created:
		action = plan.Create
		before = nil
	}
	s := &plan.Step{Address: address, Action: action, Before: before, After: after, Operations: ops, ReasonCode: code}
	if absent {
		s.ReasonCode = plan.ReasonAbsentRequested
		s.Reason = fmt.Sprintf("absent = true removes %s: %s.", what, strings.Join(changed, "; "))
	} else {
		s.Reason = fmt.Sprintf("The spec configures %s: %s.", what, strings.Join(changed, "; "))
	}
	if len(s.Before) == 0 {
		s.Before = nil
	}
	if len(s.After) == 0 {
		s.After = nil
	}
	return s
}

// fileDigest finds an observed file's digest.
func fileDigest(files []facts.FileDigest, p string) (sum string, ok bool) {
	for _, d := range files {
		if d.Path == p {
			return d.SHA256, true
		}
	}
	return "", false
}

// checkKey refuses a repository whose key_fingerprint names another key
// than the observed keyring holds, or whose keyring holds more keys than
// that one, which the package manager would trust as well. A keyring not
// there yet is the missing-keyring warning's.
func checkKey(observed facts.RepositoryFiles, r *spec.Repository) *hcl.Diagnostic {
	want := r.KeyFingerprint.Value
	if r.IsAbsent() || want == "" || !strings.HasPrefix(r.Keyring.Value, "/") {
		return nil
	}
	kr, ok := keyring(observed, r.Keyring.Value)
	if !ok {
		return nil
	}
	refuse := func(summary, detail string) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: r.KeyFingerprint.Range.Ptr()}
	}
	switch {
	case kr.KeyError != "":
		return refuse(fmt.Sprintf("The keyring of repository %q cannot be checked", r.Name),
			fmt.Sprintf("%s is not a keyring gpuenv can read the key of (%s), so it cannot tell whether it holds the key %s that key_fingerprint names. Replace it with the repository's key as gpg --export writes it.", kr.Path, kr.KeyError, want))
	case !slices.Contains(kr.Fingerprints, want):
		return refuse(fmt.Sprintf("The keyring of repository %q holds another key", r.Name),
			fmt.Sprintf("key_fingerprint names the key %s, and %s holds %s. The package manager would trust packages signed by %s. Check where the keyring came from; if the repository's key changed, verify the new one from its publisher and update key_fingerprint.",
				want, kr.Path, strings.Join(kr.Fingerprints, ", "), map[bool]string{true: "that key", false: "those keys"}[len(kr.Fingerprints) == 1]))
	case len(kr.Fingerprints) > 1:
		return refuse(fmt.Sprintf("The keyring of repository %q holds more keys than the one it names", r.Name),
			fmt.Sprintf("key_fingerprint names the key %s, and %s holds %s as well; the package manager would trust packages signed by any of them. Put only the repository's key in the keyring.",
				want, kr.Path, strings.Join(slices.DeleteFunc(slices.Clone(kr.Fingerprints), func(f string) bool { return f == want }), ", ")))
	}
	return nil
}

// keyring finds the observed keyring at p.
func keyring(observed facts.RepositoryFiles, p string) (facts.FileDigest, bool) {
	p = path.Clean(p)
	for _, d := range observed.Keyrings {
		if d.Path == p {
			return d, true
		}
	}
	return facts.FileDigest{}, false
}

// withoutHostSource leaves out of files the source file of a repository
// that the host's own configuration already enables as the block asks
// (the same URL, suites and components, trusting the same keyring, and,
// for dnf, checking signatures): writing it again would make a second
// entry for one repository, which apt refuses when their keys differ.
// A pin file stays unless the indexes show the repository at the
// block's priority already. gpuenv's own files are compared as always.
func withoutHostSource(obs *facts.Observation, r *spec.Repository, family string, files []repoFile) []repoFile {
	if len(files) == 0 {
		return files
	}
	own := files[0].Path
	if _, exists := fileDigest(obs.RepositoryFiles.Files, own); exists {
		return files
	}
	src, ok := HostSource(obs, r, family)
	if !ok {
		return files
	}
	rest := files[1:]
	if len(rest) > 0 && rest[0].Content != "" && pinnedAlready(obs.PackageIndexes, src, r.Priority.Value) {
		rest = rest[1:]
	}
	return rest
}

// HostSource finds the source, configured by the host outside gpuenv's
// files, that enables the repository a block describes.
func HostSource(obs *facts.Observation, r *spec.Repository, family string) (facts.Repository, bool) {
	want := strings.TrimSuffix(r.URL.Value, "/")
	keyring := r.Keyring.Value
	for _, s := range obs.Repositories {
		if strings.HasPrefix(path.Base(s.File), "gpuenv-") {
			continue
		}
		if !slices.ContainsFunc(s.URIs, func(u string) bool { return strings.TrimSuffix(u, "/") == want }) {
			continue
		}
		if family == "rpm" {
			if keyring == "" || (s.GPGCheck && slices.ContainsFunc(s.Keys, func(k string) bool { return sameKeyRef(k, keyring) })) {
				return s, true
			}
			continue
		}
		if len(s.URIs) != 1 || !sameSet(s.Suites, r.Suites.Or(spec.DefaultSuites)) || !sameSet(s.Components, r.Components.Value) {
			continue
		}
		if (keyring == "" && len(s.Keys) == 0) || (len(s.Keys) == 1 && sameKeyRef(s.Keys[0], keyring)) {
			return s, true
		}
	}
	return facts.Repository{}, false
}

// sameKeyRef compares keyring references, a path and a file:// URL of it
// alike.
func sameKeyRef(a, b string) bool {
	norm := func(k string) string {
		if strings.HasPrefix(k, "file://") {
			return path.Clean(strings.TrimPrefix(k, "file://"))
		}
		if strings.HasPrefix(k, "/") {
			return path.Clean(k)
		}
		return k
	}
	return norm(a) == norm(b)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// pinnedAlready tells whether apt gives every index of the source the
// priority wanted, as the package indexes show.
func pinnedAlready(ix facts.PackageIndexes, src facts.Repository, priority int) bool {
	found := false
	for _, i := range ix.Indexes {
		if i.Source.File != src.File || !slices.Contains(src.URIs, i.Source.URI) {
			continue
		}
		if i.Priority != priority {
			return false
		}
		found = true
	}
	return found
}

// hasKeyring tells whether the keyring at p was observed.
func hasKeyring(observed facts.RepositoryFiles, p string) bool {
	_, ok := fileDigest(observed.Keyrings, path.Clean(p))
	return ok
}

// keyringEvidence says how a keyring was found missing: a keyring in
// one of KeyringDirs, or one of gpuenv's sources names, is observed
// whenever it exists; another could only have been seen by name.
func keyringEvidence(p string) string {
	for _, dir := range KeyringDirs {
		if path.Dir(path.Clean(p)) == dir {
			return p + ": no such file"
		}
	}
	return fmt.Sprintf("%s: not found (observed are the keyrings in %s, and those gpuenv's own sources name)", p, strings.Join(KeyringDirs, ", "))
}

// componentsStep enables the archive components the distribution's
// packages need, for the suites the host uses, where neither the host's
// sources nor the spec's repositories enable them.
func (p Provider) componentsStep(req *planner.Request) *plan.Step {
	need := req.Desired.Components
	os := req.Facts.OS
	if len(need) == 0 || os.ID != "debian" || os.Codename == "" {
		return nil
	}
	entries := slices.Clone(req.Facts.Repositories)
	for _, r := range req.Spec.Repositories {
		if !r.IsAbsent() {
			entries = append(entries, facts.Repository{File: "repository " + r.Name, URIs: []string{r.URL.Value}, Suites: r.Suites.Value, Components: r.Components.Value})
		}
	}
	// The suites the packages come from: the release itself, and its
	// updates and security suites where the host uses them.
	suites := []string{os.Codename}
	for _, e := range entries {
		for _, s := range e.Suites {
			if (s == os.Codename+"-updates" || s == os.Codename+"-security") && !slices.Contains(suites, s) {
				suites = append(suites, s)
			}
		}
	}
	var missing []string
	byURI := map[string][]string{}
	for _, s := range suites {
		var have []string
		uri := ""
		for _, e := range entries {
			if slices.Contains(e.Suites, s) {
				have = append(have, e.Components...)
				if uri == "" && len(e.URIs) > 0 && slices.Contains(e.Components, "main") {
					uri = e.URIs[0]
				}
			}
		}
		for _, c := range need {
			if !slices.Contains(have, c) {
				missing = append(missing, s+"/"+c)
				if uri == "" {
					uri = defaultDebianURI(s)
				}
				if !slices.Contains(byURI[uri], s) {
					byURI[uri] = append(byURI[uri], s)
				}
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("# Written by gpuenv: the archive components the spec's Debian packages come from.\n")
	uris := slices.Sorted(maps.Keys(byURI))
	for i, uri := range uris {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Types: deb\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: %s\n", uri, strings.Join(byURI[uri], " "), strings.Join(need, " "), DebianKeyring)
	}
	return &plan.Step{
		Address: pkgkit.ComponentsAddress,
		Action:  plan.Create,
		After:   map[string]string{"components": strings.Join(need, " "), "suites": strings.Join(suites, " ")},
		Reason: fmt.Sprintf("The spec's Debian packages are in %s, which the host's package sources do not enable (%s missing); %s adds them for the suites the host uses.",
			strings.Join(need, " and "), strings.Join(missing, ", "), ComponentsFile),
		ReasonCode: plan.ReasonDependency,
		Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: ComponentsFile, Content: b.String(), Mode: 0o644, After: []string{"apt-get", "update"}}}},
	}
}

func defaultDebianURI(suite string) string {
	if strings.HasSuffix(suite, "-security") {
		return "https://security.debian.org/debian-security"
	}
	return "https://deb.debian.org/debian"
}
