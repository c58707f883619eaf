# Targets: Ubuntu 22.04 (x86_64), with NVIDIA's CUDA repository for
# ubuntu2204/x86_64, which plan adds from gpuenv's table.

locals {
  # What goes with each CUDA version: the driver that CUDA release shipped
  # with (Update 1 for 12.4, Update 2 for 12.6), the cuDNN the torch wheels
  # bundle, and the torch releases that publish wheels for it as stable.
  stacks = {
    "12.4" = {
      driver = ">= 550.54.15"
      cudnn  = "9.1.0.70"
      torch  = "2.5.*"
    }
    "12.6" = {
      driver = ">= 560.35.03"
      cudnn  = "9.5.1.17"
      torch  = "2.7.*"
    }
  }
  stack = local.stacks[var.cuda]
  tag   = "cu${replace(var.cuda, ".", "")}"
}

driver {
  version        = local.stack.driver
  source         = "nvidia"
  kernel_modules = "open"
}

cuda {
  version         = var.cuda
  source          = "nvidia"
  set_environment = true
}

cudnn {
  version = local.stack.cudnn
  source  = "nvidia"
}

framework "pytorch" {
  version = local.stack.torch
  venv    = "${var.venv_root}/pytorch-${local.tag}"
  cuda    = var.cuda
}
