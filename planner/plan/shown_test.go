package plan

import (
	"fmt"
	"testing"
)

// TestCheckShownDnfEVR: a dnf step shows its main package's version, and
// the driver's other RPMs share only its version part (NVIDIA's
// kmod-nvidia-latest-dkms 3:550.90.07-1.el9 with cuda-drivers
// 550.90.07-1). apt's packages must match the shown version exactly.
func TestCheckShownDnfEVR(t *testing.T) {
	step := func(manager Manager, kmod string) Step {
		return Step{Address: "driver", Action: Create,
			After: map[string]string{"version": "550.90.07-1", "packages": "cuda-drivers, kmod-nvidia-latest-dkms"},
			Operations: []Operation{{Kind: OpPackages, Packages: &PackagesOp{Manager: manager, Install: []PackagePin{
				{Name: "cuda-drivers", Version: "550.90.07-1"}, {Name: "kmod-nvidia-latest-dkms", Version: kmod}}}}}}
	}
	for _, tc := range []struct {
		manager Manager
		kmod    string
		wantErr string
	}{
		{ManagerDnf, "3:550.90.07-1.el9", ""},
		{ManagerDnf, "3:550.54.15-1.el9", "it shows version 550.90.07-1 but installs kmod-nvidia-latest-dkms 3:550.54.15-1.el9"},
		{ManagerApt, "3:550.90.07-1.el9", "it shows version 550.90.07-1 but installs kmod-nvidia-latest-dkms 3:550.90.07-1.el9"},
	} {
		s := step(tc.manager, tc.kmod)
		err := s.checkShown()
		if got := fmt.Sprint(err); tc.wantErr == "" && err != nil || tc.wantErr != "" && got != tc.wantErr {
			t.Errorf("%s %s: %v, want %q", tc.manager, tc.kmod, err, tc.wantErr)
		}
	}
}
