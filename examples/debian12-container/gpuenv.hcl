# Targets: Debian 12 (bookworm), in a container or an image being built,
# from Debian's own archive only.

# A container runs on its host's kernel with the host's driver: the NVIDIA
# Container Toolkit mounts the driver's libraries into it. So this spec has
# no driver block; gpuenv plans no kernel module, DKMS build, initramfs or
# blacklist in a container in any case (examples/debian12-distro is the
# same stack for the host itself, driver included).

# nvidia-cuda-toolkit 11.8.89, installed under /usr. Debian's CUDA packages
# are in its non-free component; where the container's apt sources lack it,
# gpuenv plans a step that enables it.
cuda {
  version = "11.8"
  source  = "distro"
}

# Debian's python3-torch for the system's Python (a CPU-only build: plan
# says so).
framework "pytorch" {
  source = "distro"
}
