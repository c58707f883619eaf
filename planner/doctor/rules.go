package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// The rules below are the rule book the doctor's checks judge by, exported
// so that observe's problems (providers) and plan's warnings (planner) ask
// the same question the same way instead of restating it. Each is a pure
// function of the observation.

// DriverVersion is the driver version programs on the host get: NVML's
// when it answered, the loaded module's otherwise, and the version
// libnvidia-ml.so.1 leads to when no module runs. A value that does not
// parse as a version is passed over. The second result says where the
// version was read; both are zero when the host shows no driver.
func DriverVersion(obs *facts.Observation) (version.Version, string) {
	for _, c := range []struct{ v, from string }{
		{obs.NVML.DriverVersion, "NVML"},
		{obs.Driver.ModuleVersion, obs.Driver.ModuleVersionFrom},
		{obs.Driver.LibraryVersion, "libnvidia-ml.so.1"},
	} {
		if c.v == "" {
			continue
		}
		if v, err := version.Parse(c.v); err == nil {
			if c.from == "" {
				c.from = "the loaded module"
			}
			return v, c.from
		}
	}
	return version.Version{}, ""
}

// Mismatch is the driver/library version mismatch rule's verdict.
type Mismatch struct {
	// Module is the loaded kernel module's version.
	Module string
	// Library is the user-space version that differs from Module (several
	// versions, comma-separated, when no loader pick says which one);
	// empty when the files show no mismatch.
	Library string
	// NVML is set when NVML itself refused to start with the mismatch.
	NVML bool
}

// InFiles reports whether the observed files show the mismatch.
func (m Mismatch) InFiles() bool { return m.Library != "" }

// Found reports whether either the files or NVML show the mismatch.
func (m Mismatch) Found() bool { return m.InFiles() || m.NVML }

// DriverLibraryMismatch judges whether the loaded nvidia kernel module and
// the driver's user-space libraries differ (usually an upgrade without a
// reboot). The libraries' version is the one libnvidia-ml.so.1 leads to;
// without that link, the installed libnvidia-ml.so.<version> files are
// compared: the module mismatches when none of them is its version.
func DriverLibraryMismatch(obs *facts.Observation) Mismatch {
	d := obs.Driver
	m := Mismatch{Module: d.ModuleVersion, NVML: obs.NVML.Status == "driver_library_mismatch"}
	if d.ModuleVersion == "" {
		return m
	}
	if d.LibraryVersion != "" {
		if d.LibraryVersion != d.ModuleVersion {
			m.Library = d.LibraryVersion
		}
		return m
	}
	var vs []string
	for _, l := range d.Libraries {
		if l.Version == d.ModuleVersion {
			return m
		}
		if l.Version != "" && !slices.Contains(vs, l.Version) {
			vs = append(vs, l.Version)
		}
	}
	m.Library = strings.Join(vs, ", ")
	return m
}

// MismatchFinding is the driver/library version mismatch as observe, plan
// and doctor all report it, in one wording: the files' mismatch with the
// versions they show (doctor's driver.versions), else NVML's refusal to
// start (doctor's nvml.init), each with the module and library versions
// and how to mend it now. ok is false when neither shows a mismatch.
func MismatchFinding(obs *facts.Observation) (f Check, ok bool) {
	return mismatchFinding(obs, false)
}

// mismatchFinding is MismatchFinding; with nvmlFirst, NVML's refusal is
// said even when the files show the versions, as doctor's NVML group
// does before its versions check.
func mismatchFinding(obs *facts.Observation, nvmlFirst bool) (f Check, ok bool) {
	m := DriverLibraryMismatch(obs)
	switch {
	case m.NVML && (nvmlFirst || !m.InFiles()):
		f = Check{ID: "nvml.init", Group: GroupNVML, Status: Problem,
			Summary: "NVML cannot start: driver/library version mismatch (the libraries were upgraded under a loaded module)"}
		if obs.NVML.Error != "" {
			f.Evidence = append(f.Evidence, "NVML: "+obs.NVML.Error)
		}
		f.Evidence = append(f.Evidence, versionEvidence(obs)...)
	case m.InFiles():
		f = Check{ID: "driver.versions", Group: GroupNVML, Status: Problem,
			Summary:  fmt.Sprintf("Driver/library version mismatch: module %s, libraries %s (an upgrade without a reboot)", m.Module, m.Library),
			Evidence: versionEvidence(obs)}
	default:
		return Check{}, false
	}
	f.Fix = mismatchFix(obs)
	return f, true
}

// versionEvidence lists the module and library versions.
func versionEvidence(obs *facts.Observation) []string {
	dr := obs.Driver
	var ev []string
	if dr.ModuleVersion != "" {
		from := dr.ModuleVersionFrom
		if from == "" {
			from = "the loaded module"
		}
		ev = append(ev, fmt.Sprintf("%s: kernel module %s", from, dr.ModuleVersion))
	}
	for _, l := range dr.Libraries {
		ev = append(ev, fmt.Sprintf("%s: library %s", l.Path, l.Version))
	}
	if dr.LibraryVersion != "" {
		ev = append(ev, "libnvidia-ml.so.1 leads to "+dr.LibraryVersion)
	}
	return ev
}

// StaleNouveauBlacklist is the nouveau blacklist file that the running
// kernel's initramfs predates, when the initramfs holds no nouveau
// blacklist at all, so that nouveau still loads from it at boot; nil when
// it holds one (a blacklist file older than it is enough), when nouveau is
// blacklisted on the kernel command line (which needs no initramfs), or
// when the times are unknown. The first such file is returned.
func StaleNouveauBlacklist(obs *facts.Observation) *facts.Blacklist {
	ird := obs.Kernel.Initramfs
	if ird == nil || ird.ModTime.IsZero() {
		return nil
	}
	var newer *facts.Blacklist
	for i, l := range obs.Kernel.Blacklists {
		if l.Module != "nouveau" {
			continue
		}
		switch {
		case l.Directive == "modprobe.blacklist":
			return nil
		case l.ModTime.IsZero() || !l.ModTime.After(ird.ModTime):
			return nil
		case newer == nil:
			newer = &obs.Kernel.Blacklists[i]
		}
	}
	return newer
}

// GPUCount is how many GPUs CUDA could enumerate: NVML's count, or the
// NVIDIA devices on the PCI bus when NVML lists none.
func GPUCount(obs *facts.Observation) int {
	if len(obs.NVML.Devices) > 0 {
		return len(obs.NVML.Devices)
	}
	return len(obs.PCI)
}

// IsDeviceIndex reports whether a CUDA_VISIBLE_DEVICES entry names a GPU
// by index rather than by UUID or MIG identifier.
func IsDeviceIndex(entry string) bool {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return false
	}
	_, err := strconv.ParseUint(entry, 10, 32)
	return err == nil
}

// IndexOrderAmbiguous reports whether CUDA_VISIBLE_DEVICES entries
// (visible) can name a different GPU to CUDA than nvidia-smi's of the same
// index: the host has several GPUs, an entry is an index, and the device
// order (CUDA_DEVICE_ORDER, "" when unset: CUDA's FASTEST_FIRST) is not
// PCI_BUS_ID, the order nvidia-smi numbers them in.
func IndexOrderAmbiguous(gpus int, visible []string, order string) bool {
	return gpus >= 2 && slices.ContainsFunc(visible, IsDeviceIndex) && order != "PCI_BUS_ID"
}

// HasGPU reports whether the host shows an NVIDIA GPU by any route: on
// the PCI bus or listed by NVML.
func HasGPU(obs *facts.Observation) bool {
	return len(obs.PCI) > 0 || len(obs.NVML.Devices) > 0
}

// NouveauLoaded reports whether nouveau runs: a GPU is bound to it, or the
// module is loaded. While it does, the nvidia driver cannot take the GPU.
func NouveauLoaded(obs *facts.Observation) bool {
	return slices.ContainsFunc(obs.Kernel.Loaded, func(m facts.LoadedModule) bool { return m.Name == "nouveau" }) ||
		slices.ContainsFunc(obs.PCI, func(p facts.PCIDevice) bool { return p.Driver == "nouveau" })
}
