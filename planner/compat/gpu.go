package compat

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/spec/version"
)

// Flavor is a kernel-module flavour of the NVIDIA driver.
type Flavor string

// The kernel-module flavours.
const (
	FlavorOpen        Flavor = "open"        // MIT/GPLv2 modules, Turing and newer
	FlavorProprietary Flavor = "proprietary" // the closed modules
)

// OpenModules says how an architecture stands with the open kernel modules.
type OpenModules string

// How architectures stand with the open kernel modules.
const (
	OpenUnsupported OpenModules = "unsupported" // before Turing: no GSP
	OpenSupported   OpenModules = "supported"
	OpenRequired    OpenModules = "required" // proprietary modules do not support it
)

// Architecture is one GPU architecture.
type Architecture struct {
	Name  string            // lower-case key: "blackwell"
	Title string            // "Blackwell"
	CCs   []version.Version // compute capabilities: "10.0", "12.0"
	Open  OpenModules
	// FirstBranch is the first driver branch that supports it (0: unknown,
	// older than any branch the tables list); LastBranch the last one (0:
	// still supported).
	FirstBranch, LastBranch uint64
	// LastCUDAMajor is the last CUDA major whose toolkit builds for it (0:
	// still current).
	LastCUDAMajor uint64
	Notes         string
	Source        Source
}

// Chip is one GPU chip and the compute capability all its GPUs share.
type Chip struct {
	Name string // "GK110"
	Arch string // Architecture.Name
	CC   version.Version
	// Checked lists products of the chip whose capability NVIDIA's list
	// gives.
	Checked string
	Source  Source
}

// GPU is one PCI device id of NVIDIA (vendor 0x10de).
type GPU struct {
	PCIID uint16
	Model string // "B200"
	// Chip is the chip pci.ids names for the id ("GK110"); empty where
	// pci.ids does not name one.
	Chip string
	Arch string // Architecture.Name
	CC   version.Version
	// OpenRequired marks GPUs the proprietary modules do not support,
	// beyond what their architecture says (GH200 among Hoppers).
	OpenRequired bool
	// MinDriver is the practical minimum driver; a bare branch ("450")
	// stands for that branch's first release. Zero: use the
	// architecture's first branch.
	MinDriver version.Version
	// OpenREADME is the first open-gpu-kernel-modules release whose README
	// lists the id: an upper bound for open-module support.
	OpenREADME version.Version
	Notes      string
	Source     Source
}

type archs struct {
	rows   []Architecture
	byName map[string]int
}

var archTable = loaded(loadArchs)

func loadArchs() (archs, error) {
	refs, err := sourcesTable()
	if err != nil {
		return archs{}, err
	}
	recs, err := readTable("architectures.tsv", "name", "title", "cc", "open_modules", "first_branch", "last_branch", "last_cuda_major", "notes", "source", "unverified")
	if err != nil {
		return archs{}, err
	}
	var d decoder
	t := archs{byName: make(map[string]int, len(recs))}
	for _, r := range recs {
		a := Architecture{
			Name:          d.required(r, "name"),
			Title:         d.required(r, "title"),
			CCs:           d.versions(r, "cc"),
			Open:          OpenModules(d.oneOf(r, "open_modules", string(OpenUnsupported), string(OpenSupported), string(OpenRequired))),
			FirstBranch:   d.uint(r, "first_branch"),
			LastBranch:    d.uint(r, "last_branch"),
			LastCUDAMajor: d.uint(r, "last_cuda_major"),
			Notes:         d.str(r, "notes"),
		}
		a.Source = d.source(r, "architectures", a.Name, refs)
		if a.Name != strings.ToLower(a.Name) {
			d.fail(r, "name", "%q must be lower case", a.Name)
		}
		if _, dup := t.byName[a.Name]; dup {
			d.fail(r, "name", "duplicate architecture %q", a.Name)
		}
		if len(a.CCs) == 0 {
			d.fail(r, "cc", "is empty")
		} else if n := len(t.rows); n > 0 && t.rows[n-1].CCs[len(t.rows[n-1].CCs)-1].Compare(a.CCs[0]) >= 0 {
			d.fail(r, "cc", "rows must be sorted by compute capability, without overlaps")
		}
		if !slices.IsSortedFunc(a.CCs, version.Version.Compare) {
			d.fail(r, "cc", "capabilities must be listed in ascending order")
		}
		t.byName[a.Name] = len(t.rows)
		t.rows = append(t.rows, a)
	}
	return t, d.err
}

type chips struct {
	rows   []Chip
	byName map[string]int
}

var chipTable = loaded(loadChips)

func loadChips() (chips, error) {
	refs, err := sourcesTable()
	if err != nil {
		return chips{}, err
	}
	at, err := archTable()
	if err != nil {
		return chips{}, err
	}
	recs, err := readTable("gpu_chips.tsv", "chip", "arch", "cc", "checked", "source", "unverified")
	if err != nil {
		return chips{}, err
	}
	var d decoder
	t := chips{byName: make(map[string]int, len(recs))}
	for _, r := range recs {
		c := Chip{
			Name:    d.required(r, "chip"),
			Arch:    d.required(r, "arch"),
			CC:      d.requiredVersion(r, "cc"),
			Checked: d.required(r, "checked"),
		}
		c.Source = d.source(r, "gpu_chips", c.Name, refs)
		if i, ok := at.byName[c.Arch]; !ok {
			d.fail(r, "arch", "unknown architecture %q", c.Arch)
		} else if !slices.ContainsFunc(at.rows[i].CCs, c.CC.Equal) {
			d.fail(r, "cc", "%s is not a compute capability of %s", c.CC, at.rows[i].Title)
		}
		if _, dup := t.byName[c.Name]; dup {
			d.fail(r, "chip", "duplicate chip %q", c.Name)
		}
		t.byName[c.Name] = len(t.rows)
		t.rows = append(t.rows, c)
	}
	return t, d.err
}

// Chips returns every GPU chip the tables know, oldest first.
func Chips() []Chip { return slices.Clone(must(chipTable()).rows) }

// ChipByName returns a chip by its base name ("GK110", not "GK110BGL").
func ChipByName(name string) (Chip, bool) {
	t := must(chipTable())
	i, ok := t.byName[name]
	if !ok {
		return Chip{}, false
	}
	return t.rows[i], true
}

type gpus struct {
	rows []GPU
	ids  []uint16 // rows' PCI ids, for a search that copies no rows
}

var gpuTable = loaded(loadGPUs)

func loadGPUs() (gpus, error) {
	refs, err := sourcesTable()
	if err != nil {
		return gpus{}, err
	}
	at, err := archTable()
	if err != nil {
		return gpus{}, err
	}
	ct, err := chipTable()
	if err != nil {
		return gpus{}, err
	}
	recs, err := readTable("gpus.tsv", "pci_id", "model", "chip", "arch", "cc", "open_required", "min_driver", "open_readme", "notes", "source", "unverified")
	if err != nil {
		return gpus{}, err
	}
	var d decoder
	t := gpus{rows: make([]GPU, 0, len(recs))}
	for _, r := range recs {
		id := d.required(r, "pci_id")
		n, err := strconv.ParseUint(id, 16, 16)
		if err != nil || len(id) != 4 || strings.ToUpper(id) != id {
			d.fail(r, "pci_id", "%q is not four upper-case hex digits", id)
		}
		g := GPU{
			PCIID:        uint16(n),
			Model:        d.required(r, "model"),
			Chip:         d.str(r, "chip"),
			Arch:         d.required(r, "arch"),
			CC:           d.requiredVersion(r, "cc"),
			OpenRequired: d.yesNo(r, "open_required"),
			MinDriver:    d.version(r, "min_driver"),
			OpenREADME:   d.version(r, "open_readme"),
			Notes:        d.str(r, "notes"),
		}
		g.Source = d.source(r, "gpus", gpuKey(id), refs)
		if i, ok := at.byName[g.Arch]; !ok {
			d.fail(r, "arch", "unknown architecture %q", g.Arch)
		} else if a := at.rows[i]; !slices.ContainsFunc(a.CCs, g.CC.Equal) {
			d.fail(r, "cc", "%s is not a compute capability of %s", g.CC, a.Title)
		} else if a.Open == OpenRequired && !g.OpenRequired {
			d.fail(r, "open_required", "must be yes: %s requires the open modules", a.Title)
		} else if a.Open == OpenUnsupported && g.OpenRequired {
			d.fail(r, "open_required", "%s does not support the open modules", a.Title)
		}
		if g.Chip != "" {
			if i, ok := ct.byName[g.Chip]; !ok {
				d.fail(r, "chip", "unknown chip %q (see gpu_chips.tsv)", g.Chip)
			} else if c := ct.rows[i]; c.Arch != g.Arch || !c.CC.Equal(g.CC) {
				d.fail(r, "cc", "%s %s disagrees with chip %s (%s %s)", g.Arch, g.CC, c.Name, c.Arch, c.CC)
			}
		}
		if k := len(t.rows); k > 0 && t.rows[k-1].PCIID >= g.PCIID {
			d.fail(r, "pci_id", "rows must be sorted by id without duplicates")
		}
		t.rows = append(t.rows, g)
		t.ids = append(t.ids, g.PCIID)
	}
	return t, d.err
}

// gpuKey is a row's key, "0x2330" for 2330, in one allocation: the table
// has hundreds of rows.
func gpuKey(id string) string {
	b := make([]byte, 0, 2+len(id))
	b = append(b, "0x"...)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}

// Architectures returns every architecture, oldest first.
func Architectures() []Architecture { return slices.Clone(must(archTable()).rows) }

// Arch returns the architecture with the given name, in any case.
func Arch(name string) (Architecture, bool) {
	t := must(archTable())
	i, ok := t.byName[strings.ToLower(name)]
	if !ok {
		return Architecture{}, false
	}
	return t.rows[i], true
}

// ArchForCC returns the architecture of a compute capability. A capability
// the table does not list still maps to an architecture when it is the
// only one with that major version (12.1 is Blackwell).
func ArchForCC(cc version.Version) (Architecture, bool) {
	rows := must(archTable()).rows
	for _, a := range rows {
		if slices.ContainsFunc(a.CCs, mm(cc).Equal) {
			return a, true
		}
	}
	var found []Architecture
	for _, a := range rows {
		if slices.ContainsFunc(a.CCs, func(c version.Version) bool { return c.Major() == cc.Major() }) {
			found = append(found, a)
		}
	}
	if len(found) == 1 {
		return found[0], true
	}
	return Architecture{}, false
}

// GPUs returns every GPU row, by PCI device id.
func GPUs() []GPU { return slices.Clone(must(gpuTable()).rows) }

// GPUByPCIID returns the GPU with the given PCI device id (vendor 0x10de).
func GPUByPCIID(id uint16) (GPU, bool) {
	t := must(gpuTable())
	i, ok := slices.BinarySearch(t.ids, id)
	if !ok {
		return GPU{}, false
	}
	return t.rows[i], true
}

// branchNumber is the branch of a driver version or bare branch ("580").
// The zero Version stands for the newest branch the tables list: what an
// install that names no branch gets.
func branchNumber(driver version.Version) uint64 {
	if driver.IsZero() {
		rows := must(branchesTable()).rows
		return rows[len(rows)-1].Branch
	}
	return driver.Major()
}

// BranchSupportsArch reports whether a driver branch supports an
// architecture, and why not when it does not. driver is a driver version
// or a bare branch ("580"); the zero Version means the newest branch.
func BranchSupportsArch(driver version.Version, arch string) (bool, string) {
	a, ok := Arch(arch)
	if !ok {
		return false, fmt.Sprintf("unknown GPU architecture %q", arch)
	}
	b := branchNumber(driver)
	if a.LastBranch != 0 && b > a.LastBranch {
		return false, fmt.Sprintf("R%d is newer than R%d, the last branch that supports %s GPUs (%s)", b, a.LastBranch, a.Title, a.Source)
	}
	if a.FirstBranch != 0 && b < a.FirstBranch {
		return false, fmt.Sprintf("R%d is older than R%d, the first branch that supports %s GPUs (%s)", b, a.FirstBranch, a.Title, a.Source)
	}
	return true, ""
}

// KernelFlavors returns the kernel-module flavours a driver branch offers
// for an architecture and the one it installs by default. driver is a
// driver version or a bare branch; the zero Version means the newest
// branch. Nothing is allowed when the branch does not support the
// architecture (BranchSupportsArch says why) or the architecture is
// unknown.
func KernelFlavors(arch string, driver version.Version) (allowed []Flavor, def Flavor) {
	a, ok := Arch(arch)
	if !ok {
		return nil, ""
	}
	if ok, _ := BranchSupportsArch(driver, arch); !ok {
		return nil, ""
	}
	return flavors(a.Open, branchNumber(driver))
}

// flavors combines what an architecture accepts with what a branch ships.
func flavors(open OpenModules, branch uint64) ([]Flavor, Flavor) {
	br, ok := branchRow(branch)
	branchOpen := ok && br.OpenModules
	switch {
	case open == OpenRequired && !branchOpen:
		return nil, ""
	case open == OpenRequired:
		return []Flavor{FlavorOpen}, FlavorOpen
	case open == OpenUnsupported || !branchOpen:
		return []Flavor{FlavorProprietary}, FlavorProprietary
	}
	return []Flavor{FlavorOpen, FlavorProprietary}, br.DefaultFlavor
}

// GPUSupportedBy reports whether a driver runs a GPU: the branch supports
// its architecture and the driver is at least the GPU's minimum. driver
// is as for KernelFlavors.
func GPUSupportedBy(g GPU, driver version.Version) (bool, string) {
	if ok, why := BranchSupportsArch(driver, g.Arch); !ok {
		return false, fmt.Sprintf("%s: %s", g.Model, why)
	}
	if driver.IsZero() || g.MinDriver.IsZero() {
		return true, ""
	}
	// A bare branch stands for any of its releases, so only branches
	// compare.
	older := driver.Compare(g.MinDriver) < 0
	if nparts(driver) == 1 {
		older = driver.Major() < g.MinDriver.Major()
	}
	if older {
		return false, fmt.Sprintf("%s needs driver %s or newer (%s)", g.Model, g.MinDriver, g.Source)
	}
	return true, ""
}

// GPUKernelFlavors returns the flavours that serve every GPU of a host at
// once, and the default among them: the branch's default where allowed,
// else the only one left. When none serves them all, reason names the
// GPUs that conflict. driver is as for KernelFlavors.
func GPUKernelFlavors(gpus []GPU, driver version.Version) (allowed []Flavor, def Flavor, reason string) {
	allowed = []Flavor{FlavorOpen, FlavorProprietary}
	needs := map[Flavor]string{}
	for _, g := range gpus {
		a, ok := Arch(g.Arch)
		if !ok {
			return nil, "", fmt.Sprintf("%s: unknown GPU architecture %q", g.Model, g.Arch)
		}
		if ok, why := BranchSupportsArch(driver, g.Arch); !ok {
			return nil, "", fmt.Sprintf("%s: %s", g.Model, why)
		}
		open := a.Open
		if g.OpenRequired {
			open = OpenRequired
		}
		fl, _ := flavors(open, branchNumber(driver))
		if len(fl) == 1 {
			if _, seen := needs[fl[0]]; !seen {
				needs[fl[0]] = g.Model
			}
		}
		if len(fl) == 0 {
			return nil, "", fmt.Sprintf("%s needs the open modules, which R%d does not ship", g.Model, branchNumber(driver))
		}
		allowed = slices.DeleteFunc(allowed, func(f Flavor) bool { return !slices.Contains(fl, f) })
	}
	if len(allowed) == 0 {
		return nil, "", fmt.Sprintf("%s needs the open kernel modules and %s the proprietary ones; no flavour serves both", needs[FlavorOpen], needs[FlavorProprietary])
	}
	if len(allowed) == 1 {
		return allowed, allowed[0], ""
	}
	_, def = flavors(OpenSupported, branchNumber(driver))
	return allowed, def, ""
}
