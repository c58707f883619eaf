# Captured by gpuenv init: this host's GPU stack as it was observed, with the
# package repositories beyond the distribution's archive that it came from.
# gpuenv plan against the same host shows no changes. On a fresh host of the
# same OS and release it installs the same versions, once each repository's
# keyring is in place as its comment says. Review it before applying it
# elsewhere.
