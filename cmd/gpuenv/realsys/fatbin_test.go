//go:build realsystem

package realsys

import (
	"strings"
	"testing"
)

// The GPU code a CUDA library carries is read from its .nv_fatbin
// section, here from a library NVIDIA built: Debian's non-free
// libnvjpeg11 (CUDA 11.8), laid out where a PyTorch build keeps
// libtorch_cuda.so. CUDA 11.8 compiles for sm_35 to sm_90 (its
// release notes, docs.nvidia.com/cuda/archive/11.8.0/cuda-toolkit-
// release-notes), and NVIDIA's libraries add PTX for the newest, so a
// reader that walked the containers wrongly would miss or garble these.
func TestFatbinOfNVIDIALibrary(t *testing.T) {
	r := h.NewRoot(t, Base, Mounts{Proc: true, Sys: true})
	r.MustSh(`apt-get install -y --no-install-recommends libnvjpeg11 >/dev/null
d=/usr/lib/python3/dist-packages/torch
mkdir -p $d/lib /usr/lib/python3/dist-packages/torch-2.1.0+cu118.dist-info
cp "$(readlink -f /usr/lib/x86_64-linux-gnu/libnvjpeg.so.11)" $d/lib/libtorch_cuda.so
printf '__version__ = "2.1.0+cu118"\ncuda = "11.8"\ngit_version = "unknown"\n' >$d/version.py
: >$d/__init__.py
printf 'Metadata-Version: 2.1\nName: torch\nVersion: 2.1.0+cu118\n' >/usr/lib/python3/dist-packages/torch-2.1.0+cu118.dist-info/METADATA`)
	obs := r.Observe()
	var archs []string
	for _, env := range obs.Python {
		for _, fw := range env.Frameworks {
			if fw.Name == "pytorch" {
				archs = fw.CUDAArchs
			}
		}
	}
	got := strings.Join(archs, " ")
	for _, want := range []string{"sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_90"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("the build's GPU code read from libnvjpeg's .nv_fatbin: %q, want %s among it", got, want)
		}
	}
	for _, a := range archs {
		if !strings.HasPrefix(a, "sm_") && !strings.HasPrefix(a, "compute_") {
			t.Errorf("%q is no GPU architecture", a)
		}
	}
}
