# Targets: Debian 12 (x86_64), with NVIDIA's CUDA repository for
# debian12/x86_64 and the libnvidia-container repository.

# No repository block: the container toolkit comes from NVIDIA's
# libnvidia-container repository, and the driver from NVIDIA's CUDA
# repository for debian12/x86_64. plan adds both from gpuenv's table, each
# key checked against the fingerprint gpuenv pins before apt trusts it.

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
