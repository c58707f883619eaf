# Targets: Debian 12 (x86_64), with NVIDIA's CUDA repository for
# debian12/x86_64 and the libnvidia-container repository.

# NVIDIA's libnvidia-container repository, which carries the container
# toolkit for every Debian and Ubuntu release (a flat repository). Its key,
# as NVIDIA's instructions put it in place:
#   curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey |
#     gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
repository "nvidia-container-toolkit" {
  url     = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
  keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
}

# The driver comes from NVIDIA's CUDA repository for debian12/x86_64, which
# plan adds from gpuenv's table, its key checked against the pinned
# fingerprint.
driver {
  version        = "570.*"
  source         = "nvidia"
  kernel_modules = "open"
}

# Docker and containerd get the NVIDIA runtime in their configuration;
# podman reads the GPUs from the CDI spec, which gpuenv regenerates
# whenever the driver changes.
container_toolkit {
  version = "1.17.*"
  engines = ["docker", "containerd", "podman"]
  cdi     = true
}
