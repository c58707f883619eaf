# Two teams on the working DGX: one of a group the host has (ml), one of
# a group the spec makes; the host-wide order for both.
environment {
  cuda_device_order = "PCI_BUS_ID"
}

group "vision" {
  members = ["ubuntu"]
}

team "ml" {
  cuda_visible_devices = ["0", "1", "2", "3"]
}

team "vision" {
  cuda_visible_devices = ["4", "GPU-00000000-0000-0000-0000-000000000005"]
}
