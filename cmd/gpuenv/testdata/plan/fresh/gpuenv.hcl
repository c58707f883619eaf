# A whole stack on a fresh host, as a new user writes it: versions only, no
# source and no repository block. gpuenv adds NVIDIA's repository for the
# host from its table where the stack needs it.

driver {
  version        = "570.*"
  kernel_modules = "open"
}

cuda {
  version = "12.4"
}

cudnn {
  version = "9.*"
}

framework "pytorch" {
  version = "2.5.*"
  venv    = "/opt/pytorch"
  cuda    = "12.4"
}
