//go:build realsystem

package realsys

import (
	"fmt"
	"strings"
)

// The RPM tier's repository: small packages named, versioned and laid out
// as NVIDIA's rhel9/x86_64 repository has them (testdata/rpm/rhel9.qa and
// rhel9.ql: the driver's packages at epoch 3, their files under
// /usr/lib64 and /usr/bin; cuda-drivers at epoch 0 requiring them;
// kmod-nvidia-latest-dkms with the module's sources under /usr/src; the
// driver in the module streams nvidia-driver:550-dkms and latest-dkms),
// the CUDA 12.4 toolkit as cuda-toolkit-12-4 requiring its libraries at
// exactly its own version, and cuDNN 9 for CUDA 12.
const (
	rpmRepoID  = "cuda-rhel9-x86_64"
	rpmRepoDir = "/srv/cuda-rhel9-x86_64"

	rpmDriverOld = "550.90.07"
	rpmDriverNew = "550.127.05"
	rpmCUDAOld   = "12.4.0"
	rpmCUDANew   = "12.4.1"
	rpmCuDNN     = "9.1.0.70"

	rpmToolkit   = "cuda-toolkit-12-4"
	rpmLibraries = "cuda-libraries-12-4"
)

// rpmDriverNames are the driver's packages cuda-drivers pulls in, by
// version, besides cuda-drivers itself.
var rpmDriverNames = []string{"nvidia-driver", "nvidia-driver-cuda", "nvidia-driver-cuda-libs", "nvidia-driver-NVML", "nvidia-kmod-common", "kmod-nvidia-latest-dkms"}

// rpmFaultHook is the start of every scriptlet of the tier's packages:
// when the test has made /run/gpuenv-fault/PACKAGE.SCRIPTLET-ARG, the
// scriptlet says it got there and waits, so that the test kills every
// process in the root at exactly that phase of rpm's transaction. ARG is
// rpm's $1, the number of instances of the package left after the
// operation: %pre-1 is an install, %pre-2 an upgrade, %preun-1 and
// %postun-1 the old version's erasure in an upgrade, %preun-0 a removal;
// %pretrans has none (the marker is PACKAGE.pretrans-).
func rpmFaultHook(pkg, scriptlet string) string {
	return fmt.Sprintf(`f=%s/%s.%s-"$1"
if [ -e "$f" ]; then
	: >"$f.reached"
	while :; do sleep 1; done
fi
`, faultMarkers, pkg, scriptlet)
}

// withRPMFaultScripts gives a package every scriptlet, each starting
// with the hook.
func withRPMFaultScripts(p RPM) RPM {
	s := map[string]string{}
	for _, name := range []string{"pretrans", "pre", "post", "preun", "postun"} {
		s[name] = rpmFaultHook(p.Name, name) + p.Scriptlets[name]
	}
	p.Scriptlets = s
	return p
}

// rpmDriver is the driver at version v (550.90.07): NVIDIA's packages of
// the nvidia-driver source at epoch 3, release 1.el9, and cuda-drivers.
func rpmDriver(v string) []RPM {
	evr := "3:" + v + "-1.el9"
	eq := func(name string) string { return name + " = " + evr }
	pkgs := []RPM{
		{Name: "nvidia-kmod-common", Epoch: 3, Version: v, Release: "1.el9", Arch: "noarch",
			Files: map[string]string{
				"/etc/dracut.conf.d/nvidia.conf":  "# NVIDIA " + v + ": the modules stay out of the initramfs\nomit_drivers+=\" nvidia nvidia-drm nvidia-modeset nvidia-uvm \"\n",
				"/usr/lib/modprobe.d/nvidia.conf": "# NVIDIA " + v + "\noptions nvidia NVreg_PreserveVideoMemoryAllocations=1\n",
			}},
		// At NVIDIA's EVR (testdata/rpm/rhel9.qa: kmod-nvidia-open-dkms
		// 3:550.90.07-1.el9), unlike cuda-drivers at 0:550.90.07-1: the
		// planner matches a dnf set by upstream version and pins each
		// package at its own EVR.
		{Name: "kmod-nvidia-latest-dkms", Epoch: 3, Version: v, Release: "1.el9",
			Requires: []string{eq("nvidia-kmod-common")},
			Provides: []string{"nvidia-kmod = " + evr},
			Dirs:     []string{"/usr/src/nvidia-" + v},
			Files: map[string]string{
				"/usr/src/nvidia-" + v + "/dkms.conf": "PACKAGE_NAME=\"nvidia\"\nPACKAGE_VERSION=\"" + v + "\"\nAUTOINSTALL=\"yes\"\n",
				"/usr/src/nvidia-" + v + "/nv.c":      "/* not the module's source: NVIDIA " + v + " */\n",
			}},
		{Name: "nvidia-driver-NVML", Epoch: 3, Version: v, Release: "1.el9",
			Files:    map[string]string{"/usr/lib64/libnvidia-ml.so." + v: "not a library: NVML " + v + "\n"},
			Symlinks: map[string]string{"/usr/lib64/libnvidia-ml.so.1": "libnvidia-ml.so." + v}},
		{Name: "nvidia-driver-cuda-libs", Epoch: 3, Version: v, Release: "1.el9",
			Files:    map[string]string{"/usr/lib64/libcuda.so." + v: "not a library: CUDA driver " + v + "\n"},
			Symlinks: map[string]string{"/usr/lib64/libcuda.so.1": "libcuda.so." + v}},
		{Name: "nvidia-driver-cuda", Epoch: 3, Version: v, Release: "1.el9",
			Requires: []string{eq("nvidia-driver-cuda-libs"), eq("nvidia-driver-NVML")},
			Files:    map[string]string{"/usr/bin/nvidia-smi": "#!/bin/sh\necho 'NVIDIA-SMI " + v + " (not the real one)'\n"}},
		{Name: "nvidia-driver", Epoch: 3, Version: v, Release: "1.el9",
			Requires: []string{eq("nvidia-kmod-common"), "nvidia-kmod = " + evr},
			Files:    map[string]string{"/usr/bin/nvidia-bug-report.sh": "#!/bin/sh\necho 'nvidia-bug-report " + v + " (not the real one)'\n"}},
		{Name: "cuda-drivers", Version: v, Release: "1",
			Requires: []string{eq("nvidia-driver"), eq("nvidia-driver-cuda"), eq("nvidia-kmod-common"), "nvidia-kmod = " + evr}},
	}
	for i := range pkgs {
		pkgs[i] = withRPMFaultScripts(pkgs[i])
	}
	return pkgs
}

// rpmCUDA is CUDA 12.4 at release full (12.4.0, 12.4.1): the toolkit, its
// libraries at exactly its own version, and the loader's path for them.
func rpmCUDA(full string) []RPM {
	dir := "/usr/local/cuda-12.4"
	return []RPM{
		withRPMFaultScripts(RPM{Name: rpmLibraries, Version: full, Release: "1",
			// Both own the toolkit's directory, whichever goes last
			// removes it.
			Dirs: []string{dir, dir + "/lib64"},
			Files: map[string]string{
				dir + "/lib64/libcudart.so." + full: "not a library: CUDA runtime " + full + "\n",
				"/etc/ld.so.conf.d/cuda-12-4.conf":  "# CUDA " + full + " libraries\n" + dir + "/lib64\n",
			}}),
		withRPMFaultScripts(RPM{Name: rpmToolkit, Version: full, Release: "1",
			Requires: []string{rpmLibraries + " = " + full + "-1"},
			Dirs:     []string{dir, dir + "/bin"},
			Files: map[string]string{
				dir + "/version.json": fmt.Sprintf("{\n   \"cuda\" : {\n      \"name\" : \"CUDA SDK\",\n      \"version\" : %q\n   }\n}\n", full),
				dir + "/bin/nvcc":     "#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V" + full + "'\n",
			}}),
	}
}

// rpmCuDNNPackages is cuDNN 9 for CUDA 12 as NVIDIA's RHEL repository
// names it: the library, and the -devel package with the version header.
func rpmCuDNNPackages(full string) []RPM {
	parts := strings.Split(full, ".")
	return []RPM{
		{Name: "libcudnn9-cuda-12", Version: full, Release: "1",
			Files: map[string]string{"/usr/lib64/libcudnn.so." + strings.Join(parts[:3], "."): "not a library: cuDNN " + full + "\n"}},
		{Name: "libcudnn9-devel-cuda-12", Version: full, Release: "1",
			Requires: []string{"libcudnn9-cuda-12 = " + full + "-1"},
			Files: map[string]string{"/usr/include/cudnn_version.h": fmt.Sprintf(`#ifndef CUDNN_VERSION_H_
#define CUDNN_VERSION_H_

#define CUDNN_MAJOR %s
#define CUDNN_MINOR %s
#define CUDNN_PATCHLEVEL %s

#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)

#endif
`, parts[0], parts[1], parts[2])}},
	}
}

// rpmRepository is every package of the tier's repository.
func rpmRepository() []RPM {
	var all []RPM
	for _, v := range []string{rpmDriverOld, rpmDriverNew} {
		all = append(all, rpmDriver(v)...)
	}
	for _, v := range []string{rpmCUDAOld, rpmCUDANew} {
		all = append(all, rpmCUDA(v)...)
	}
	return append(all, rpmCuDNNPackages(rpmCuDNN)...)
}

// rpmModules is the repository's modules.yaml: the driver's packages are
// in the streams nvidia-driver:550-dkms and nvidia-driver:latest-dkms,
// one module version per driver release, as NVIDIA publishes them, so
// that dnf hides them until a stream is enabled.
func rpmModules() string {
	var b strings.Builder
	for i, v := range []string{rpmDriverOld, rpmDriverNew} {
		for _, stream := range []string{"550-dkms", "latest-dkms"} {
			fmt.Fprintf(&b, `---
document: modulemd
version: 2
data:
  name: nvidia-driver
  stream: %q
  version: %d
  context: "00000000"
  arch: x86_64
  summary: NVIDIA driver for the %s stream
  description: NVIDIA's driver, DKMS kernel module, %s.
  license:
    module:
    - MIT
  dependencies:
  - buildrequires:
      platform: [el9]
    requires:
      platform: [el9]
  profiles:
    default:
      description: the driver with its DKMS module
      rpms:
      - cuda-drivers
  api:
    rpms:
    - cuda-drivers
  artifacts:
    rpms:
`, stream, 20240101000000+i, stream, v)
			for _, p := range rpmDriver(v) {
				fmt.Fprintf(&b, "    - %s-%d:%s-%s.%s\n", p.Name, p.Epoch, p.Version, p.Release, p.arch())
			}
			b.WriteString("...\n")
		}
	}
	return b.String()
}
