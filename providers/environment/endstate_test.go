package environment

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// A file gpuenv writes takes the place Observe reads it in, so that the
// last setting of a variable is the one the system ends with: the spec's
// profile script after /etc/environment, before systemd's files.
func TestWritten(t *testing.T) {
	env := facts.Environment{Variables: []facts.Assignment{
		{Name: "CUDA_DEVICE_ORDER", Value: "FASTEST_FIRST", File: EnvironmentPath, Line: 3},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "9", File: ManagedProfile, Line: 2},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "1", File: ProfileDir + "/z-site.sh", Line: 1},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "9", File: ManagedSystemd, Line: 3},
	}, Managed: []string{ManagedProfile, ManagedSystemd}}
	got := Written(env, ManagedProfile, []byte("# Written by gpuenv\nexport CUDA_VISIBLE_DEVICES='0,1'\nexport CUDA_DEVICE_ORDER='PCI_BUS_ID'\n"), false)
	got = Written(got, ManagedSystemd, nil, true)
	want := facts.Environment{Variables: []facts.Assignment{
		{Name: "CUDA_DEVICE_ORDER", Value: "FASTEST_FIRST", File: EnvironmentPath, Line: 3},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1", File: ManagedProfile, Line: 2},
		{Name: "CUDA_DEVICE_ORDER", Value: "PCI_BUS_ID", File: ManagedProfile, Line: 3},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "1", File: ProfileDir + "/z-site.sh", Line: 1},
	}, Managed: []string{ManagedProfile}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("environment after the writes (-want +got):\n%s", diff)
	}
	if len(env.Variables) != 4 || env.Variables[1].Value != "9" || len(env.Managed) != 2 {
		t.Errorf("Written changed its argument: %+v", env)
	}
	// A file no variable is read from leaves them be.
	if diff := cmp.Diff(env, Written(env, ManagedLdSoConf, []byte("/usr/local/cuda/lib64\n"), false)); diff != "" {
		t.Errorf("the loader's file changed the variables (-want +got):\n%s", diff)
	}
}
