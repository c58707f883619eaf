# Captured by gpuenv init: this host's GPU stack as it was observed. gpuenv
# plan against the same host shows no changes; on a fresh host it installs the
# same versions. Review it before applying it elsewhere.
