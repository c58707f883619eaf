package compat

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec/version"
)

func TestPackages(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    PackageQuery
		want []string // name=version, version empty where not derived
		err  string
	}{
		{"toolkit 12.4.1", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "toolkit", CUDA: v("12.4.1")},
			[]string{"cuda-toolkit-12-4=12.4.1-1"}, ""},
		{"toolkit 12.4 without update", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "toolkit", CUDA: v("12.4")},
			[]string{"cuda-toolkit-12-4="}, ""},
		{"toolkit without CUDA", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "toolkit"},
			nil, "needs more of the request"},
		{"cudnn 9 for CUDA 12", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "cudnn", CUDA: v("12.4"), CuDNN: v("9.1.0.70")},
			[]string{"libcudnn9-cuda-12=9.1.0.70-1"}, ""},
		{"cudnn 9 dev", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "cudnn-dev", CUDA: v("12.8"), CuDNN: v("9.8.0.87")},
			[]string{"libcudnn9-dev-cuda-12=9.8.0.87-1"}, ""},
		{"cudnn 8 picks the CUDA build", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "cudnn", CUDA: v("12.2"), CuDNN: v("8.9.7.29")},
			[]string{"libcudnn8=8.9.7.29-1+cuda12.2"}, ""},
		{"ubuntu open branch", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoDistro, Component: "driver", Flavor: FlavorOpen, Branch: 550},
			[]string{"nvidia-driver-550-open="}, ""},
		{"ubuntu server", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoDistro, Component: "driver", Flavor: FlavorProprietary, Server: true, Branch: 535},
			[]string{"nvidia-driver-535-server="}, ""},
		{"ubuntu server open", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoDistro, Component: "driver", Flavor: FlavorOpen, Server: true, Branch: 570},
			[]string{"nvidia-driver-570-server-open="}, ""},
		{"ubuntu utils", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoDistro, Component: "utils", Branch: 550},
			[]string{"nvidia-utils-550="}, ""},
		{"ubuntu distro needs a branch", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoDistro, Component: "driver", Flavor: FlavorOpen},
			nil, "no package provides driver from distro on ubuntu 22.04 (open modules)"},
		{"nvidia repo proprietary branch", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorProprietary, Branch: 550},
			[]string{"cuda-drivers-550="}, ""},
		{"nvidia repo open latest", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen},
			[]string{"nvidia-open="}, ""},
		{"nvidia repo open 580", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 580},
			[]string{"nvidia-open-580="}, ""},
		{"nvidia repo open before 570", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 550},
			nil, "branch 550"},
		{"pinning from 590", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "driver-pin", Branch: 590},
			[]string{"nvidia-driver-pinning-590="}, ""},
		{"no pinning before 590", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "driver-pin", Branch: 580},
			nil, "no package"},
		{"nvidia repo proprietary latest", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorProprietary},
			[]string{"cuda-drivers="}, ""},
		{"ubuntu names lose the branch at 590", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorProprietary, Branch: 590},
			[]string{"cuda-drivers="}, ""},
		{"ubuntu open 590 follows the pin", PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 595},
			[]string{"nvidia-open="}, ""},
		{"debian keeps the branch in cuda-drivers", PackageQuery{OS: "debian", OSVersion: "13", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorProprietary, Branch: 590},
			[]string{"cuda-drivers-590="}, ""},
		{"debian open 580", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 580},
			[]string{"nvidia-open-580="}, ""},
		{"debian open 590 follows the pin", PackageQuery{OS: "debian", OSVersion: "13", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 590},
			[]string{"nvidia-open="}, ""},
		{"cudnn 9 for CUDA 13", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "cudnn", CUDA: v("13.0"), CuDNN: v("9.13.0.50")},
			[]string{"libcudnn9-cuda-13=9.13.0.50-1"}, ""},
		{"keyring", PackageQuery{OS: "ubuntu", OSVersion: "24.04", Repo: RepoNVIDIA, Component: "keyring"},
			[]string{"cuda-keyring=1.1-1"}, ""},
		{"ubuntu 20.04 unknown", PackageQuery{OS: "ubuntu", OSVersion: "20.04", Repo: RepoNVIDIA, Component: "keyring"},
			nil, "no package"},
		{"debian driver", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "driver", Flavor: FlavorOpen},
			[]string{"nvidia-driver="}, ""},
		{"debian driver 535", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "driver", Branch: 535},
			[]string{"nvidia-driver="}, ""},
		{"debian has no 550", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "driver", Branch: 550},
			nil, "no package"},
		{"debian open modules", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "kernel", Flavor: FlavorOpen},
			[]string{"nvidia-open-kernel-dkms="}, ""},
		{"debian proprietary modules", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "kernel", Flavor: FlavorProprietary},
			[]string{"nvidia-kernel-dkms="}, ""},
		{"debian nvidia-smi", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "utils"},
			[]string{"nvidia-smi="}, ""},
		{"debian nvml", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "nvml"},
			[]string{"libnvidia-ml1="}, ""},
		{"debian toolkit 11.8", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "toolkit", CUDA: v("11.8")},
			[]string{"nvidia-cuda-toolkit="}, ""},
		{"debian has no toolkit 12.4", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "toolkit", CUDA: v("12.4")},
			nil, "no package provides toolkit from distro on debian 12 (CUDA 12.4)"},
		{"debian torch", PackageQuery{OS: "debian", OSVersion: "12", Repo: RepoDistro, Component: "pytorch"},
			[]string{"python3-torch="}, ""},
		{"rhel open stream", PackageQuery{OS: "rhel", OSVersion: "9", Repo: RepoNVIDIA, Component: "module-stream", Flavor: FlavorOpen, Branch: 580},
			[]string{"nvidia-driver:580-open="}, ""},
		{"rhel open latest stream", PackageQuery{OS: "rhel", OSVersion: "9", Repo: RepoNVIDIA, Component: "module-stream", Flavor: FlavorOpen},
			[]string{"nvidia-driver:open-dkms="}, ""},
		{"rhel proprietary stream", PackageQuery{OS: "rhel", OSVersion: "8", Repo: RepoNVIDIA, Component: "module-stream", Flavor: FlavorProprietary, Branch: 550},
			[]string{"nvidia-driver:550-dkms="}, ""},
		{"rhel open driver", PackageQuery{OS: "rhel", OSVersion: "9", Repo: RepoNVIDIA, Component: "driver", Flavor: FlavorOpen, Branch: 580},
			[]string{"nvidia-open="}, ""},
		{"rhel toolkit", PackageQuery{OS: "rhel", OSVersion: "9", Repo: RepoNVIDIA, Component: "toolkit", CUDA: v("12.4.1")},
			[]string{"cuda-toolkit-12-4="}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Packages(tc.q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				if strings.HasPrefix(tc.err, "no package") && !errors.Is(err, ErrUnknown) {
					t.Errorf("error %v does not wrap ErrUnknown", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name+"="+p.Version)
				if p.Row.Source.Table != "packages" || len(p.Row.Source.Refs) == 0 {
					t.Errorf("%s has no source", p.Name)
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("Packages = %v, want %v", names, tc.want)
			}
		})
	}
}

func TestDistroPackages(t *testing.T) {
	var got []string
	for _, p := range DistroPackages("debian", "12", "nvidia-driver") {
		got = append(got, p.Version+" "+p.Suite)
	}
	want := []string{"535.261.03-1 bookworm/non-free", "535.309.01-0+deb12u1 bookworm-security/non-free"}
	if !slices.Equal(got, want) {
		t.Errorf("nvidia-driver versions = %v, want %v", got, want)
	}
	if p := DistroPackages("debian", "12", "nvidia-open-kernel-dkms"); len(p) != 1 || p[0].Version != "535.261.03-1" {
		t.Errorf("nvidia-open-kernel-dkms = %+v", p)
	}
	// The toolkit's Debian version carries the CUDA release it packages.
	p := DistroPackages("debian", "12", "nvidia-cuda-toolkit")
	if len(p) != 1 {
		t.Fatalf("nvidia-cuda-toolkit = %+v", p)
	}
	upstream, err := version.FromDebian(p[0].Version)
	if err != nil || upstream.Major() != 11 || upstream.Minor() != 8 {
		t.Errorf("FromDebian(%s) = %v, %v", p[0].Version, upstream, err)
	}
	if DistroPackages("debian", "13", "nvidia-driver") != nil {
		t.Error("debian 13 has rows")
	}
}
