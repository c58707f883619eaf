package devices

import (
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// ObserveUnit reports the compute modes' boot-time unit: its file's
// digest, when it exists, and whether it is enabled. The device.boot step
// is decided from them.
func ObserveUnit(h *host.Host) facts.Unit {
	u := facts.Unit{Name: BootUnit}
	if _, err := h.Lstat(BootUnitPath); err == nil {
		// "" when the file cannot be read: it then differs from any
		// content the planner wants.
		sum, _ := h.SHA256(BootUnitPath)
		u.File = &facts.FileDigest{Path: BootUnitPath, SHA256: sum}
		if data, err := h.ReadFile(BootUnitPath); err == nil {
			u.ComputeModes = unitComputeModes(string(data))
		}
	}
	_, err := h.Lstat(bootUnitWants)
	u.Enabled = err == nil
	return u
}

// unitComputeModes reads back the modes the unit's command lines set
// (bootUnit writes them); lines it does not recognise are left out.
func unitComputeModes(content string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(content, "\n") {
		args, ok := strings.CutPrefix(l, "ExecStart=/usr/bin/nvidia-smi -i ")
		if !ok {
			continue
		}
		f := strings.Fields(args)
		if len(f) != 3 || f[1] != "-c" || !spec.IsGPUUUID(f[0]) {
			continue
		}
		for mode, smi := range smiComputeMode {
			if smi == f[2] {
				out[f[0]] = mode
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
