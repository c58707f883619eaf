# Captured by gpuenv init: this host's GPU stack as it was observed, with the
# package repositories beyond the distribution's archive that it came from.
# gpuenv plan against the same host shows no changes. On a fresh host of the
# same OS and release it installs the same versions, once each repository's
# keyring is in place as its comment says. Review it before applying it
# elsewhere.

# Configured in /etc/yum.repos.d/cuda-rhel9.repo [cuda-rhel9-x86_64].
# dnf fetches its key from
# https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub
# and asks before trusting it; gpuenv does not fetch keys, so the block names
# no key_fingerprint.
repository "cuda-rhel9-x86_64" {
  url     = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64"
  keyring = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub"
}

# The driver 550.90.07 is installed, but no package database could be read to
# tell which package installed it (see gpuenv observe), so no driver block
# describes it.

# The CUDA 12.4.1 toolkit in /usr/local/cuda-12.4 is installed, but no package
# database could be read to tell which package installed it, so no cuda block
# describes it.
