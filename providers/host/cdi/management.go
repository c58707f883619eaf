package cdi

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// The management spec gives a container every NVIDIA device node and the
// driver's files, for the programs that manage GPUs rather than compute
// on them: nvidia-smi, DCGM, the MIG manager (which needs the MIG config
// capability node). Its kind, its one device "all", the nodes it names
// and the hooks it leaves out are those of nvidia-ctk cdi generate
// --mode=management, as NVIDIA/nvidia-container-toolkit builds it (the
// module v1.20.2 go.sum pins, which TestManagementSpecAgreesWithNVCDI
// runs, and commit d34b3046758cb1a5db606b2a39519c731bbf9f56;
// pkg/nvcdi/management.go: newManagementDeviceDiscoverer's patterns and
// nodeIsBlocked's prefixes; pkg/nvcdi/
// options.go: the vendor "management.nvidia.com" and the disabled
// disable-device-node-modification hook; pkg/nvcdi/wrapper.go: the void
// variable and mount every spec has). The toolkit's installer
// (cmd/nvidia-ctk-installer/toolkit/toolkit.go, generateCDISpec) names
// the file by the CDI project's GenerateNameForSpec: vendor-class.yaml.
const (
	ManagementVendor = "management." + CDIVendor
	ManagementKind   = ManagementVendor + "/" + cdiClass
	// ManagementSpecPath is in the static directory, beside CDISpecPath,
	// not in /var/run/cdi where the toolkit's installer writes it: gpuenv
	// writes the spec once and journals it, and a file on the run
	// directory's tmpfs would be gone at every boot, leaving containers
	// that ask for management.nvidia.com/gpu=all unable to start until
	// the next apply.
	ManagementSpecPath = StaticCDIDir + "/" + ManagementVendor + "-" + cdiClass + ".yaml"
)

// ManagementDevice is the management spec's one device.
const ManagementDevice = "all"

// managementBlocked are the prefixes of /dev/nvidia* nodes that are not
// the GPUs' (GPUDirect Storage's nvidia-fs, the NVSwitches' and NVLink's
// management nodes, which Fabric Manager holds): nvcdi's nodeIsBlocked.
var managementBlocked = []string{"nvidia-fs", "nvidia-nvswitch", "nvidia-nvlink"}

// Directories of the nested nodes the management spec names: the MIG
// capabilities (/dev/nvidia-caps/nvidia-cap<minor>) and the IMEX
// channels (/dev/nvidia-caps-imex-channels/channel<n>).
const (
	CapsDir         = "/dev/nvidia-caps"
	IMEXChannelsDir = "/dev/nvidia-caps-imex-channels"
)

// IsManagementNode reports whether the device node at p is one the
// management spec names: every /dev/nvidia* node but the blocked ones,
// every MIG capability node and every IMEX channel.
func IsManagementNode(p string) bool {
	dir, base := path.Split(p)
	switch strings.TrimSuffix(dir, "/") {
	case "/dev":
		if !strings.HasPrefix(base, "nvidia") {
			return false
		}
		for _, b := range managementBlocked {
			if strings.HasPrefix(base, b) {
				return false
			}
		}
		return true
	case CapsDir:
		return strings.HasPrefix(base, "nvidia-cap")
	case IMEXChannelsDir:
		return strings.HasPrefix(base, "channel")
	}
	return false
}

// ManagementNodes are the host's device nodes the management spec names,
// in a fixed order: the control nodes, the GPUs, the MIG capabilities,
// the IMEX channels, each group by number.
func ManagementNodes(nodes []facts.DeviceNode) []string {
	var out []string
	for _, n := range nodes {
		if IsManagementNode(n.Path) && !slices.Contains(out, n.Path) {
			out = append(out, n.Path)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		ga, na := nodeOrder(a)
		gb, nb := nodeOrder(b)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(na, nb), strings.Compare(a, b))
	})
	return out
}

// nodeOrder is a node's group and number for ManagementNodes' order.
func nodeOrder(p string) (group, n int) {
	if i := slices.Index(controlNodes, p); i >= 0 {
		return 0, i
	}
	num := func(prefix string) int {
		v, err := strconv.Atoi(strings.TrimPrefix(path.Base(p), prefix))
		if err != nil {
			return -1
		}
		return v
	}
	switch path.Dir(p) {
	case "/dev":
		if v := num("nvidia"); v >= 0 {
			return 2, v
		}
		return 1, 0
	case CapsDir:
		return 3, num("nvidia-cap")
	}
	return 4, num("channel")
}

// GenerateManagementCDI builds the management spec from the host's
// device nodes and the driver's files, once the driver lists its GPUs
// (nvcdi does not ask; gpuenv writes no spec while the module is not
// loaded): one device, "all", with every
// node IsManagementNode accepts, and the driver's files, variables and
// hooks as the nvidia.com/gpu spec has them, less the hooks that keep a
// container to the nodes it was given (disable-device-node-modification,
// which nvcdi turns off in this mode, and update-application-profile,
// which nvcdi adds only to GPU specs).
func GenerateManagementCDI(c *facts.Containers, nodes []facts.DeviceNode) (*cdispec.Spec, error) {
	if len(c.GPUs) == 0 {
		// Nodes nvidia-modprobe left in /dev outlive the module; a spec
		// made from them would give containers nodes no driver answers.
		return nil, errors.New("the driver lists no GPU in /proc/driver/nvidia/gpus: is its kernel module loaded?")
	}
	if len(c.DriverFiles) == 0 {
		return nil, fmt.Errorf("the package database lists no file of driver %q (gpuenv reads the file lists of dpkg and rpm)", c.DriverVersion)
	}
	paths := ManagementNodes(nodes)
	if len(paths) == 0 {
		return nil, errors.New("there is no NVIDIA device node in /dev: is the driver's kernel module loaded?")
	}
	dev := cdispec.Device{Name: ManagementDevice}
	for _, p := range paths {
		dev.ContainerEdits.DeviceNodes = append(dev.ContainerEdits.DeviceNodes, &cdispec.DeviceNode{Path: p})
	}
	s := &cdispec.Spec{Kind: ManagementKind, Devices: []cdispec.Device{dev}}
	s.ContainerEdits = driverEdits(c, nil, false)
	return finish(s)
}
