# Captured by gpuenv init: this host's GPU stack as it was observed. gpuenv
# plan against the same host shows no changes; on a fresh host it installs the
# same versions. Review it before applying it elsewhere.

# The driver as installed: nvidia-driver, nvidia-kernel-dkms.
driver {
  version           = "535.261.03"
  kernel_modules    = "proprietary"
  source            = "distro"
  blacklist_nouveau = true
}

# The CUDA toolkit in /usr/lib/nvidia-cuda-toolkit (nvidia-cuda-toolkit).
cuda {
  version = "11.8.0"
  source  = "distro"
}

# pytorch 1.13.0a0 from the distribution's package python3-torch, whose
# version 1.13.1 the block states (the upstream part of the package's
# version).
framework "pytorch" {
  version = "1.13.1"
  source  = "distro"
}

# Users in video (gid 44).
group "video" {
  members = ["debian"]
}
