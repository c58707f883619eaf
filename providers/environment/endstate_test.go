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
	if diff := cmp.Diff(env.Variables, Written(env, ManagedLdSoConf, []byte("/usr/local/cuda/lib64\n"), false).Variables); diff != "" {
		t.Errorf("the loader's file changed the variables (-want +got):\n%s", diff)
	}
}

// A file of /etc/ld.so.conf.d takes its place among the loader's paths
// in the name order ldconfig's include reads them in, before what
// /etc/ld.so.conf names after the include; writing it again replaces its
// directories, removing it drops them.
func TestWrittenLoaderConf(t *testing.T) {
	env := facts.Environment{LoaderPaths: []facts.LoaderPath{
		{Dir: "/usr/local/lib", File: LdSoConfDir + "/libc.conf"},
		{Dir: "/usr/lib/x86_64-linux-gnu", File: LdSoConfDir + "/x86_64-linux-gnu.conf"},
		{Dir: "/opt/site/lib", File: LdSoConf},
	}}
	got := Written(env, LdSoConfDir+"/000_cuda.conf", []byte("/usr/local/cuda/targets/x86_64-linux/lib\n"), false)
	got = Written(got, ManagedLdSoConf, []byte("# gpuenv\n/usr/local/cuda-12.4/targets/x86_64-linux/lib\n"), false)
	got = Written(got, LdSoConfDir+"/zz.conf", []byte("/a:/b, /c\n"), false)
	want := []facts.LoaderPath{
		{Dir: "/usr/local/cuda/targets/x86_64-linux/lib", File: LdSoConfDir + "/000_cuda.conf"},
		{Dir: "/usr/local/cuda-12.4/targets/x86_64-linux/lib", File: ManagedLdSoConf},
		{Dir: "/usr/local/lib", File: LdSoConfDir + "/libc.conf"},
		{Dir: "/usr/lib/x86_64-linux-gnu", File: LdSoConfDir + "/x86_64-linux-gnu.conf"},
		{Dir: "/a", File: LdSoConfDir + "/zz.conf"},
		{Dir: "/b", File: LdSoConfDir + "/zz.conf"},
		{Dir: "/c", File: LdSoConfDir + "/zz.conf"},
		{Dir: "/opt/site/lib", File: LdSoConf},
	}
	if diff := cmp.Diff(want, got.LoaderPaths); diff != "" {
		t.Errorf("loader paths after the writes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ManagedLdSoConf}, got.Managed); diff != "" {
		t.Errorf("managed files (-want +got):\n%s", diff)
	}
	got = Written(got, ManagedLdSoConf, nil, true)
	got = Written(got, LdSoConfDir+"/zz.conf", []byte("/d\n"), false)
	if n := len(got.LoaderPaths); n != 5 || got.LoaderPaths[1].Dir != "/usr/local/lib" || got.LoaderPaths[3].Dir != "/d" || len(got.Managed) != 0 {
		t.Errorf("after removing gpuenv's file and rewriting zz.conf: %+v, managed %v", got.LoaderPaths, got.Managed)
	}
	if len(env.LoaderPaths) != 3 {
		t.Errorf("Written changed its argument: %+v", env.LoaderPaths)
	}
}
