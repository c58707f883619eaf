package devaccess

import (
	"path"
	"sort"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files read for the cgroup drivers of Kubernetes' node agent and of
// CRI-O, which no engine configuration of the containers observer holds.
// On a node, the kubelet and its runtime must agree on the driver, so
// either one naming systemd means systemd holds the pods' device rules.
const (
	// KubeletConfig is kubeadm's KubeletConfiguration; its cgroupDriver
	// is "cgroupfs" when unset (KubeletConfiguration v1beta1).
	KubeletConfig = "/var/lib/kubelet/config.yaml"
	// CRIOConfig and CRIOConfigDir hold CRI-O's cgroup_manager, the
	// drop-ins read after the main file in name order, the last one
	// setting it winning; unset, CRI-O uses "systemd" (crio.conf(5)).
	CRIOConfig    = "/etc/crio/crio.conf"
	CRIOConfigDir = "/etc/crio/crio.conf.d"
	configLimit   = 256 << 10
)

// kubeletFlagFiles are where the kubelet's command line is written: its
// unit and drop-ins, and the environment files kubeadm and the
// distribution packages have it read. A --cgroup-driver flag there
// overrides the configuration file; --config names another one.
var kubeletFlagFiles = []string{
	"/lib/systemd/system/kubelet.service",
	"/usr/lib/systemd/system/kubelet.service",
	"/etc/systemd/system/kubelet.service",
	"/etc/systemd/system/kubelet.service.d/*.conf",
	"/usr/lib/systemd/system/kubelet.service.d/*.conf",
	"/var/lib/kubelet/kubeadm-flags.env",
	"/etc/default/kubelet",
	"/etc/sysconfig/kubelet",
}

// kubeletDriver reads the kubelet's cgroup driver: the last
// --cgroup-driver flag of its command-line files, else cgroupDriver of
// its configuration file. ok is false where no kubelet is configured.
func kubeletDriver(h *host.Host) (facts.CgroupDriver, bool) {
	d := facts.CgroupDriver{Engine: "kubelet"}
	config := KubeletConfig
	for _, pattern := range kubeletFlagFiles {
		files, _ := h.Glob(pattern)
		sort.Strings(files)
		for _, f := range files {
			data, err := h.ReadFileLimit(f, configLimit)
			if err != nil {
				continue
			}
			if v := flagValue(string(data), "--cgroup-driver"); v != "" {
				d.Driver, d.File = v, f
			}
			if v := flagValue(string(data), "--config"); v != "" && path.IsAbs(v) {
				config = v
			}
		}
	}
	if d.Driver != "" {
		return d, true
	}
	data, err := h.ReadFileLimit(config, configLimit)
	if err != nil {
		return d, false
	}
	d.File = config
	for _, l := range strings.Split(string(data), "\n") {
		// A top-level key: the driver is not nested in the document.
		if v, ok := strings.CutPrefix(l, "cgroupDriver:"); ok {
			d.Driver = unquote(v)
		}
	}
	if d.Driver == "" {
		d.Driver, d.Default = "cgroupfs", true
	}
	return d, true
}

// flagValue is the value of the last --name=value or --name value in
// text ("" when absent).
func flagValue(text, name string) string {
	var v string
	// Quotes and line continuations are not part of a value; "=--"
	// starts a flag inside an environment assignment (ARGS=--config …).
	fields := strings.Fields(strings.NewReplacer(`\`, " ", `"`, " ", `'`, " ", "=--", "= --").Replace(text))
	for i, f := range fields {
		switch {
		case strings.HasPrefix(f, name+"="):
			v = strings.TrimPrefix(f, name+"=")
		case f == name && i+1 < len(fields):
			v = fields[i+1]
		}
	}
	return v
}

// crioDriver reads CRI-O's cgroup_manager from its configuration files.
// ok is false where CRI-O has none.
func crioDriver(h *host.Host) (facts.CgroupDriver, bool) {
	d := facts.CgroupDriver{Engine: "cri-o"}
	files := []string{CRIOConfig}
	if entries, err := h.ReadDir(CRIOConfigDir); err == nil {
		for _, e := range entries {
			if !e.IsDir() {
				files = append(files, path.Join(CRIOConfigDir, e.Name()))
			}
		}
	}
	found := false
	for _, f := range files {
		data, err := h.ReadFileLimit(f, configLimit)
		if err != nil {
			continue
		}
		if !found {
			d.File = f
		}
		found = true
		for _, l := range strings.Split(string(data), "\n") {
			l, _, _ = strings.Cut(l, "#")
			k, v, ok := strings.Cut(l, "=")
			if ok && strings.TrimSpace(k) == "cgroup_manager" {
				d.Driver, d.File = unquote(v), f
			}
		}
	}
	if !found {
		return d, false
	}
	if d.Driver == "" {
		d.Driver, d.Default = "systemd", true
	}
	return d, true
}

func unquote(s string) string {
	s, _, _ = strings.Cut(s, "#")
	return strings.Trim(strings.TrimSpace(s), `"'`)
}
