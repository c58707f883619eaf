package devaccess

import (
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// TestOrchestratorDrivers: the kubelet's driver from its flag files
// before its configuration file, CRI-O's from its drop-ins after the main
// file, each default where nothing sets it, nothing where neither is
// configured.
func TestOrchestratorDrivers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []facts.CgroupDriver
	}{
		{"no kubelet, no CRI-O", nil, nil},
		{"kubeadm's configuration", map[string]string{
			"/var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nauthentication:\n  anonymous:\n    enabled: false\n",
		}, []facts.CgroupDriver{{Engine: "kubelet", Driver: "systemd", File: "/var/lib/kubelet/config.yaml"}}},
		{"configuration without the key", map[string]string{
			"/var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n",
		}, []facts.CgroupDriver{{Engine: "kubelet", Driver: "cgroupfs", Default: true, File: "/var/lib/kubelet/config.yaml"}}},
		{"a flag in the unit overrides the file", map[string]string{
			"/var/lib/kubelet/config.yaml":        "cgroupDriver: cgroupfs\n",
			"/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/local/bin/kubelet \\\n  --kubelet-cgroups=/systemd/system.slice \\\n  --cgroup-driver=systemd \\\n  --v=2\n",
		}, []facts.CgroupDriver{{Engine: "kubelet", Driver: "systemd", File: "/etc/systemd/system/kubelet.service"}}},
		{"--config names another file", map[string]string{
			"/etc/systemd/system/kubelet.service.d/10-args.conf": "[Service]\nEnvironment=\"KUBELET_ARGS=--config /etc/kubernetes/kubelet/config.yaml\"\n",
			"/etc/kubernetes/kubelet/config.yaml":                "cgroupDriver: \"systemd\"\n",
		}, []facts.CgroupDriver{{Engine: "kubelet", Driver: "systemd", File: "/etc/kubernetes/kubelet/config.yaml"}}},
		{"CRI-O's default", map[string]string{
			"/etc/crio/crio.conf.d/99-nvidia.toml": "[crio.runtime.runtimes.nvidia]\nruntime_path = \"/usr/bin/nvidia-container-runtime\"\n",
		}, []facts.CgroupDriver{{Engine: "cri-o", Driver: "systemd", Default: true, File: "/etc/crio/crio.conf.d/99-nvidia.toml"}}},
		{"a CRI-O drop-in sets cgroupfs", map[string]string{
			"/etc/crio/crio.conf":                  "[crio.runtime]\ncgroup_manager = \"systemd\"\n",
			"/etc/crio/crio.conf.d/02-cgroup.conf": "[crio.runtime]\n# cgroup_manager = \"systemd\"\ncgroup_manager = \"cgroupfs\" # for the old kubelet\n",
		}, []facts.CgroupDriver{{Engine: "cri-o", Driver: "cgroupfs", File: "/etc/crio/crio.conf.d/02-cgroup.conf"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tc.files {
				hosttest.WriteFile(t, root, p, c)
			}
			h := hosttest.New(t, root)
			got := Observe(h, &facts.Observation{}).CgroupDrivers
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("got %+v, want %+v", got[i], tc.want[i])
				}
			}
		})
	}
}
