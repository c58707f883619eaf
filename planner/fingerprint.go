package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

// A fingerprint covers the sections of an observation that a plan's steps
// were computed from, with what changes by the minute (memory in use,
// running processes, module reference counts, the size of the package
// database) left out: a plan made an hour ago is still right when only
// those moved, and stale when anything it decided from did.

// Fact sections a fingerprint can cover.
const (
	FactsOS          = "os"
	FactsKernel      = "kernel"
	FactsPCI         = "pci"
	FactsNVML        = "nvml"
	FactsDriver      = "driver"
	FactsDevices     = "devices" // NVML device settings
	FactsDeviceNodes = "device_nodes"
	FactsPackages    = "packages"
	FactsRepos       = "repositories"
	// FactsRepoFiles are gpuenv's own package-source files and the
	// keyrings, by digest.
	FactsRepoFiles   = "repository_files"
	FactsCUDA        = "cuda"
	FactsCuDNN       = "cudnn"
	FactsPython      = "python"
	FactsGroups      = "groups"
	FactsEnvironment = "environment"
	// FactsInit is process 1 of the root: whether systemd is there to
	// reload a unit or start a service now.
	FactsInit = "init"
	// FactsUnits are the systemd units gpuenv manages: their enablement,
	// and the digest of a unit file gpuenv writes.
	FactsUnits = "units"
	// FactsIndexes are the package indexes on disk, by identity, with the
	// pins and priorities that apply to them: the versions a step
	// installs were chosen from them.
	FactsIndexes = "package_indexes"
	// FactsContainers are the container toolkit, the engines'
	// configuration files and the CDI specs, by digest.
	FactsContainers = "containers"
)

// allSections is every section, in the order digests are listed.
var allSections = []string{
	FactsOS, FactsKernel, FactsPCI, FactsNVML, FactsDriver, FactsDevices, FactsDeviceNodes,
	FactsPackages, FactsRepos, FactsRepoFiles, FactsCUDA, FactsCuDNN, FactsPython, FactsGroups, FactsEnvironment, FactsInit,
	FactsUnits, FactsIndexes, FactsContainers,
}

// Sections lists the sections a step's resource is decided from, as its
// kind describes them: every section for an address of no kind known.
func (k *Kinds) Sections(address string) []string {
	if sk, ok := k.find(address); ok {
		return sk.Sections
	}
	return allSections
}

// Digest returns the hex sha256 of content, as the observation writes the
// digest of a file's bytes (facts.FileDigest): a planner compares it with
// the bytes a file must hold.
func Digest(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// FactsDigest is a fingerprint of the facts a plan depends on.
type FactsDigest struct {
	// Algorithm is "sha256".
	Algorithm string `json:"algorithm"`
	// Digest covers every section digest, in order.
	Digest string `json:"digest"`
	// Sections lets a stale plan say what changed.
	Sections []SectionDigest `json:"sections"`
}

// SectionDigest is the digest of one section of the facts.
type SectionDigest struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// stepSections lists the sections a step depends on: its resource's, and
// the package sources (the keyrings that sign them, and the indexes
// fetched from them) when it installs or removes with apt or dnf, whose
// candidate versions (and what a transaction pulls in with them) come
// from the sources enabled when the plan was made.
func stepSections(s *plan.Step, kinds *Kinds) []string {
	secs := kinds.Sections(s.Address)
	for _, op := range s.Operations {
		if op.Packages != nil && plan.Manager(op.Packages.Manager) != plan.ManagerPip {
			for _, sec := range []string{FactsRepos, FactsRepoFiles, FactsIndexes} {
				if !slices.Contains(secs, sec) {
					secs = append(slices.Clone(secs), sec)
				}
			}
		}
	}
	return secs
}

// Fingerprint digests the sections of obs that p's steps depend on. A plan
// without steps depends on every section: it says the host matches the
// spec, which any change to the host can make untrue.
func Fingerprint(p *plan.Plan, obs *facts.Observation, kinds *Kinds) FactsDigest {
	need := map[string]bool{}
	for i := range p.Steps {
		for _, sec := range stepSections(&p.Steps[i], kinds) {
			need[sec] = true
		}
	}
	var names []string
	for _, sec := range allSections {
		if len(p.Steps) == 0 || need[sec] {
			names = append(names, sec)
		}
	}
	return digestSections(names, obs)
}

func digestSections(names []string, obs *facts.Observation) FactsDigest {
	d := FactsDigest{Algorithm: "sha256"}
	all := sha256.New()
	for _, name := range names {
		b, err := json.Marshal(section(name, obs))
		if err != nil {
			// The facts are plain data, which always encodes.
			panic("encoding facts: " + err.Error())
		}
		sum := sha256.Sum256(b)
		hexSum := hex.EncodeToString(sum[:])
		d.Sections = append(d.Sections, SectionDigest{Name: name, Digest: hexSum})
		all.Write([]byte(name + "=" + hexSum + "\n"))
	}
	d.Digest = hex.EncodeToString(all.Sum(nil))
	return d
}

// section returns the part of obs a section covers, without the values
// that change while nothing relevant does.
func section(name string, obs *facts.Observation) any {
	switch name {
	case FactsOS:
		return obs.OS
	case FactsKernel:
		k := obs.Kernel
		k.Loaded = slices.Clone(k.Loaded)
		for i := range k.Loaded {
			// Reference counts and users follow the processes; the
			// module itself is what matters.
			k.Loaded[i] = facts.LoadedModule{Name: k.Loaded[i].Name, Taints: k.Loaded[i].Taints}
		}
		// So do the processes holding the modules: a reload they stop
		// fails at apply, and is reverted.
		k.Holders = nil
		return k
	case FactsPCI:
		return obs.PCI
	case FactsNVML:
		n := obs.NVML
		n.Devices = nil
		return n
	case FactsDriver:
		return obs.Driver
	case FactsDevices:
		devs := make([]facts.GPUDevice, len(obs.NVML.Devices))
		for i, d := range obs.NVML.Devices {
			d.MemoryUsed = 0
			d.Processes = nil
			// The processes on MIG instances come and go as those on
			// the GPU do; an instance one holds is refused at apply.
			d.GPUInstances = slices.Clone(d.GPUInstances)
			for j, g := range d.GPUInstances {
				g.Compute = slices.Clone(g.Compute)
				for k := range g.Compute {
					g.Compute[k].Processes = nil
				}
				d.GPUInstances[j] = g
			}
			devs[i] = d
		}
		return devs
	case FactsDeviceNodes:
		return obs.DeviceNodes
	case FactsPackages:
		p := obs.Packages
		p.Total = 0
		return p
	case FactsRepos:
		return obs.Repositories
	case FactsRepoFiles:
		return obs.RepositoryFiles
	case FactsCUDA:
		return obs.CUDA
	case FactsCuDNN:
		return obs.CuDNN
	case FactsPython:
		return obs.Python
	case FactsGroups:
		return obs.Groups
	case FactsEnvironment:
		return obs.Environment
	case FactsInit:
		return obs.Init
	case FactsUnits:
		return obs.Units
	case FactsContainers:
		return obs.Containers
	case FactsIndexes:
		// The sources without an index are the repositories section's
		// business; this one covers the indexes a plan chose from.
		ix := obs.PackageIndexes
		ix.Missing = nil
		return ix
	}
	return nil
}

// Changed lists the sections whose digests differ between d and now, or
// that only one of them has.
func (d FactsDigest) Changed(now FactsDigest) []string {
	old := map[string]string{}
	for _, s := range d.Sections {
		old[s.Name] = s.Digest
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range now.Sections {
		seen[s.Name] = true
		if old[s.Name] != s.Digest {
			out = append(out, s.Name)
		}
	}
	for _, s := range d.Sections {
		if !seen[s.Name] {
			out = append(out, s.Name)
		}
	}
	return out
}
