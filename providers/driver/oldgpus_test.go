package driver_test

import (
	"testing"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// Without NVML, a GPU is named from its PCI id alone: GPUs of every year
// from Kepler on get their name, architecture and compute capability.
func TestOldGPUsNamedFromPCIIDs(t *testing.T) {
	for _, tc := range []struct {
		id, model, arch, cc string
	}{
		{"1024", "Tesla K40c", "Kepler", "3.5"},
		{"102D", "Tesla K80", "Kepler", "3.7"},
		{"1180", "GeForce GTX 680", "Kepler", "3.0"},
		{"1287", "GeForce GT 730", "Kepler", "3.5"},
		{"1380", "GeForce GTX 750 Ti", "Maxwell", "5.0"},
		{"17FD", "Tesla M40", "Maxwell", "5.2"},
		{"1B38", "Tesla P40", "Pascal", "6.1"},
		{"1DB4", "Tesla V100 PCIe 16GB", "Volta", "7.0"},
		{"2182", "GeForce GTX 1660 Ti", "Turing", "7.5"},
		{"25B6", "A2 / A16", "Ampere", "8.6"},
	} {
		root := build(t, "tensorflow-no-cudnn", func(root string) {
			hosttest.WriteFile(t, root, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/uevent",
				"DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:"+tc.id+"\nPCI_SUBSYS_ID=10DE:0000\nPCI_SLOT_NAME=0000:01:00.0\n")
		})
		obs := observe(t, root, nil)
		if len(obs.PCI) == 0 {
			t.Fatalf("10de:%s: no GPU observed", tc.id)
		}
		g := obs.PCI[0]
		if g.Model != tc.model || g.Architecture != tc.arch || g.ComputeCapability != tc.cc {
			t.Errorf("10de:%s = %q, %q, %q; want %q, %q, %q", tc.id, g.Model, g.Architecture, g.ComputeCapability, tc.model, tc.arch, tc.cc)
		}
	}
}
