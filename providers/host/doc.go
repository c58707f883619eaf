// Package host is gpuenv's handle on the machine it manages: a root
// directory, the commands run against it, and (on a live root) NVML.
//
// Every file gpuenv reads or writes goes through a Host, which resolves
// paths inside the root: an absolute symlink such as
// /usr/local/cuda -> /usr/local/cuda-12.4 found in a root mounted at /mnt
// leads to /mnt/usr/local/cuda-12.4, never to the machine running gpuenv.
// A root other than "/" is a disk image, a container filesystem or a test
// fixture, whose kernel and GPUs are not the ones this process could talk
// to: commands run chrooted into it, and NVML is not loaded unless a caller
// hands one in (WithNVML).
//
// NVML is reached only through the small NVML interface of this package;
// go-nvml's own interface does not leave it.
package host
