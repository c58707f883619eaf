# The container toolkit for podman on a host whose driver stays: the CDI
# spec is made at plan, and the plan shows its digest and devices.
container_toolkit {
  version = "1.17.8"
  engines = ["podman"]
}
