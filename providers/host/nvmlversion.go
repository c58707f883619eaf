package host

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLDriverVersion asks an NVML library (the real one, nvml.New(), or
// go-nvml's mock) which driver version it reports, starting it for each
// question and shutting it down after: a library started before a module
// reload would still talk to the module that was unloaded.
type NVMLDriverVersion struct {
	Lib nvml.Interface
}

// LiveDriverVersion asks this machine's NVML library, loaded on each
// question.
func LiveDriverVersion() *NVMLDriverVersion { return &NVMLDriverVersion{Lib: nvml.New()} }

// DriverVersion starts NVML, reads the driver version and shuts NVML down.
// A failed start is an *NVMLError; nothing else is called after it.
func (n *NVMLDriverVersion) DriverVersion() (string, error) {
	if ret := n.Lib.Init(); ret != nvml.SUCCESS {
		return "", &NVMLError{Op: "init", Code: int(ret), Class: ClassifyInit(int(ret))}
	}
	defer n.Lib.Shutdown()
	v, ret := n.Lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("NVML driver version: %s", ReturnName(int(ret)))
	}
	return v, nil
}
