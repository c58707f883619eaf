# Captured by gpuenv init: this host's GPU stack as it was observed, with the
# package repositories beyond the distribution's archive that it came from.
# gpuenv plan against the same host shows no changes. On a fresh host of the
# same OS and release it installs the same versions, once each repository's
# keyring is in place as its comment says. Review it before applying it
# elsewhere.

# Configured in /etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list.
# Its keyring /usr/share/keyrings/cuda-archive-keyring.gpg is missing on this
# host, so the block names no key_fingerprint.
# Its lists are not on disk (apt-get update has not fetched them), so its pin
# priority is not known and not captured.
repository "cuda-ubuntu2204-x86_64" {
  url     = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring = "/usr/share/keyrings/cuda-archive-keyring.gpg"
}

# The driver as installed: cuda-drivers, cuda-drivers-545, nvidia-dkms-545,
# nvidia-driver-545.
driver {
  version           = "545.23.08"
  kernel_modules    = "proprietary"
  source            = "nvidia"
  blacklist_nouveau = true
  persistence_mode  = false
}

# The CUDA toolkit in /usr/local/cuda-12.3 (cuda-toolkit-12-3).
cuda {
  version = "12.3.2"
  source  = "nvidia"
}

# tensorflow 2.17.0 in /opt/tf.
framework "tensorflow" {
  version = "2.17.0"
  python  = "/opt/tf/bin/python"
}

# Users in video (gid 44).
group "video" {
  members = ["dev"]
}

# Users in render (gid 109).
group "render" {
  members = ["dev"]
}
