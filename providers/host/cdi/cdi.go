// Package cdi makes, checks and renders the Container Device Interface
// spec for the host's GPUs from the facts alone (the driver's files, the
// GPUs and their device nodes, the installed toolkit's hooks, and the MIG
// devices NVML reports with their capability minors): a file of the
// host's, as a package database is, with no planning of its own.
package cdi

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// The CDI spec directories, in rising priority: a spec in the dynamic
// directory outranks one of the same kind in the static one (the CDI
// project's default cache, pkg/cdi DefaultSpecDirs).
const (
	StaticCDIDir  = "/etc/cdi"
	DynamicCDIDir = "/var/run/cdi"
	// CDISpecPath is the spec gpuenv writes, where nvidia-ctk cdi
	// generate --output writes by NVIDIA's instructions.
	CDISpecPath = StaticCDIDir + "/nvidia.yaml"
)

// CDIKind is the kind of the GPUs' CDI devices: nvidia.com/gpu=0,
// nvidia.com/gpu=GPU-<uuid>, nvidia.com/gpu=all. CDIVendor is the vendor
// part every NVIDIA CDI kind starts with.
const (
	CDIVendor = "nvidia.com"
	cdiClass  = "gpu"
	CDIKind   = CDIVendor + "/" + cdiClass
)

// libcudaDirEnv and voidDeviceMount are the spec's variable and mount of
// toolkits that write them (compat.ToolkitWrites).
const (
	libcudaDirEnv   = "NVIDIA_CTK_LIBCUDA_DIR"
	voidDeviceMount = "/var/run/nvidia-container-devices/void"
)

// controlNodes are the device nodes every GPU container needs besides its
// GPUs' own, when the host has them.
var controlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}

// mountOptions are nvidia-ctk's for the driver's files: read-only, no
// setuid or device files through them.
var mountOptions = []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}

// GenerateCDI builds the CDI spec for the host's GPUs from files: the
// GPUs the driver's /proc files list, their device nodes, and the
// driver's files as the package database lists them. It names only the
// hooks the installed toolkit has (none when no toolkit is installed,
// which podman does not need).
//
// nvml are the GPUs as NVML reports them, nil where NVML was not asked
// (apply, right after a driver change): only NVML knows the MIG devices.
// A GPU in MIG mode is then given as its MIG devices, not whole, as
// nvidia-ctk cdi generate does: CUDA in a container given the whole GPU
// without its instances' capability nodes sees no device.
func GenerateCDI(c *facts.Containers, nodes []facts.DeviceNode, nvml []facts.GPUDevice) (*cdispec.Spec, error) {
	if len(c.GPUs) == 0 {
		return nil, errors.New("the driver lists no GPU in /proc/driver/nvidia/gpus: is its kernel module loaded?")
	}
	if len(c.DriverFiles) == 0 {
		// A spec without the driver's libraries starts containers that
		// see the GPUs and cannot use them.
		return nil, fmt.Errorf("the package database lists no file of driver %q (gpuenv reads the file lists of dpkg and rpm)", c.DriverVersion)
	}
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.Path] = true
	}
	s := &cdispec.Spec{Kind: CDIKind}
	var all cdispec.ContainerEdits
	var migs []cdispec.Device
	for _, g := range c.GPUs {
		node := fmt.Sprintf("/dev/nvidia%d", g.Minor)
		if !have[node] {
			return nil, fmt.Errorf("GPU %d (%s) has no device node %s", g.Index, g.PCIBusID, node)
		}
		if d := nvmlDevice(nvml, g); d != nil && d.MIGMode == "enabled" {
			m, err := migDevices(c, g, d, node, have)
			if err != nil {
				return nil, err
			}
			migs = append(migs, m...)
			continue
		}
		edits := cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: node}}}
		if h := memoryLimitsHook(c, g); h != nil {
			edits.Hooks = []*cdispec.Hook{h}
		}
		s.Devices = append(s.Devices, cdispec.Device{Name: strconv.Itoa(g.Index), ContainerEdits: edits})
		if g.UUID != "" {
			s.Devices = append(s.Devices, cdispec.Device{Name: g.UUID, ContainerEdits: edits})
		}
		all.DeviceNodes = append(all.DeviceNodes, &cdispec.DeviceNode{Path: node})
		all.Hooks = append(all.Hooks, edits.Hooks...)
	}
	// Whole GPUs first, then MIG devices, nvidia-ctk's order; "all" is
	// every device's nodes and hooks together, each once.
	for _, m := range migs {
		s.Devices = append(s.Devices, m)
		for _, n := range m.ContainerEdits.DeviceNodes {
			if !slices.ContainsFunc(all.DeviceNodes, func(o *cdispec.DeviceNode) bool { return o.Path == n.Path }) {
				all.DeviceNodes = append(all.DeviceNodes, &cdispec.DeviceNode{Path: n.Path})
			}
		}
	}
	if len(all.DeviceNodes) == 0 {
		return nil, errors.New("every GPU is in MIG mode and none has a MIG device: create the layout's instances (the mig block) before writing the CDI spec")
	}
	s.Devices = append(s.Devices, cdispec.Device{Name: "all", ContainerEdits: all})

	s.ContainerEdits = driverEdits(c, have, true)
	return finish(s)
}

// finish gives s the lowest CDI version its edits need, and checks it as
// engines will.
func finish(s *cdispec.Spec) (*cdispec.Spec, error) {
	v, err := cdispec.MinimumRequiredVersion(s)
	if err != nil {
		return nil, err
	}
	s.Version = v
	if err := ValidateCDI(s); err != nil {
		return nil, err
	}
	return s, nil
}

// driverEdits are the edits every container of a spec gets: the driver's
// files, the variables, the void device request, the hooks, and (for the
// nvidia.com/gpu spec, whose devices are the GPUs alone) the control
// nodes the host has. forGPUs also names the hooks that keep a GPU
// container to the nodes it was given, which a management container,
// given every node, must not run.
func driverEdits(c *facts.Containers, have map[string]bool, forGPUs bool) cdispec.ContainerEdits {
	var e cdispec.ContainerEdits
	tk, _ := version.Parse(c.Toolkit.Version)
	var libDirs []string
	for _, f := range c.DriverFiles {
		e.Mounts = append(e.Mounts, &cdispec.Mount{
			HostPath: f, ContainerPath: containerPath(f), Options: mountOptions,
		})
		if isLibrary(f) && !slices.Contains(libDirs, path.Dir(f)) {
			libDirs = append(libDirs, path.Dir(f))
		}
	}
	if c.Toolkit.Version != "" && compat.ToolkitWrites("env", libcudaDirEnv, tk) {
		if dirs := versionedLibDirs(c); len(dirs) > 0 {
			e.Env = append(e.Env, libcudaDirEnv+"="+strings.Join(dirs, ":"))
		}
	}
	// The runtime's own injection must stay out of a container that CDI
	// set up, or the two would mount the driver twice.
	e.Env = append(e.Env, "NVIDIA_VISIBLE_DEVICES=void")
	// The runtime also takes device requests from files mounted under
	// this directory (its volume-mounts device list strategy); the void
	// one asks for none, as the variable does.
	if c.Toolkit.Version != "" && compat.ToolkitWrites("mount", voidDeviceMount, tk) {
		e.Mounts = append(e.Mounts, &cdispec.Mount{
			HostPath: "/dev/null", ContainerPath: voidDeviceMount, Options: []string{"ro", "nosuid", "nodev", "bind"},
		})
	}
	if forGPUs {
		for _, n := range controlNodes {
			if have[n] {
				e.DeviceNodes = append(e.DeviceNodes, &cdispec.DeviceNode{Path: n})
			}
		}
	}
	e.Hooks = hooks(c, libDirs, forGPUs)
	return e
}

// nvmlDevice is g as NVML reports it, matched by UUID, else by PCI
// address; nil where NVML did not report it.
func nvmlDevice(nvml []facts.GPUDevice, g facts.ContainerGPU) *facts.GPUDevice {
	for i := range nvml {
		d := &nvml[i]
		if (g.UUID != "" && d.UUID == g.UUID) || (g.UUID == "" && strings.EqualFold(normalBusID(d.PCIBusID), normalBusID(g.PCIBusID))) {
			return d
		}
	}
	return nil
}

// normalBusID drops the 8-digit domain NVML writes ("00000000:17:00.0")
// down to the 4 digits the driver's /proc names use ("0000:17:00.0").
func normalBusID(id string) string {
	dom, rest, ok := strings.Cut(id, ":")
	if !ok || len(dom) <= 4 {
		return id
	}
	return dom[len(dom)-4:] + ":" + rest
}

// migDevices are the CDI devices of GPU g's MIG devices, each named as
// nvidia-ctk names it: "<GPU index>:<MIG device index>" and its MIG UUID.
// A MIG device needs its GPU's node and the capability nodes of its GPU
// instance and compute instance, whose minors the driver lists in
// /proc/driver/nvidia-caps/mig-minors under the GPU's minor number
// (NVIDIA's MIG user guide, "/dev based nvidia-capabilities"). The GPU's
// memory limits hook is not given: it names a whole GPU by UUID.
func migDevices(c *facts.Containers, g facts.ContainerGPU, d *facts.GPUDevice, gpuNode string, have map[string]bool) ([]cdispec.Device, error) {
	capNode := func(capability string) (string, error) {
		n, ok := c.MIGCapabilityNode(capability)
		if !ok {
			return "", fmt.Errorf("GPU %d (%s) is in MIG mode, but /proc/driver/nvidia-caps/mig-minors lists no %s", g.Index, g.PCIBusID, capability)
		}
		if !have[n] {
			return "", fmt.Errorf("GPU %d (%s): the device node %s of %s does not exist (nvidia-modprobe -f -m creates the MIG capability nodes)", g.Index, g.PCIBusID, n, capability)
		}
		return n, nil
	}
	type migDevice struct {
		index int
		uuid  string
		edits cdispec.ContainerEdits
	}
	var found []migDevice
	for _, gi := range d.GPUInstances {
		giNode, err := capNode(fmt.Sprintf("gpu%d/gi%d/access", g.Minor, gi.ID))
		if err != nil {
			return nil, err
		}
		for _, ci := range gi.Compute {
			if ci.UUID == "" || ci.MIGIndex < 0 {
				return nil, fmt.Errorf("GPU %d (%s): NVML did not list compute instance %d of GPU instance %d as a MIG device", g.Index, g.PCIBusID, ci.ID, gi.ID)
			}
			ciNode, err := capNode(fmt.Sprintf("gpu%d/gi%d/ci%d/access", g.Minor, gi.ID, ci.ID))
			if err != nil {
				return nil, err
			}
			found = append(found, migDevice{ci.MIGIndex, ci.UUID, cdispec.ContainerEdits{
				DeviceNodes: []*cdispec.DeviceNode{{Path: gpuNode}, {Path: giNode}, {Path: ciNode}},
			}})
		}
	}
	// NVML's enumeration order, which the index names follow.
	slices.SortFunc(found, func(a, b migDevice) int { return a.index - b.index })
	var out []cdispec.Device
	for _, m := range found {
		out = append(out,
			cdispec.Device{Name: fmt.Sprintf("%d:%d", g.Index, m.index), ContainerEdits: m.edits},
			cdispec.Device{Name: m.uuid, ContainerEdits: m.edits})
	}
	return out, nil
}

// hooks are the createContainer hooks the spec runs, in the order
// nvidia-ctk cdi generate writes them: the links a program expects, then
// CUDA's forward compatibility, then the loader cache, which must see the
// libraries the hooks before it linked or enabled, then the device node
// guard, then the application profile. Each only when the installed toolkit has it (compat.ToolkitHooks)
// and the host's files call for it; the last two only in a spec of GPUs
// (forGPUs), which nvidia-ctk's management spec leaves out (see
// ManagementKind).
func hooks(c *facts.Containers, libDirs []string, forGPUs bool) []*cdispec.Hook {
	if c.Toolkit.HookPath == "" {
		return nil
	}
	var out []*cdispec.Hook
	add := func(name string, args ...string) {
		if slices.Contains(c.Toolkit.Hooks, name) {
			out = append(out, &cdispec.Hook{
				HookName: "createContainer", Path: c.Toolkit.HookPath,
				Args: append(hookArgs(c.Toolkit.HookPath, name), args...),
			})
		}
	}
	// Programs that dlopen "libcuda.so", the name only the driver's
	// development files provide, find it through this link.
	var links []string
	for _, f := range c.DriverFiles {
		if c.DriverVersion != "" && path.Base(f) == "libcuda.so."+c.DriverVersion {
			links = append(links, "--link", "libcuda.so.1::"+path.Join(path.Dir(f), "libcuda.so"))
		}
	}
	if len(links) > 0 {
		add("create-symlinks", links...)
	}
	// The hook compares an image's CUDA compat libraries with the host's
	// driver, which it can only do knowing the driver's version.
	if _, err := version.Parse(c.DriverVersion); err == nil {
		add("enable-cuda-compat", "--host-driver-version="+c.DriverVersion)
	}
	if len(libDirs) > 0 {
		var folders []string
		for _, d := range libDirs {
			folders = append(folders, "--folder", d)
		}
		add("update-ldcache", folders...)
	}
	if !forGPUs {
		return out
	}
	// NVML and nvidia-smi create the device nodes they miss where the
	// driver's parameters (/proc/driver/nvidia/params) allow it; the
	// container's nodes are the spec's to decide, so the hook shows the
	// container parameters that do not allow it.
	add("disable-device-node-modification")
	// The driver's application profile limits EGL and Vulkan to the GPUs
	// the container was given, which the hook reads from its devices.
	add("update-application-profile")
	return out
}

// memoryLimitsHook is GPU g's createRuntime hook that applies the CUDA
// memory limits a container asks for (NVIDIA_GPU_MEMORY_REQUEST and
// NVIDIA_GPU_MEMORY_LIMIT) to that GPU, which the hook names by UUID; nil
// where the toolkit lacks the hook or the driver gave the GPU no UUID.
// gpuenv writes the spec of the host it runs on: the driver's root is /.
func memoryLimitsHook(c *facts.Containers, g facts.ContainerGPU) *cdispec.Hook {
	const name = "apply-cuda-memory-limits"
	if c.Toolkit.HookPath == "" || g.UUID == "" || !slices.Contains(c.Toolkit.Hooks, name) {
		return nil
	}
	return &cdispec.Hook{
		HookName: "createRuntime", Path: c.Toolkit.HookPath,
		Args: append(hookArgs(c.Toolkit.HookPath, name), "--driver-root", "/", "--gpu-id", g.UUID),
	}
}

// versionedLibDirs are the directories of the driver's libraries that
// carry its version (lib*.so.<version>), in the package list's order,
// each once: where NVIDIA_CTK_LIBCUDA_DIR says libcuda is.
func versionedLibDirs(c *facts.Containers) []string {
	var out []string
	if c.DriverVersion == "" {
		return nil
	}
	for _, f := range c.DriverFiles {
		b := path.Base(f)
		if strings.HasPrefix(b, "lib") && strings.HasSuffix(b, ".so."+c.DriverVersion) && !slices.Contains(out, path.Dir(f)) {
			out = append(out, path.Dir(f))
		}
	}
	return out
}

// hookArgs starts a hook's argv: nvidia-cdi-hook takes the hook as its
// first argument; nvidia-ctk, before toolkit 1.16, as "hook <name>".
func hookArgs(hookPath, hook string) []string {
	if path.Base(hookPath) == "nvidia-ctk" {
		return []string{"nvidia-ctk", "hook", hook}
	}
	return []string{path.Base(hookPath), hook}
}

// containerPath is where a driver file goes in the container: where it
// is on the host, but for the GSP firmware, which goes under /lib/firmware
// whichever directory its package put it in. /lib/firmware is the
// kernel's firmware search path, read from the opening process's root by
// kernels older than the loader's move to init's mount namespace, and
// where nvidia-ctk and libnvidia-container mount it (the toolkit's
// CHANGELOG, v1.9.0, fixes images whose /lib is no link to /usr/lib).
func containerPath(f string) string {
	if rest, ok := strings.CutPrefix(f, "/usr/lib/firmware/"); ok {
		return "/lib/firmware/" + rest
	}
	return f
}

func isLibrary(p string) bool {
	return strings.Contains(path.Base(p), ".so")
}

// ValidateCDI checks a spec by the CDI project's own rules: its version,
// vendor, class and device names, and each set of container edits.
func ValidateCDI(s *cdispec.Spec) error {
	if err := cdispec.ValidateVersion(s); err != nil {
		return err
	}
	vendor, class := parser.ParseQualifier(s.Kind)
	if err := parser.ValidateVendorName(vendor); err != nil {
		return err
	}
	if err := parser.ValidateClassName(class); err != nil {
		return err
	}
	if err := (&cdi.ContainerEdits{ContainerEdits: &s.ContainerEdits}).Validate(); err != nil {
		return err
	}
	if len(s.Devices) == 0 {
		return errors.New("the spec has no devices")
	}
	seen := map[string]bool{}
	for i := range s.Devices {
		d := &s.Devices[i]
		if err := parser.ValidateDeviceName(d.Name); err != nil {
			return err
		}
		if seen[d.Name] {
			return fmt.Errorf("device %q is declared twice", d.Name)
		}
		seen[d.Name] = true
		if err := (&cdi.ContainerEdits{ContainerEdits: &d.ContainerEdits}).Validate(); err != nil {
			return fmt.Errorf("device %q: %w", d.Name, err)
		}
	}
	return nil
}

// MarshalCDI writes a spec as YAML, the encoding nvidia-ctk writes.
func MarshalCDI(s *cdispec.Spec) (string, error) {
	var b bytes.Buffer
	b.WriteString("# Written by gpuenv from the driver's files; gpuenv rewrites it when the driver changes.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}
