# Captured by gpuenv init: this host's GPU stack as it was observed. gpuenv
# plan against the same host shows no changes; on a fresh host it installs the
# same versions. Review it before applying it elsewhere.

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
