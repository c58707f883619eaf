# Captured by gpuenv init: this host's GPU stack as it was observed, with the
# package repositories beyond the distribution's archive that it came from.
# gpuenv plan against the same host shows no changes. On a fresh host of the
# same OS and release it installs the same versions, once each repository's
# keyring is in place as its comment says. Review it before applying it
# elsewhere.

# Configured in /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list.
# The key in /usr/share/keyrings/cuda-archive-keyring.gpg has the fingerprint
# key_fingerprint states; another host needs that key there before apply (for
# NVIDIA's repositories, the cuda-keyring package puts it there).
repository "cuda-ubuntu2204-x86_64" {
  url             = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring         = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  key_fingerprint = "7D5AB3C8EA6E6296C742F6104948E0156F695994"
  priority        = 600
}

# apt's pins of single packages are not captured (a repository block's
# priority pins a whole repository):
# /etc/apt/preferences.d/cuda-repository-pin-600 (nsight-compute: origin
# *ubuntu.com* -1); /etc/apt/preferences.d/cuda-repository-pin-600
# (nsight-systems: origin *ubuntu.com* -1).

# The driver as installed: nvidia-dkms-550, nvidia-driver-550.
driver {
  version           = "550.54.15"
  kernel_modules    = "proprietary"
  source            = "nvidia"
  blacklist_nouveau = true
  persistence_mode  = false
}

# The CUDA toolkit in /usr/local/cuda-12.4 (cuda-toolkit-12-4).
cuda {
  version = "12.4.1"
  source  = "nvidia"
}

# cuDNN 9.1.0 (libcudnn9-cuda-12) for CUDA 12.
cudnn {
  version = "9.1.0.70"
  source  = "nvidia"
}
