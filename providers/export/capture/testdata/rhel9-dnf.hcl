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
# Its priority=50 is not captured: the .repo file gpuenv writes sets none.
repository "cuda-rhel9-x86_64" {
  url     = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64"
  keyring = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/D42D0685.pub"
}

# The repository
# https://mirrors.fedoraproject.org/metalink?repo=epel-9&arch=$basearch in
# /etc/yum.repos.d/epel.repo [epel] is not captured: it lists its mirrors with
# a metalink, and a repository block names one base URL.
