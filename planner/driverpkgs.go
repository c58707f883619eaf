package planner

import (
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// driverTopLevel matches the packages that pull in a whole driver of one
// branch, flavour or source; two of them installed together conflict.
var driverTopLevel = lazyregexp.New(`^(nvidia-driver(-[0-9]+)?(-server)?(-open)?|nvidia-driver-[0-9]+-server-open|cuda-drivers(-[0-9]+)?|nvidia-open(-[0-9]+)?|nvidia-kernel-dkms|nvidia-open-kernel-dkms|nvidia-dkms-[0-9]+(-server)?(-open)?|nvidia-tesla(-[0-9]+)?-driver)$`)

// DriverPackage reports whether a package is a whole driver of one
// branch, flavour or source (nvidia-driver-550-open, cuda-drivers,
// nvidia-kernel-dkms …), as opposed to one of its parts.
func DriverPackage(name string) bool {
	// A host has hundreds of packages, and a plan asks of each: the
	// expression is run only on names it may match.
	for _, p := range driverTopLevelPrefixes {
		if strings.HasPrefix(name, p) {
			return driverTopLevel.MatchString(name)
		}
	}
	return false
}

// driverTopLevelPrefixes are what every name driverTopLevel matches
// begins with (TestDriverTopLevelPrefixes).
var driverTopLevelPrefixes = []string{"nvidia-", "cuda-drivers"}

// InstalledDriverFlavor tells the kernel-module flavour of an installed
// driver package: the loaded module's where one is loaded, else what the
// package names say.
func InstalledDriverFlavor(obs *facts.Observation, name string) spec.KernelModules {
	if f := obs.Driver.ModuleFlavor; f != "" {
		return spec.KernelModules(f)
	}
	open := strings.Contains(name, "-open")
	for _, p := range obs.Packages.Packages {
		if p.State == facts.StateInstalled && (p.Name == "nvidia-open-kernel-dkms" || strings.HasPrefix(p.Name, "nvidia-dkms-") && strings.HasSuffix(p.Name, "-open")) {
			open = true
		}
	}
	if open {
		return spec.KernelModulesOpen
	}
	return spec.KernelModulesProprietary
}
