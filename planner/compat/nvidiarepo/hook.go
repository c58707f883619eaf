//go:build !gpuenv_testrepo

package nvidiarepo

// testRows is the table as CUDA looks it up. Only a binary built with the
// tag gpuenv_testrepo, which the real-system tests build for themselves,
// may change a row (hook_testrepo.go); every other build has NVIDIA's.
func testRows(rows []Repository) []Repository { return rows }
