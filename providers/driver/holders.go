package driver

import (
	"bytes"
	"encoding/pem"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/reload"
)

// Files the reload facts are read from, inside the root.
const (
	ProcDir  = "/proc"
	DRMClass = "/sys/class/drm"
	// MOKLists hold the certificates the firmware's shim trusts: the
	// kernel's copy of the MOK list, and the EFI variable itself (four
	// bytes of attributes, then the same signature lists).
	MOKListRT    = "/sys/firmware/efi/mok-variables/MokListRT"
	MOKListRTVar = "/sys/firmware/efi/efivars/MokListRT-605dab50-e046-4300-abb6-3dd810dd8b23"
)

// DKMSKeys are where DKMS keeps the certificate of the key it signs
// modules with: DKMS 3's own, and Ubuntu's shim-signed one.
var DKMSKeys = []string{"/var/lib/dkms/mok.pub", "/var/lib/shim-signed/mok/MOK.der"}

// holders lists the processes holding the nvidia modules and the GPU
// services' daemons, while the nvidia module is loaded: they are what a
// module reload must stop, or what forbids one.
func (o *observer) holders() {
	if !o.loaded("nvidia") && !o.loaded("nvidia_current") || !o.devicesOpen() {
		return
	}
	drm := o.nvidiaDRMNodes()
	entries, err := o.h.ReadDir(ProcDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := path.Join(ProcDir, e.Name())
		comm, ok := o.read(dir + "/comm")
		if !ok {
			continue
		}
		h := facts.Holder{PID: pid, Command: strings.TrimSpace(string(comm))}
		h.Unit = reload.UnitOf(h.Command)
		fds, _ := o.h.ReadDir(dir + "/fd")
		for _, fd := range fds {
			// A process this user may not look into has an fd
			// directory it cannot list: it is left out, as the fact
			// says.
			target, err := o.h.Readlink(path.Join(dir, "fd", fd.Name()))
			if err != nil {
				continue
			}
			mod := deviceModule(target, drm)
			if mod == "" || slices.Contains(h.Devices, target) {
				continue
			}
			h.Devices = append(h.Devices, target)
			// The module named is the one most in the way: its
			// users go before the modules it uses.
			if moduleRank(mod) > moduleRank(h.Module) {
				h.Module = mod
			}
		}
		if len(h.Devices) > 0 || h.Unit != "" {
			slices.Sort(h.Devices)
			o.obs.Kernel.Holders = append(o.obs.Kernel.Holders, h)
		}
	}
	slices.SortFunc(o.obs.Kernel.Holders, func(a, b facts.Holder) int { return a.PID - b.PID })
}

// devicesOpen reports whether anything holds an nvidia module other than
// the modules using it: each open device counts in its module's reference
// count. Where nothing does, no process can be holding a device, and the
// scan of every process's descriptors is spared.
func (o *observer) devicesOpen() bool {
	for _, m := range o.obs.Kernel.Loaded {
		if strings.HasPrefix(m.Name, "nvidia") && m.RefCount > len(m.UsedBy) {
			return true
		}
	}
	return false
}

// nvidiaDRMNodes are the /dev/dri nodes whose device nvidia drives: a
// display server holding one holds nvidia_drm.
func (o *observer) nvidiaDRMNodes() map[string]bool {
	out := map[string]bool{}
	entries, err := o.h.ReadDir(DRMClass)
	if err != nil {
		return out
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "card") && !strings.HasPrefix(n, "renderD") || strings.Contains(n, "-") {
			continue
		}
		if t, err := o.h.Readlink(path.Join(DRMClass, n, "device", "driver")); err == nil && path.Base(t) == "nvidia" {
			out[path.Join(DevDir, "dri", n)] = true
		}
	}
	return out
}

// deviceModule is the nvidia module an open device node belongs to; ""
// for a file that is none of theirs.
func deviceModule(target string, drm map[string]bool) string {
	switch {
	case drm[target]:
		return "nvidia_drm"
	case strings.HasPrefix(target, "/dev/nvidia-uvm"):
		return "nvidia_uvm"
	case target == "/dev/nvidia-modeset":
		return "nvidia_modeset"
	case strings.HasPrefix(target, "/dev/nvidia"):
		return "nvidia"
	}
	return ""
}

func moduleRank(m string) int {
	return map[string]int{"nvidia": 1, "nvidia_modeset": 2, "nvidia_uvm": 3, "nvidia_drm": 4}[m]
}

// signingKey tells, with Secure Boot on, whether DKMS's signing key is
// in the MOK list: only then does the kernel load a module DKMS builds.
func (o *observer) signingKey() {
	if o.obs.Kernel.SecureBoot != "enabled" {
		return
	}
	var cert []byte
	for _, p := range DKMSKeys {
		if data, ok := o.read(p); ok {
			cert = data
			break
		}
	}
	if b, _ := pem.Decode(cert); b != nil {
		cert = b.Bytes
	}
	if len(cert) == 0 {
		return
	}
	list, ok := o.read(MOKListRT)
	if !ok {
		if list, ok = o.read(MOKListRTVar); !ok {
			return
		}
	}
	// The list is EFI signature lists of X.509 certificates, each
	// written whole: an enrolled key's certificate appears byte for
	// byte.
	o.obs.Kernel.SigningKey = "not_enrolled"
	if bytes.Contains(list, cert) {
		o.obs.Kernel.SigningKey = "enrolled"
	}
}
