# Targets: Ubuntu 22.04 (x86_64). The mirror keeps the layout of NVIDIA's
# CUDA repository for ubuntu2204/x86_64, whose package names and versions
# the spec pins; on another system, mirror that system's repository.

# A copy of NVIDIA's CUDA repository (flat, like the original), signed with
# the site's own key.
repository "local-cuda" {
  url      = "file:///srv/mirror/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/srv/mirror/keys/mirror-archive-keyring.gpg"
  priority = 1000
}

# Exact versions: the mirror holds these and nothing newer. 550.54.15 is the
# driver CUDA 12.4.1 shipped with.
driver {
  version           = "550.54.15"
  source            = "nvidia"
  kernel_modules    = "open"
  blacklist_nouveau = true
  hold              = true
}

cuda {
  version         = "12.4.1"
  source          = "nvidia"
  set_environment = true
}

cudnn {
  version = "9.1.0.70"
  source  = "nvidia"
}

# Wheels copied from PyTorch's cu124 index into a local simple index.
framework "pytorch" {
  version   = "2.5.1+cu124"
  venv      = "/opt/pytorch"
  cuda      = "12.4"
  index_url = "file:///srv/mirror/pypi/simple"
}
