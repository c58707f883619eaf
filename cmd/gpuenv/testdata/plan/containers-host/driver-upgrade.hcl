# A driver upgrade on a host with the toolkit's CDI spec managed: the spec
# names the new driver's files, so apply makes it after the driver step,
# and the plan says its content is known after apply.
repository "cuda" {
  url = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
}

driver {
  version = "570.*"
  source  = "nvidia"
}

container_toolkit {
  engines = ["podman"]
}
