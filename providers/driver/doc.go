// Package driver observes the NVIDIA driver as the host shows it: the GPUs
// on the PCI bus and the kernel driver bound to each, the loaded kernel
// modules and the nvidia module's version and flavour, modprobe blacklists
// and the initramfs they must reach, the nvidia modules built for each
// installed kernel (DKMS or prebuilt) and whether its headers are there,
// the user-space library versions (libnvidia-ml.so.*), the /dev/nvidia*
// device nodes, and NVML.
//
// NVML is asked first where the host has one; the files are read either
// way, because they are what is left when NVML cannot start (a fresh
// machine has a GPU and no driver) and because only they show a module and
// library that disagree. Everything is read through a *host.Host, each
// file once, and no process is started.
package driver
