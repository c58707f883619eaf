# Targets: Ubuntu 22.04 (x86_64), with NVIDIA's CUDA repository for
# ubuntu2204/x86_64.

# NVIDIA's CUDA repository for Ubuntu 22.04. It is a flat repository (suite
# "/"), and priority 600 prefers it over Ubuntu's own packages of the same
# names, as NVIDIA's cuda-repository-pin-600 does.
repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600
}

# The 550 branch, no older than 550.54.15, the driver CUDA 12.4 Update 1
# shipped with. Open kernel modules need a Turing or newer GPU.
driver {
  version           = ">= 550.54.15, < 551"
  source            = "nvidia"
  kernel_modules    = "open"
  blacklist_nouveau = true
  hold              = true
}

cuda {
  version         = "12.4"
  source          = "nvidia"
  set_environment = true
}

cudnn {
  version = "9.*"
  source  = "nvidia"
}

# torch 2.5 from PyTorch's cu124 index (chosen by cuda = "12.4"); its wheels
# bring their own cuDNN 9.1.0.70.
framework "pytorch" {
  version = "2.5.*"
  venv    = "/opt/pytorch"
  cuda    = "12.4"
}
