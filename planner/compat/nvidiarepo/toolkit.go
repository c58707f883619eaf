package nvidiarepo

import (
	"strconv"
	"strings"
)

// What NVIDIA's per-release toolkit packages (cuda-toolkit-12-4, from the
// CUDA repository, deb or RPM) put on a host besides the toolkit's
// directory, which a plan's predicted end state needs.
//
//   - They make /usr/local/cuda, and /usr/local/cuda-MAJOR, alternatives
//     links to the release's directory. Source: NVIDIA/libnvidia-container
//     issue #117, the scriptlets of cuda-toolkit-11-1's RPM
//     ("update-alternatives --install /usr/local/cuda cuda
//     /usr/local/cuda-11.1 11", the same for cuda-11), run at every
//     install; the deb packages are taken to do the same (unverified).
//     Which release holds a link that an earlier toolkit already made
//     depends on the priorities, which the source shows for one release
//     only: gpuenv predicts the link only where there is none.
//   - They configure the dynamic loader: /etc/ld.so.conf.d/000_cuda.conf
//     names /usr/local/cuda/targets/TARGET/lib, and 988_cuda-MAJOR.conf
//     /usr/local/cuda-MAJOR/targets/TARGET/lib. Source:
//     NVIDIA/nvidia-container-toolkit pull request #527, a CUDA 12 host's
//     /etc/ld.so.conf.d listing both (42 and 45 bytes on aarch64: those
//     lines with their newline).

// ToolkitRelease is the CUDA release whose toolkit an NVIDIA package of
// that name installs: "cuda-toolkit-12-4" is 12.4; ok is false for any
// other name (the meta package cuda-toolkit, cuda-toolkit-12, a
// distribution's nvidia-cuda-toolkit).
func ToolkitRelease(pkg string) (major, minor int, ok bool) {
	mm, found := strings.CutPrefix(pkg, "cuda-toolkit-")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(mm, "-")
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if !found || err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return 0, 0, false
	}
	return major, minor, true
}

// ToolkitDir is the directory an NVIDIA toolkit package of the release
// installs to.
func ToolkitDir(major, minor int) string {
	return "/usr/local/cuda-" + strconv.Itoa(major) + "." + strconv.Itoa(minor)
}

// LoaderConf is one file of /etc/ld.so.conf.d, as a package brings it.
type LoaderConf struct {
	Path    string
	Content string
}

// ToolkitLoaderConfs are the loader's configuration files the toolkit
// packages of a CUDA major bring, on a machine of that uname -m name;
// nil for a machine NVIDIA's CUDA repository has no toolkit for.
func ToolkitLoaderConfs(major int, machine string) []LoaderConf {
	var target string
	switch machine {
	case "x86_64":
		target = "x86_64-linux"
	case "aarch64":
		// The repository's arm64 server toolkits (sbsa); Jetson's have
		// repositories of their own, which gpuenv does not add.
		target = "sbsa-linux"
	default:
		return nil
	}
	m := strconv.Itoa(major)
	return []LoaderConf{
		{Path: "/etc/ld.so.conf.d/000_cuda.conf", Content: "/usr/local/cuda/targets/" + target + "/lib\n"},
		{Path: "/etc/ld.so.conf.d/988_cuda-" + m + ".conf", Content: "/usr/local/cuda-" + m + "/targets/" + target + "/lib\n"},
	}
}
