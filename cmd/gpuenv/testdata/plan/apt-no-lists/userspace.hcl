# Debian's driver userspace, without kernel modules: on an image before its
# first apt-get update, the versions are known only once the plan's first
# step has fetched the package lists.
driver {
  version        = "535.*"
  source         = "distro"
  kernel_modules = "none"
}
