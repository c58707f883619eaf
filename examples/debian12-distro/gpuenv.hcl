# Targets: Debian 12 (bookworm), from Debian's own archive only.

# The NVIDIA packages live in Debian's contrib and non-free components,
# which a default Debian 12 installation does not enable. Where they are
# missing from the host's apt sources, gpuenv plans a step that enables them
# for the suites the host already uses (bookworm, bookworm-updates and
# bookworm-security, where the driver's security updates come from).

# Debian's nvidia-driver: 535.261.03 in bookworm, 535.309.01 in
# bookworm-security. Debian's open modules exist only for 535.261.03, so
# this host uses the proprietary ones.
driver {
  version           = "535.*"
  source            = "distro"
  kernel_modules    = "proprietary"
  blacklist_nouveau = true
}

# nvidia-cuda-toolkit 11.8.89, installed under /usr.
cuda {
  version = "11.8"
  source  = "distro"
}

# Debian's python3-torch for the system's Python. There is no cudnn block:
# Debian's nvidia-cudnn only downloads cuDNN from NVIDIA when installed.
framework "pytorch" {
  source = "distro"
}
