# Targets: any Debian or Ubuntu host whose archive has the 535 driver, or a
# RHEL-family host with NVIDIA's repository configured: it names no package
# and no repository of its own.

# The data-center R535 long-term branch from the distribution's archive.
driver {
  version          = "535.*"
  persistence_mode = true
  hold             = true
}

# Users who may open the GPU device nodes. Other members stay, as
# exclusive is not set.
group "video" {
  members = ["alice", "bob", "carol"]
}

group "render" {
  members = ["alice", "bob", "carol"]
}

# CUDA's default order (FASTEST_FIRST) differs from nvidia-smi's; PCI_BUS_ID
# makes device 0 the same GPU in both. GPU 3 is kept for the admins.
environment {
  cuda_visible_devices = ["0", "1", "2"]
  cuda_device_order    = "PCI_BUS_ID"
}

# One process per GPU, so that users do not slow each other down unseen.
device "all" {
  compute_mode = "exclusive_process"
}
