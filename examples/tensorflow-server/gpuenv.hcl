# Targets: Ubuntu 22.04 (x86_64), with NVIDIA's CUDA repository for
# ubuntu2204/x86_64.

repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600
}

# CUDA 12.3 Update 1 and 2 need at least 545.23.08. kernel_modules is left to
# its default, which follows the server's GPUs.
driver {
  version          = ">= 545.23.08"
  source           = "nvidia"
  persistence_mode = true
  hold             = true
}

cuda {
  version         = "12.3"
  source          = "nvidia"
  set_environment = true
}

# The last cuDNN 8 release, in its build for CUDA 12.
cudnn {
  version = "8.9.7.29"
  source  = "nvidia"
}

# TensorFlow 2.17 was tested with CUDA 12.3 and cuDNN 8.9; it uses the
# system's CUDA and cuDNN above, so the and-cuda extra is not needed.
framework "tensorflow" {
  version = "2.17.*"
  venv    = "/opt/tensorflow"
}

environment {
  cuda_device_order = "PCI_BUS_ID"
}
