# Captured by gpuenv init: this host's GPU stack as it was observed, with the
# package repositories beyond the distribution's archive that it came from.
# gpuenv plan against the same host shows no changes. On a fresh host of the
# same OS and release it installs the same versions, once each repository's
# keyring is in place as its comment says. Review it before applying it
# elsewhere.

# The driver as installed: nvidia-driver, nvidia-kernel-dkms.
driver {
  version           = "535.261.03"
  kernel_modules    = "proprietary"
  source            = "distro"
  blacklist_nouveau = true
  persistence_mode  = false
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
