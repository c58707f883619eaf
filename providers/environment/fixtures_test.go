package environment

import (
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestFixtures(t *testing.T) {
	ubuntuPath := facts.Assignment{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin", File: "/etc/environment", Line: 1}
	cudaLoader := []facts.LoaderPath{
		{Dir: "/usr/local/cuda/targets/x86_64-linux/lib", File: "/etc/ld.so.conf.d/000_cuda.conf"},
		{Dir: "/usr/local/cuda-12/targets/x86_64-linux/lib", File: "/etc/ld.so.conf.d/988_cuda-12.conf"},
	}
	ubuntuLoader := []facts.LoaderPath{
		{Dir: "/usr/local/lib", File: "/etc/ld.so.conf.d/libc.conf"},
		{Dir: "/usr/local/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
		{Dir: "/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
		{Dir: "/usr/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
	}
	hosttest.ObserveFixtures(t, map[string]facts.Environment{
		"ubuntu2204-h100-fresh": {Variables: []facts.Assignment{ubuntuPath}, LoaderPaths: ubuntuLoader},
		"ubuntu2204-working": {
			Variables: []facts.Assignment{ubuntuPath,
				{Name: "PATH", Value: "/usr/local/cuda-12.4/bin${PATH:+:${PATH}}", File: "/etc/profile.d/cuda-12.4.sh", Line: 2}},
			LoaderPaths: append(append([]facts.LoaderPath{}, cudaLoader...), ubuntuLoader...),
		},
		"tensorflow-no-cudnn": {
			Variables: []facts.Assignment{ubuntuPath,
				{Name: "PATH", Value: "/usr/local/cuda/bin${PATH:+:${PATH}}", File: "/etc/profile.d/cuda.sh", Line: 1},
				{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}", File: "/etc/profile.d/cuda.sh", Line: 2}},
			LoaderPaths: append(append([]facts.LoaderPath{}, cudaLoader...), ubuntuLoader...),
		},
		// RHEL's ld.so.conf includes its directory by a relative pattern;
		// its profile script calls pathmunge, which is not an assignment.
		"rhel9": {
			Variables: []facts.Assignment{},
			LoaderPaths: append(append([]facts.LoaderPath{}, cudaLoader...),
				facts.LoaderPath{Dir: "/usr/lib64/dyninst", File: "/etc/ld.so.conf.d/dyninst-x86_64.conf"}),
		},
	}, func(_ string, h *host.Host) (facts.Environment, []facts.Warning) {
		return Observe(h)
	})
}
