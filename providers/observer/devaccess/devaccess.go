// Package devaccess observes what keeps a container's access to the GPUs
// after it started. With the systemd cgroup driver, systemd holds each
// container's device rules; whenever it rewrites them (systemctl
// daemon-reload is enough) it names each device by its /dev/char/
// MAJOR:MINOR link, and the NVIDIA device nodes have none unless
// something made them: the rule is lost and the container's programs get
// "Failed to initialize NVML: Unknown Error" (NVIDIA/nvidia-container-
// toolkit#48). Inside such a container, cgroup v1's devices.list shows
// the loss; cgroup v2 keeps the rules in an eBPF program that cannot be
// read back.
package devaccess

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files read.
const (
	CharDir          = "/dev/char"
	CgroupV2Marker   = "/sys/fs/cgroup/cgroup.controllers"
	CgroupV1Devices  = "/sys/fs/cgroup/devices"
	DevicesList      = "/sys/fs/cgroup/devices/devices.list"
	devicesListLimit = 64 << 10
)

// Observe reads the device access facts of h; obs must hold the device
// nodes and the engines' configuration.
func Observe(h *host.Host, obs *facts.Observation) facts.DeviceAccess {
	out := facts.DeviceAccess{CharLinks: []string{}, MissingCharLinks: []string{}, CgroupDrivers: []facts.CgroupDriver{}}
	for _, n := range obs.DeviceNodes {
		if !n.Char || !NeedsCharLink(n.Path) {
			continue
		}
		link := CharLink(n)
		if _, err := h.Lstat(link); err == nil {
			out.CharLinks = append(out.CharLinks, link)
		} else {
			out.MissingCharLinks = append(out.MissingCharLinks, n.Path)
		}
	}
	switch {
	case exists(h, CgroupV2Marker):
		out.CgroupVersion = "v2"
	case exists(h, CgroupV1Devices):
		out.CgroupVersion = "v1"
	}
	for _, e := range obs.Containers.Engines {
		if !e.Exists {
			continue
		}
		if d, ok := cgroupDriver(e, out.CgroupVersion); ok {
			out.CgroupDrivers = append(out.CgroupDrivers, d)
		}
	}
	if d, ok := kubeletDriver(h); ok {
		out.CgroupDrivers = append(out.CgroupDrivers, d)
	}
	if d, ok := crioDriver(h); ok {
		out.CgroupDrivers = append(out.CgroupDrivers, d)
	}
	if out.CgroupVersion == "v1" {
		if data, err := h.ReadFileLimit(DevicesList, devicesListLimit); err == nil {
			out.DeviceRulesFile = DevicesList
			out.DeviceRules = []string{}
			for _, l := range strings.Split(string(data), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					out.DeviceRules = append(out.DeviceRules, l)
				}
			}
		}
	}
	return out
}

// NeedsCharLink reports whether device node p is one containers are
// given, and so needs its /dev/char link: every /dev/nvidia* node but
// those the container toolkit leaves out of its links as no container
// gets them (GPUDirect Storage's nvidia-fs*, the NVSwitches' and NVLinks'
// nodes, which only Fabric Manager opens; nvidia-ctk system
// create-dev-char-symlinks, NVIDIA/nvidia-container-toolkit).
func NeedsCharLink(p string) bool {
	if !strings.HasPrefix(p, "/dev/nvidia") {
		return false
	}
	base := path.Base(p)
	for _, skip := range []string{"nvidia-fs", "nvidia-nvswitch", "nvidia-nvlink"} {
		if strings.HasPrefix(base, skip) {
			return false
		}
	}
	return true
}

// CharLink is node n's link, /dev/char/MAJOR:MINOR, as runc looks it up.
func CharLink(n facts.DeviceNode) string {
	return path.Join(CharDir, fmt.Sprintf("%d:%d", n.Major, n.Minor))
}

func exists(h *host.Host, p string) bool {
	_, err := h.Lstat(p)
	return err == nil
}

// cgroupDriver reads an engine's cgroup driver from its configuration:
// Docker's exec-opts native.cgroupdriver (by default systemd under cgroup
// v2 since Docker 20.10, cgroupfs under v1), containerd's runc option
// SystemdCgroup (false unless set). CRI-O's and the kubelet's are read
// from their own files (orchestrator.go).
func cgroupDriver(e facts.EngineConfig, cgroupVersion string) (facts.CgroupDriver, bool) {
	d := facts.CgroupDriver{Engine: e.Engine, File: e.Path}
	switch e.Engine {
	case "docker":
		var cfg struct {
			ExecOpts []string `json:"exec-opts"`
		}
		_ = json.Unmarshal([]byte(e.Content), &cfg)
		for _, o := range cfg.ExecOpts {
			if v, ok := strings.CutPrefix(strings.TrimSpace(o), "native.cgroupdriver="); ok {
				d.Driver = strings.TrimSpace(v)
			}
		}
		if d.Driver == "" {
			d.Default = true
			d.Driver = "cgroupfs"
			if cgroupVersion == "v2" {
				d.Driver = "systemd"
			}
		}
		return d, true
	case "containerd":
		d.Driver = "cgroupfs"
		d.Default = true
		for _, l := range strings.Split(e.Content, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
			if !ok || strings.TrimSpace(k) != "SystemdCgroup" {
				continue
			}
			d.Default = false
			if strings.TrimSpace(v) == "true" {
				d.Driver = "systemd"
			}
		}
		return d, true
	}
	return d, false
}
