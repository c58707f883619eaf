# What the working DGX (testdata/roots/ubuntu2204-working) has: planning it
# must find nothing to do, without asking the package manager.
driver {
  version           = "550.54.15"
  kernel_modules    = "open"
  blacklist_nouveau = true
}
