package host

// DeviceSettings changes NVML device settings for apply, which sees
// settings as words ("enabled", "exclusive_process") and a device's UUID,
// never go-nvml's types.

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DeviceSettings reads and sets device settings through an NVML library (the
// real one, nvml.New(), or go-nvml's mock). It starts the library on first
// use; after a failed start it never calls the library again, since with
// the real one that can kill the process.
type DeviceSettings struct {
	lib     nvml.Interface
	started bool
	initErr error
}

// NewDeviceSettings returns DeviceSettings over lib: the real library
// (nvml.New()) or go-nvml's mock in tests.
func NewDeviceSettings(lib nvml.Interface) *DeviceSettings { return &DeviceSettings{lib: lib} }

// LiveDeviceSettings returns DeviceSettings over this machine's NVML
// library, loaded on first use.
func LiveDeviceSettings() *DeviceSettings { return NewDeviceSettings(nvml.New()) }

func (s *DeviceSettings) start() error {
	if s.started || s.initErr != nil {
		return s.initErr
	}
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		s.initErr = &NVMLError{Op: "init", Code: int(ret), Class: ClassifyInit(int(ret))}
		return s.initErr
	}
	s.started = true
	return nil
}

// Close shuts the library down if it was started.
func (s *DeviceSettings) Close() error {
	if !s.started {
		return nil
	}
	s.started = false
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", ReturnName(int(ret)))
	}
	return nil
}

func (s *DeviceSettings) device(uuid string) (nvml.Device, error) {
	if err := s.start(); err != nil {
		return nil, err
	}
	d, ret := s.lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU %s: %s", uuid, ReturnName(int(ret)))
	}
	return d, nil
}

var computeModes = map[nvml.ComputeMode]string{
	nvml.COMPUTEMODE_DEFAULT:           "default",
	nvml.COMPUTEMODE_EXCLUSIVE_THREAD:  "exclusive_thread",
	nvml.COMPUTEMODE_PROHIBITED:        "prohibited",
	nvml.COMPUTEMODE_EXCLUSIVE_PROCESS: "exclusive_process",
}

// Get reads a setting: "persistence_mode" or "compute_mode".
func (s *DeviceSettings) Get(uuid, setting string) (string, error) {
	d, err := s.device(uuid)
	if err != nil {
		return "", err
	}
	switch setting {
	case "persistence_mode":
		m, ret := d.GetPersistenceMode()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("GPU %s persistence mode: %s", uuid, ReturnName(int(ret)))
		}
		if m == nvml.FEATURE_ENABLED {
			return "enabled", nil
		}
		return "disabled", nil
	case "compute_mode":
		m, ret := d.GetComputeMode()
		if ret != nvml.SUCCESS {
			return "", fmt.Errorf("GPU %s compute mode: %s", uuid, ReturnName(int(ret)))
		}
		if w, ok := computeModes[m]; ok {
			return w, nil
		}
		return "", fmt.Errorf("GPU %s: unknown compute mode %d", uuid, m)
	}
	return "", fmt.Errorf("unknown device setting %q", setting)
}

// Set changes a setting to value.
func (s *DeviceSettings) Set(uuid, setting, value string) error {
	d, err := s.device(uuid)
	if err != nil {
		return err
	}
	var ret nvml.Return
	switch setting {
	case "persistence_mode":
		switch value {
		case "enabled":
			ret = d.SetPersistenceMode(nvml.FEATURE_ENABLED)
		case "disabled":
			ret = d.SetPersistenceMode(nvml.FEATURE_DISABLED)
		default:
			return fmt.Errorf("persistence_mode %q: want enabled or disabled", value)
		}
	case "compute_mode":
		mode, ok := nvml.ComputeMode(0), false
		for m, w := range computeModes {
			if w == value {
				mode, ok = m, true
			}
		}
		if !ok {
			return fmt.Errorf("compute_mode %q: want default, exclusive_process or prohibited", value)
		}
		ret = d.SetComputeMode(mode)
	default:
		return fmt.Errorf("unknown device setting %q", setting)
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("setting %s of GPU %s to %s: %s", setting, uuid, value, ReturnName(int(ret)))
	}
	return nil
}
