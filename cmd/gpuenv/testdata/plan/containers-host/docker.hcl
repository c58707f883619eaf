# The container toolkit for Docker and containerd on a host that has
# neither configured: each engine's file is written at plan, and observe
# reads the NVIDIA runtime from it as plan predicted.
container_toolkit {
  version = "1.17.8"
  engines = ["docker", "containerd"]
}
