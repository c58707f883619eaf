package spec

// The checks below are the ones Load applies to values that end up in
// command lines and files, for the planner to hold a plan read back from
// a file to the rules its values met in the spec. Each returns "" for a
// good value and otherwise a sentence that says what is wrong.

// CheckPath checks an absolute path inside the root, as the spec's python,
// venv and path attributes are checked: no relative path, no "..", only
// characters that PATH, ld.so.conf and shell profiles take literally.
func CheckPath(s string) string { return checkPath(s) }

// CheckURL checks a URL whose scheme must be one of schemes, as the
// spec's index_url and repository url are checked.
func CheckURL(s string, schemes ...string) string { return checkURL(s, schemes...) }

// CheckAccountName checks a user or group name (kind "user" or "group").
func CheckAccountName(kind, s string) string { return checkAccountName(kind, s) }

// CheckExtra checks a Python package extra ("and-cuda").
func CheckExtra(s string) string { return checkExtra(s) }

// IndexURLSchemes are the schemes a framework's index_url may use.
var IndexURLSchemes = []string{"https", "http", "file"}

// IsGPUUUID reports whether s is an NVML GPU identifier, GPU-<uuid>.
func IsGPUUUID(s string) bool { return gpuUUID.MatchString(s) }

// IsVisibleDevice reports whether s is an entry cuda_visible_devices
// takes: a device index, a GPU UUID or a MIG device.
func IsVisibleDevice(s string) bool { return deviceID(s, true) != "" }
