package apply

import (
	"reflect"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Paragraphs shaped like apt-cache show's for Debian 12's nvidia-smi: exact
// relations to its driver siblings, a range, an alternative, a continuation
// line, and a second paragraph for another version.
const nvidiaSMIShow = `Package: nvidia-smi
Version: 535.261.03-1
Installed-Size: 1287
Maintainer: Debian NVIDIA Maintainers <pkg-nvidia-devel@lists.alioth.debian.org>
Architecture: amd64
Depends: nvidia-alternative (= 535.261.03-1), libnvidia-ml1 (= 535.261.03-1),
 libc6 (>= 2.34), nvidia-kernel-dkms (= 535.261.03-1) | nvidia-kernel-535.261.03
Pre-Depends: nvidia-legacy-check (>= 396)
Recommends: nvidia-kernel-dkms (= 535.261.03-1) | nvidia-kernel-535.261.03
Description-en: NVIDIA System Management Interface

Package: nvidia-smi
Version: 535.309.01-0+deb12u1
Depends: nvidia-alternative (= 535.309.01-0+deb12u1)
`

func TestExactDependencies(t *testing.T) {
	got := exactDependencies([]byte(nvidiaSMIShow))
	want := []plan.PackagePin{
		{Name: "nvidia-alternative", Version: "535.261.03-1"},
		{Name: "libnvidia-ml1", Version: "535.261.03-1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exactDependencies = %+v, want %+v (alternatives, ranges and the second paragraph left out)", got, want)
	}
	if got := exactDependencies([]byte("Package: x\nDepends: libfoo:any (= 1.0), bar (>= 2)\n")); !reflect.DeepEqual(got, []plan.PackagePin{{Name: "libfoo", Version: "1.0"}}) {
		t.Errorf("arch-qualified relation: %+v", got)
	}
}
