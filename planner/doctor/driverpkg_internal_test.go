package doctor

import (
	"regexp"
	"testing"
)

// The pattern as first written, one name after another: the grouped one
// must take exactly the names it takes.
var driverPackageFlat = regexp.MustCompile(`^(nvidia-driver(-[0-9]+)?(-server)?(-open)?|nvidia-utils-[0-9]+(-server)?|libnvidia-compute-[0-9]+(-server)?|nvidia-dkms-[0-9]+(-server)?(-open)?|nvidia-kernel-common-[0-9]+(-server)?|nvidia-headless(-no-dkms)?-[0-9]+(-server)?(-open)?|nvidia-open(-[0-9]+)?|cuda-drivers(-[0-9]+)?|nvidia-kernel-dkms|nvidia-open-kernel-dkms|kmod-nvidia-latest-dkms|kmod-nvidia-open-dkms|nvidia-smi|libnvidia-ml1)$`)

func FuzzDriverPackageName(f *testing.F) {
	for _, n := range []string{"nvidia-driver", "nvidia-driver-550", "nvidia-driver-550-server-open", "nvidia-driver-550-open", "nvidia-utils-550",
		"nvidia-utils-550-server", "libnvidia-compute-535-server", "nvidia-dkms-550-open", "nvidia-kernel-common-550", "nvidia-headless-no-dkms-550-server",
		"nvidia-headless-550-open", "nvidia-open", "nvidia-open-575", "cuda-drivers", "cuda-drivers-550", "nvidia-kernel-dkms", "nvidia-open-kernel-dkms",
		"kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms", "nvidia-smi", "libnvidia-ml1", "libnvidia-ml-dev", "nvidia-settings", "nvidia-fabricmanager-550",
		"libnvidia-gl-550", "nvidia-driver-", "nvidia-open-", "cuda-drivers-", "nvidia-utils", "python3-torch", ""} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := driverPackageRe.MatchString(name), driverPackageFlat.MatchString(name); got != want {
			t.Errorf("driverPackageRe.MatchString(%q) = %v, the flat pattern says %v", name, got, want)
		}
	})
}
