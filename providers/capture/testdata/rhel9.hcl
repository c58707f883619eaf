# Captured by gpuenv init: this host's GPU stack as it was observed. gpuenv
# plan against the same host shows no changes; on a fresh host it installs the
# same versions. Review it before applying it elsewhere.

# The driver 550.90.07 is installed, but no package database could be read to
# tell which package installed it (see gpuenv observe), so no driver block
# describes it.

# The CUDA 12.4.1 toolkit in /usr/local/cuda-12.4 is installed, but no package
# database could be read to tell which package installed it, so no cuda block
# describes it.
