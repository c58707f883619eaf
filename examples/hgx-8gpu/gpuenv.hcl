# Targets: Ubuntu 22.04 (x86_64) on an HGX or DGX board of eight GPUs
# joined by NVSwitches (H100 SXM), with NVIDIA's CUDA repository for
# ubuntu2204/x86_64 and the libnvidia-container repository.

# NVIDIA's CUDA repository for Ubuntu 22.04, which carries the driver and
# the Fabric Manager of each driver version, and NVIDIA's
# libnvidia-container repository for the toolkit.
repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600
}

repository "nvidia-container-toolkit" {
  url     = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"
  keyring = "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg"
}

# The driver that is on the board, held. No Fabric Manager block: on a
# board with NVSwitches the driver step installs, holds, upgrades and rolls
# back nvidia-fabricmanager at exactly the driver's version, and restarts
# its service, because CUDA fails with error 802 without it.
driver {
  version          = "550.54.15"
  kernel_modules   = "open"
  persistence_mode = true
  hold             = true
}

# MIG on the last two GPUs only: GPUs 0-5 stay whole for training, 6 and
# 7 are cut into instances for inference and notebooks (the H100 80GB
# profiles of NVIDIA's MIG user guide). Each GPU gets 3g.40gb, 2g.20gb and
# two 1g.10gb; the 3g.40gb is split into a 2c and a 1c compute instance.
# Enabling MIG resets the GPU (or waits for a reboot where a process uses
# it), and gpuenv-mig.service makes the layout again after every boot,
# before the container runtime starts. The CDI spec then names the MIG
# devices, not GPUs 6 and 7 whole: nvidia.com/gpu=6:0 … or by MIG UUID.
mig "6" {
  instances         = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
  compute_instances = { "3g.40gb" = ["2c", "1c"] }
}

mig "7" {
  instances = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
}

# Containers: the NVIDIA runtime in Docker's and containerd's
# configuration, a CDI spec that names every GPU (nvidia.com/gpu=0 …
# nvidia.com/gpu=7), the management spec beside it (on with cdi), whose
# management.nvidia.com/gpu=all gives a DCGM or MIG manager container
# every GPU and the MIG config and monitor capability nodes, and the
# /dev/char links (on by default) that keep the containers' GPUs when
# systemd reloads.
container_toolkit {
  engines = ["docker", "containerd"]
  cdi     = true
}

# Device 0 is the same GPU for CUDA as for nvidia-smi and the CDI spec,
# for everyone. Users in no team see every GPU.
environment {
  cuda_device_order = "PCI_BUS_ID"
}

# Two teams share the board's whole GPUs: each team's members get its
# CUDA_VISIBLE_DEVICES at login (from /etc/gpuenv/teams/<group>.env,
# which gpuenv's profile script reads), over the host-wide setting.
# CUDA_VISIBLE_DEVICES chooses what programs see, not what they may use.
# The MIG devices of GPUs 6 and 7 go to containers by CDI name
# (--device nvidia.com/gpu=7:1); a team may name MIG devices too, by the
# MIG-<uuid> that nvidia-smi -L lists once the layout exists.
group "training" {
  members = ["alice", "bob"]
}

group "vision" {
  members = ["carol"]
}

team "training" {
  cuda_visible_devices = ["0", "1", "2", "3"]
}

team "vision" {
  cuda_visible_devices = ["4", "5"]
}
