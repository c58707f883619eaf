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

# The driver as installed: cuda-drivers, cuda-drivers-550,
# nvidia-dkms-550-open, nvidia-driver-550-open.
driver {
  version           = "550.54.15"
  kernel_modules    = "open"
  source            = "nvidia"
  blacklist_nouveau = true
  persistence_mode  = false
}

# Held: nvidia-driver-550-open; not held: cuda-drivers, cuda-drivers-550,
# nvidia-dkms-550-open. hold = true would hold them all, so the driver block
# leaves holds as they are.

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

# pytorch 2.5.1+cu124 in /opt/venv.
framework "pytorch" {
  version = "2.5.1+cu124"
  python  = "/opt/venv/bin/python"
  cuda    = "12.4"
}

# Users in video (gid 44).
group "video" {
  members = ["ml", "ubuntu"]
}

# Users in render (gid 109).
group "render" {
  members = ["ml", "ubuntu"]
}
