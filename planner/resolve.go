package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/version"
)

// Resolve completes a spec from the compatibility tables and checks it
// against itself and the host: constraints that the tables can settle
// become concrete values (a torch release and its CUDA build, the driver
// floor they need, the kernel-module flavour the GPUs allow), every value
// filled in is recorded in Desired.Inferred with its table row, and every
// combination that cannot work is an error diagnostic whose subject is one
// spec location and whose detail names the other and the fact between
// them. Situations that work with a caveat are warnings.
//
// Resolve reads only the spec, the observation and the embedded tables: it
// starts no process and asks no package manager. Package versions that
// only the archive can name are left to the providers.
func Resolve(s *spec.Spec, obs *facts.Observation) (*Desired, hcl.Diagnostics) {
	return resolve(s, obs, false)
}

// ResolveBootingRoot is Resolve for a root that will boot as a machine of
// its own (a disk image prepared for a host): its kernel is the one that
// machine boots, so kernel-side steps are planned even where the root's
// files say container (an image built in one).
func ResolveBootingRoot(s *spec.Spec, obs *facts.Observation) (*Desired, hcl.Diagnostics) {
	return resolve(s, obs, true)
}

func resolve(s *spec.Spec, obs *facts.Observation, boots bool) (*Desired, hcl.Diagnostics) {
	if obs == nil {
		obs = &facts.Observation{}
	}
	r := &resolver{spec: s, obs: obs, d: &Desired{GPUs: HostGPUs(obs)}, kept: map[string]bool{}}
	if s == nil {
		return r.d, nil
	}
	// Compatibility between layers is judged on the spec's own versions
	// before any source is looked at: a combination that cannot work is
	// refused for what it is, not for what no source offers.
	first := checkSpec(s, obs)
	if first.HasErrors() {
		return r.d, first
	}
	if !boots {
		r.d.NoKernel = noKernel(obs)
	}
	r.os = osOf(obs.OS)
	r.archive = NewArchive(obs, s)
	r.d.Archive = r.archive
	r.resolveCUDA()
	r.resolveCuDNN()
	if dn := r.d.CuDNN; dn != nil && !dn.Absent && dn.CUDAMajor != 0 {
		keep, ok := r.cudnnSource(dn)
		if !ok {
			dn.CUDAMajor = 0
		}
		r.kept["cudnn"] = keep
	}
	r.resolveFrameworks()
	r.resolveDriver()
	r.resolvePackages()
	if r.diags.HasErrors() {
		// The resolution stopped at a source and may not have reached
		// the checks that warn about the spec's versions: keep those
		// the first pass found.
		for _, d := range first {
			if !slices.ContainsFunc(r.diags, func(o *hcl.Diagnostic) bool { return o.Summary == d.Summary && o.Detail == d.Detail }) {
				r.diags = append(r.diags, d)
			}
		}
	}
	return r.d, r.diags
}

// CheckSpec judges the layers of a spec against each other on the
// spec's versions alone, as validate does without a host: a CUDA's driver
// floor, a framework build's CUDA and driver, cuDNN's CUDA, a flavour of
// kernel modules against the driver branches. It reports only what every
// choice the constraints leave open would meet: a CUDA constraint is
// judged against the rest when it admits a single release line, and
// against the driver when it admits a single major.
func CheckSpec(s *spec.Spec) hcl.Diagnostics {
	if s == nil {
		return nil
	}
	r := &resolver{spec: s, obs: &facts.Observation{}, d: &Desired{}, kept: map[string]bool{}, specOnly: true, noHost: true}
	return r.specPass()
}

// checkSpec is CheckSpec with the host's facts that do not depend on a
// package source: its GPUs, Python environments and installed driver.
func checkSpec(s *spec.Spec, obs *facts.Observation) hcl.Diagnostics {
	r := &resolver{spec: s, obs: obs, d: &Desired{GPUs: HostGPUs(obs)}, kept: map[string]bool{}, specOnly: true}
	return r.specPass()
}

func (r *resolver) specPass() hcl.Diagnostics {
	r.resolveCUDA()
	r.resolveCuDNN()
	r.resolveFrameworks()
	r.resolveDriver()
	return r.diags
}

// resolver carries one resolution.
type resolver struct {
	spec  *spec.Spec
	obs   *facts.Observation
	os    hostOS
	d     *Desired
	diags hcl.Diagnostics
	// needs are the driver floors the toolkit and frameworks ask for.
	needs []driverNeed
	// archive is what the package indexes offer; nil without them.
	archive *Archive
	// kept names the blocks whose installed packages satisfy the spec:
	// what the archive offers does not matter to them.
	kept map[string]bool
	// specOnly judges the spec's versions against each other and the
	// host's hardware only: no source is chosen, no package named, and a
	// value the constraints leave open is not picked but left unjudged.
	specOnly bool
	// noHost is set when there is no host at all (validate): what the
	// host lacks is not known, so nothing is said about it.
	noHost bool
}

// driverNeed is a driver floor one resource asks for.
type driverNeed struct {
	// Exact is the driver that runs it fully; MinorCompat the oldest one
	// that runs it through CUDA's minor-version compatibility (zero when
	// Exact is the only choice).
	Exact, MinorCompat version.Version
	Who                string    // "CUDA 12.4.1", "torch 2.5.1+cu124"
	Range              hcl.Range // where the spec asks for it
	From               compat.Source
}

func (r *resolver) errorf(subject hcl.Range, summary, format string, args ...any) {
	r.report(hcl.DiagError, subject, summary, fmt.Sprintf(format, args...))
}

func (r *resolver) warnf(subject hcl.Range, summary, format string, args ...any) {
	r.report(hcl.DiagWarning, subject, summary, fmt.Sprintf(format, args...))
}

// report adds a diagnostic; a subject without a file (a value no spec
// range stands behind) is left out rather than pointing nowhere.
func (r *resolver) report(sev hcl.DiagnosticSeverity, subject hcl.Range, summary, detail string) {
	d := &hcl.Diagnostic{Severity: sev, Summary: summary, Detail: detail}
	if subject.Filename != "" {
		d.Subject = subject.Ptr()
	}
	r.diags = append(r.diags, d)
}

func (r *resolver) infer(address, attr, value string, from compat.Source) {
	r.d.Inferred = append(r.d.Inferred, plan.Inference{Address: address, Attr: attr, Value: value, From: from.Cited(), Unverified: from.UnverifiedText()})
}

// at writes a spec location as file:line for a diagnostic's detail.
func at(rng hcl.Range) string {
	if rng.Filename == "" {
		return "the spec"
	}
	return fmt.Sprintf("%s:%d", rng.Filename, rng.Start.Line)
}

// HostGPUs lists the host's NVIDIA GPUs: those on the PCI bus, with what
// NVML adds about the same device, and NVML's devices that the PCI scan
// did not see (a root whose /sys is not laid out).
func HostGPUs(obs *facts.Observation) []HostGPU {
	var out []HostGPU
	seen := map[string]bool{}
	for _, p := range obs.PCI {
		g := HostGPU{Address: p.Address, Index: -1, Model: p.Model, Arch: strings.ToLower(p.Architecture)}
		if p.ComputeCapability != "" {
			g.CC, _ = version.Parse(p.ComputeCapability)
		}
		if row, ok := compat.GPUByPCIID(p.DeviceID); ok {
			g.Row = &row
			g.Model, g.Arch, g.CC, g.OpenRequired = row.Model, row.Arch, row.CC, row.OpenRequired
		}
		for _, n := range obs.NVML.Devices {
			if samePCI(n.PCIBusID, p.Address) {
				g.Index, g.UUID = n.Index, n.UUID
				if g.Model == "" {
					g.Model = n.Name
				}
				if cc, err := version.Parse(n.ComputeCapability); err == nil && g.CC.IsZero() {
					g.CC = cc
				}
				seen[n.UUID] = true
			}
		}
		if g.Model == "" {
			g.Model = fmt.Sprintf("NVIDIA device 0x%04x", p.DeviceID)
		}
		out = append(out, g.withArch())
	}
	for _, n := range obs.NVML.Devices {
		if seen[n.UUID] {
			continue
		}
		g := HostGPU{Address: n.PCIBusID, Index: n.Index, UUID: n.UUID, Model: n.Name}
		g.CC, _ = version.Parse(n.ComputeCapability)
		out = append(out, g.withArch())
	}
	return out
}

// withArch fills the architecture from the compute capability where the
// device table did not, and marks the architectures only the open modules
// drive.
func (g HostGPU) withArch() HostGPU {
	if g.Arch == "" && !g.CC.IsZero() {
		if a, ok := compat.ArchForCC(g.CC); ok {
			g.Arch = a.Name
		}
	}
	if a, ok := compat.Arch(g.Arch); ok && a.Open == compat.OpenRequired {
		g.OpenRequired = true
	}
	return g
}

// samePCI compares NVML's bus id ("00000000:17:00.0") with sysfs's
// address ("0000:17:00.0"): the domain's width differs.
func samePCI(nvml, sysfs string) bool {
	_, a, ok1 := strings.Cut(strings.ToLower(nvml), ":")
	_, b, ok2 := strings.Cut(strings.ToLower(sysfs), ":")
	return ok1 && ok2 && a == b
}

// hostOS is the operating system as the package tables name it.
type hostOS struct {
	ID, Version string       // "debian" "12", "ubuntu" "22.04", "rhel" "9"
	Title       string       // "Debian 12"
	Manager     plan.Manager // ManagerApt, ManagerDnf, or "" when unknown
}

func osOf(o facts.OS) hostOS {
	h := hostOS{ID: o.ID, Version: o.VersionID}
	rhelLike := o.ID == "rhel" || slices.Contains(o.IDLike, "rhel") || slices.Contains(o.IDLike, "centos")
	if rhelLike {
		h.ID = "rhel"
		h.Version, _, _ = strings.Cut(o.VersionID, ".")
	}
	switch {
	case o.Family == "deb" || o.ID == "debian" || o.ID == "ubuntu":
		h.Manager = plan.ManagerApt
	case o.Family == "rpm" || rhelLike:
		h.Manager = plan.ManagerDnf
	}
	name := o.ID
	switch o.ID {
	case "debian":
		name = "Debian"
	case "ubuntu":
		name = "Ubuntu"
	case "rhel":
		name = "RHEL"
	}
	h.Title = strings.TrimSpace(name + " " + o.VersionID)
	if h.Title == "" {
		h.Title = "this host's operating system"
	}
	return h
}

// narrow intersects c with extra, a constraint written as text (see
// version.Constraint.Intersect), and reports whether any version is
// left. An extra that does not parse leaves nothing.
func narrow(c version.Constraint, extra string) (version.Constraint, bool) {
	if extra == "" {
		return c, c.Satisfiable()
	}
	key := narrowKey{c.String(), extra}
	if r, ok := narrowed.Load(key); ok {
		n := r.(narrowResult)
		return n.c, n.ok
	}
	n := narrowResult{c: c}
	if e, err := version.ParseConstraint(extra); err == nil {
		n.c, n.ok = c.Intersect(e)
	}
	// The constraints come from the spec and the tables, a few hundred
	// pairs in all, and a fleet's plans ask for the same ones host after
	// host; the bound keeps a run that meets ever new ones from growing
	// it without end.
	if narrowedSize.Add(1) <= maxNarrowed {
		narrowed.Store(key, n)
	}
	return n.c, n.ok
}

// narrowed remembers narrow's answers, which depend on the two texts
// alone; constraints are never changed once made, so one may be shared.
var (
	narrowed     sync.Map // narrowKey → narrowResult
	narrowedSize atomic.Int64
)

const maxNarrowed = 1 << 12

type narrowKey struct{ c, extra string }

type narrowResult struct {
	c  version.Constraint
	ok bool
}

// admitsFrom reports whether c admits some version of at least floor.
func admitsFrom(c version.Constraint, floor version.Version) bool {
	_, ok := narrow(c, ">= "+floor.String())
	return ok
}

// mm is a version's major.minor.
func mm(v version.Version) version.Version { return v.Trunc(2) }

// resolveCUDA chooses the toolkit's release line and the release the
// driver floor comes from.
func (r *resolver) resolveCUDA() {
	c := r.spec.CUDA
	if c == nil {
		return
	}
	dc := &DesiredCUDA{Block: c, Absent: c.IsAbsent(), Source: c.Source.Or(spec.DefaultCUDASource), Versions: c.Version.Value}
	r.d.CUDA = dc
	if dc.Absent {
		return
	}
	rows := admittedCUDA(dc.Versions)
	if len(rows) == 0 {
		r.errorf(c.Version.RangeOr(c.DefRange), "Unknown CUDA version",
			"No CUDA release in gpuenv's tables matches %s; the tables know CUDA %s to %s.",
			dc.Versions.Quoted(), compat.CUDAReleases()[0].Version, compat.CUDAReleases()[len(compat.CUDAReleases())-1].Version)
		return
	}
	if r.specOnly {
		r.specCUDA(dc, rows)
		return
	}
	keep, ok := r.cudaSource(dc, rows)
	if !ok {
		return
	}
	r.kept["cuda"] = keep
	var offered []listed
	switch {
	case !keep && r.archive.Knows(dc.Source):
		if offered = r.cudaOffers(dc.Source, dc.Versions, rows); len(offered) == 0 {
			list := r.archive.Listing(dc.Source, toolkitPackage)
			if list == "" {
				list = "no CUDA toolkit package"
			}
			r.errorf(c.Version.RangeOr(c.DefRange), "CUDA version not in the archive",
				"The spec asks for CUDA %s (%s) from %s, which offers %s.", dc.Versions.Quoted(), at(c.Version.RangeOr(c.DefRange)), r.archive.Describe(dc.Source), list)
			return
		}
		// rows are shared with other plans: deleting from them would
		// change those.
		rows = slices.DeleteFunc(slices.Clone(rows), func(rel compat.CUDARelease) bool {
			return !slices.ContainsFunc(offered, func(l listed) bool {
				up, err := r.archive.Upstream(l.offer.Version)
				return err == nil && mm(up).Equal(mm(rel.Version))
			})
		})
	case dc.Source == spec.SourceDistro:
		if rows = r.distroCUDA(dc, rows); rows == nil {
			return
		}
	}
	// Prefer the line a framework's build targets, so that the toolkit
	// and the framework agree; else the newest line.
	pick := rows[len(rows)-1]
	for _, f := range r.spec.Frameworks {
		if f.IsAbsent() || !f.CUDA.Set {
			continue
		}
		for i := len(rows) - 1; i >= 0; i-- {
			if mm(rows[i].Version).Equal(mm(f.CUDA.Value)) {
				pick = rows[i]
				break
			}
		}
		break
	}
	dc.Minor = mm(pick.Version)
	// The newest release of the line is what the package manager installs.
	for _, rel := range rows {
		if mm(rel.Version).Equal(dc.Minor) {
			dc.Release = rel
		}
	}
	if e, ok := dc.Versions.Exact(); !ok || len(e.Parts()) < 2 {
		line := slices.DeleteFunc(slices.Clone(offered), func(l listed) bool {
			up, err := r.archive.Upstream(l.offer.Version)
			return err != nil || !mm(up).Equal(dc.Minor)
		})
		if len(line) > 0 {
			r.inferText("cuda", "version", dc.Minor.String(), r.offerText(dc.Source, line))
		} else {
			r.infer("cuda", "version", dc.Minor.String(), pick.Source)
		}
	}
	dc.Path = c.Path.Or(spec.DefaultCUDAPath(dc.Source, dc.Minor))
	dc.SetEnvironment = c.SetEnvironment.Value
	need := driverNeed{Exact: dc.Release.Driver, Who: "CUDA " + dc.Release.Version.String(), Range: c.Version.RangeOr(c.DefRange), From: dc.Release.Source}
	if f, ok := compat.CUDAFamilyFor(dc.Minor.Major()); ok {
		need.MinorCompat = f.MinorCompatMin
	}
	if !need.Exact.IsZero() || !need.MinorCompat.IsZero() {
		r.needs = append(r.needs, need)
	}
}

// specCUDA judges the toolkit on the spec's versions alone. A constraint
// that admits one release line sets the line and asks the driver of its
// oldest release admitted (every release of the line needs that much); one
// that admits one major asks its family's minor-version compatibility
// floor; a wider one asks nothing, as the release is not known yet.
func (r *resolver) specCUDA(dc *DesiredCUDA, rows []compat.CUDARelease) {
	c := dc.Block
	major := rows[0].Version.Major()
	for _, rel := range rows {
		if rel.Version.Major() != major {
			return
		}
	}
	need := driverNeed{Who: fmt.Sprintf("CUDA %d", major), Range: c.Version.RangeOr(c.DefRange)}
	if f, ok := compat.CUDAFamilyFor(major); ok {
		need.MinorCompat, need.From = f.MinorCompatMin, f.Source
	}
	if line, ok := oneLine(rows); ok {
		dc.Minor = line
		oldest := rows[0]
		for _, rel := range rows {
			if !rel.Driver.IsZero() && (oldest.Driver.IsZero() || rel.Driver.Compare(oldest.Driver) < 0) {
				oldest = rel
			}
		}
		dc.Release = oldest
		need.Exact, need.Who, need.From = oldest.Driver, "CUDA "+oldest.Version.String(), oldest.Source
		if len(rows) > 1 {
			// The spec asks for the line, and its first release needs
			// the least of any.
			need.Who = "CUDA " + line.String()
		}
	}
	if !need.Exact.IsZero() || !need.MinorCompat.IsZero() {
		r.needs = append(r.needs, need)
	}
}

// oneLine is the release line (major.minor) all of rows share.
func oneLine(rows []compat.CUDARelease) (version.Version, bool) {
	if len(rows) == 0 {
		return version.Version{}, false
	}
	line := mm(rows[0].Version)
	for _, rel := range rows {
		if !mm(rel.Version).Equal(line) {
			return version.Version{}, false
		}
	}
	return line, true
}

// specLine is the release line a CUDA constraint admits when it admits
// one only.
func specLine(c version.Constraint) (version.Version, bool) {
	return oneLine(admittedCUDA(c))
}

// distroCUDA keeps the releases the distribution's archive has.
func (r *resolver) distroCUDA(dc *DesiredCUDA, rows []compat.CUDARelease) []compat.CUDARelease {
	c := dc.Block
	pkgs := r.os.rowsFor(compat.RepoDistro, "toolkit")
	if len(pkgs) == 0 {
		r.errorf(c.Source.RangeOr(c.DefRange), "No CUDA toolkit in the distribution's archive",
			"gpuenv knows no CUDA toolkit package in %s's own archive. Use source = \"nvidia\" with a repository block for NVIDIA's CUDA repository.", r.os.Title)
		return nil
	}
	var kept []compat.CUDARelease
	for _, rel := range rows {
		for _, p := range pkgs {
			if p.Applies.IsZero() || p.Applies.Check(rel.Version) {
				kept = append(kept, rel)
				break
			}
		}
	}
	if len(kept) == 0 {
		var has []string
		for _, p := range pkgs {
			has = append(has, fmt.Sprintf("%s %s", p.Name, strings.TrimSuffix(p.Applies.String(), ".*")))
		}
		r.errorf(c.Version.RangeOr(c.DefRange), "CUDA version not in the distribution's archive",
			"%s's archive has CUDA %s only (%s); the spec asks for CUDA %s with source = \"distro\" (%s). Use source = \"nvidia\" for other versions.",
			r.os.Title, strings.TrimSuffix(pkgs[0].Applies.String(), ".*"), strings.Join(has, ", "), dc.Versions.Quoted(), at(c.Source.RangeOr(c.DefRange)))
		return nil
	}
	return kept
}

// toolkitCUDA is the CUDA the system's toolkit has: the managed one, else
// the observed default; zero when there is none.
func (r *resolver) toolkitCUDA() (version.Version, string) {
	if dc := r.d.CUDA; dc != nil && !dc.Absent {
		line := dc.Minor
		if line.IsZero() {
			// The toolkit was not resolved (no source offers it, say):
			// what depends on its CUDA is still judged on the line the
			// spec asks for, never on a table's newest.
			line, _ = specLine(dc.Versions)
		}
		if !line.IsZero() {
			return line, fmt.Sprintf("the cuda block asks for CUDA %s (%s)", line, at(dc.Block.Version.RangeOr(dc.Block.DefRange)))
		}
	}
	if r.spec.CUDA != nil {
		return version.Version{}, ""
	}
	tks := r.obs.CUDA.Toolkits
	for _, t := range tks {
		if t.Path == r.obs.CUDA.Default || len(tks) == 1 {
			if v, err := version.Parse(t.Version); err == nil {
				return mm(v), fmt.Sprintf("the host's toolkit at %s is CUDA %s", t.Path, mm(v))
			}
		}
	}
	return version.Version{}, ""
}

// resolveCuDNN checks that the cuDNN asked for has a build for the CUDA
// major in use, and picks that build.
func (r *resolver) resolveCuDNN() {
	b := r.spec.CuDNN
	if b == nil {
		return
	}
	dn := &DesiredCuDNN{Block: b, Absent: b.IsAbsent(), Source: b.Source.Or(spec.DefaultCuDNNSource), Versions: b.Version.Value}
	r.d.CuDNN = dn
	if dn.Absent {
		return
	}
	subject := b.Version.RangeOr(b.DefRange)
	admitted := admittedCuDNN(dn.Versions)
	if len(admitted) == 0 {
		r.errorf(subject, "Unknown cuDNN version",
			"No cuDNN release in gpuenv's tables matches %s.", dn.Versions.Quoted())
		return
	}
	majors := map[uint64]bool{}
	for _, row := range admitted {
		majors[row.First.Major()] = true
	}
	if len(majors) == 1 {
		dn.Major = admitted[0].First.Major()
	}
	cuda, why := r.toolkitCUDA()
	if cuda.IsZero() {
		// No toolkit to match: the newest build admitted.
		dn.CUDAMajor = admitted[len(admitted)-1].CUDAMajor
		return
	}
	// The last row that fits, by index: a row is most of a kilobyte.
	fit := -1
	var cudaMajors []string
	for i := range admitted {
		row := &admitted[i]
		if !slices.Contains(cudaMajors, strconv.FormatUint(row.CUDAMajor, 10)) {
			cudaMajors = append(cudaMajors, strconv.FormatUint(row.CUDAMajor, 10))
		}
		if row.CUDAMajor == cuda.Major() {
			fit = i
		}
	}
	if fit < 0 {
		slices.Sort(cudaMajors)
		r.errorf(subject, "No cuDNN build for this CUDA",
			"cuDNN %s has builds for CUDA %s only, none for CUDA %d (%s); %s.",
			dn.Versions.Quoted(), joinAnd(cudaMajors), cuda.Major(), admitted[len(admitted)-1].Source, why)
		return
	}
	row := &admitted[fit]
	if cuda.Compare(row.CUDAFirst) < 0 {
		r.errorf(subject, "No cuDNN build for this CUDA",
			"cuDNN %s's build for CUDA %d starts at CUDA %s (%s); %s.",
			dn.Versions.Quoted(), row.CUDAMajor, row.CUDAFirst, row.Source, why)
		return
	}
	dn.CUDAMajor = cuda.Major()
	dn.CUDA = cuda
}

// admitsRange reports whether c admits some version whose major.minor is
// within [first, last].
func admitsRange(c version.Constraint, first, last version.Version) bool {
	next := fmt.Sprintf("%d.%d", last.Major(), last.Minor()+1)
	_, ok := narrow(c, fmt.Sprintf(">= %s, < %s", first, next))
	return ok
}

func joinAnd(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
