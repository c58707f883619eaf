package doctor

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// GroupContext is where programs run, judged before anything else: every
// later finding means something else in a container, a job or WSL.
var GroupContext = Group{Number: 0, Name: "Where programs run"}

// inContainerWithoutGPU reports whether the root is a container that was
// given no GPU: its device nodes and driver libraries are missing, which
// only the container's start can change.
func (d *doctor) inContainerWithoutGPU() bool {
	ct := d.obs.Context.Container
	return ct != nil && !(ct.DeviceNodes && ct.DriverLibraries)
}

// inWSL reports whether the root runs under WSL, where the Windows driver
// serves the GPU through /dev/dxg and no Linux module or PCI device is
// involved.
func (d *doctor) inWSL() bool { return d.obs.Context.WSL != nil }

func contextEvidence(ctx facts.RuntimeContext) []string {
	var out []string
	for _, e := range ctx.Evidence {
		out = append(out, e.File+": "+e.Fact)
	}
	return out
}

func (d *doctor) runtimeContext() {
	ctx := d.obs.Context
	c := Check{ID: "context", Group: GroupContext, Status: OK, Evidence: contextEvidence(ctx)}
	switch {
	case ctx.WSL != nil:
		c.Summary = "WSL: the GPU is the Windows host's, reached through /dev/dxg and the Windows driver's libraries"
	case ctx.Container != nil:
		c.Summary = fmt.Sprintf("A %s container: the kernel and driver are the host's", ctx.Container.Engine)
	case ctx.Kind == "" || ctx.Kind == "host":
		c.Summary = "A host, not a container"
	}
	if ctx.Job != nil {
		c.Summary += fmt.Sprintf(", in Slurm job %s", ctx.Job.ID)
	}
	d.add(c)
	d.containerAccess()
	d.containerCUDA()
	d.userNamespace()
	d.batchJob()
	d.wsl()
	d.suspend()
}

func (d *doctor) containerAccess() {
	ct := d.obs.Context.Container
	if ct == nil {
		return
	}
	c := Check{ID: "context.gpu-access", Group: GroupContext, Evidence: contextEvidence(d.obs.Context)}
	switch {
	case ct.DeviceNodes && ct.DriverLibraries:
		c.Status, c.Summary = OK, "The container was started with the GPUs: device nodes and the driver's libraries are present"
	case ct.DeviceNodes:
		c.Status = Problem
		c.Summary = "The container has the GPU device nodes but not the driver's libraries (libcuda.so.1): it was started without the compute capability"
		c.Fix = &Fix{Text: "Start it with the compute and utility driver capabilities (the NVIDIA Container Toolkit mounts libcuda then):",
			Commands: []string{"docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility IMAGE"}}
	default:
		c.Status = Problem
		c.Summary = "The container was started without GPU access: no /dev/nvidia* device nodes"
		if !ct.DriverLibraries {
			c.Summary += " and no driver libraries"
		}
		c.Summary += "; nothing inside it can change that"
		cmds := []string{"docker run --gpus all IMAGE"}
		text := "Start the container with the GPUs, through the NVIDIA Container Toolkit on the host:"
		switch ct.Engine {
		case "podman":
			cmds = []string{"nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml", "podman run --device nvidia.com/gpu=all IMAGE"}
			text = "Start the container with the GPUs through CDI (on the host, the NVIDIA Container Toolkit writes the CDI specification):"
		case "kubernetes":
			text = "Request GPUs in the pod's container resources (limits: nvidia.com/gpu: 1), served by the NVIDIA device plugin or GPU Operator; with the toolkit's CDI mode: --device nvidia.com/gpu=all."
			cmds = nil
		case "systemd-nspawn":
			// The NVIDIA Container Toolkit has no hook for nspawn: the
			// nodes are bound in and allowed by hand.
			text = "Bind the host's /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidiaN into the container (systemd-nspawn --bind=) and allow them in its device policy (--property=DeviceAllow=), with the host driver's libraries bound in read-only at its version."
			cmds = nil
		}
		c.Fix = &Fix{Text: text, Commands: cmds}
	}
	d.add(c)
}

func (d *doctor) containerCUDA() {
	ct := d.obs.Context.Container
	if ct == nil || ct.CUDAVersion == "" {
		return
	}
	drv, from := d.driverVersion()
	cv, err := version.Parse(ct.CUDAVersion)
	if err != nil || drv.IsZero() || len(cv.Parts()) < 2 {
		return
	}
	c := Check{ID: "context.cuda", Group: GroupContext, Evidence: []string{"the image's CUDA: " + ct.CUDAVersion, fmt.Sprintf("%s: the host's driver %s", from, drv)}}
	if ct.RequireCUDA != "" {
		c.Evidence = append(c.Evidence, "NVIDIA_REQUIRE_CUDA="+ct.RequireCUDA)
	}
	d.judgeCUDA(&c, drv, cv, "The image's CUDA "+ct.CUDAVersion)
	maxCUDA := compat.MaxCUDAForDriver(drv)
	if req, ok := requiredCUDA(ct.RequireCUDA); ok && !maxCUDA.IsZero() && maxCUDA.Compare(req) < 0 {
		// The toolkit enforces the image's requirement before minor-version
		// compatibility could help.
		c.Status = Problem
		c.Summary = fmt.Sprintf("The image requires CUDA %s (NVIDIA_REQUIRE_CUDA) and the host's driver %s runs CUDA %s: the NVIDIA Container Toolkit refuses to start it (\"requirement error: unsatisfied condition: cuda>=%s\")", req, drv, maxCUDA, req)
	}
	if c.Status == Problem {
		text := "The container cannot change the host's driver. Upgrade the driver on the host"
		floor, _, _, err := compat.MinDriverForCUDA(cv)
		if err != nil || floor.IsZero() {
			floor, _, _, err = compat.MinDriverForCUDA(cv.Trunc(2))
		}
		if err == nil && !floor.IsZero() {
			text += " to " + floor.String() + " or newer"
		}
		if !maxCUDA.IsZero() {
			text += fmt.Sprintf(", or use an image of CUDA %s or older (nvidia/cuda:%s.x-…)", maxCUDA.Trunc(2), maxCUDA.Trunc(2))
		}
		c.Fix = &Fix{Text: text + "."}
	}
	d.add(c)
}

func (d *doctor) userNamespace() {
	u := d.obs.Context.UserNamespace
	if u == nil || len(u.UnmappedNodes) == 0 {
		return
	}
	c := Check{ID: "context.user-namespace", Group: GroupContext, Evidence: contextEvidence(d.obs.Context), Status: Problem}
	c.Summary = fmt.Sprintf("%s appear owned by the overflow id %d: the user namespace does not map the host's owner and group, so only the \"others\" permission bits apply", strings.Join(u.UnmappedNodes, ", "), u.OverflowUID)
	c.Fix = &Fix{Text: "Keep the host's supplementary groups in the container (crun), or start it through CDI, or make the nodes world-accessible on the host (NVreg_DeviceFileMode=0666):",
		Commands: []string{"podman run --group-add keep-groups --device nvidia.com/gpu=all IMAGE"}}
	d.add(c)
}

func (d *doctor) batchJob() {
	j := d.obs.Context.Job
	if j == nil {
		return
	}
	c := Check{ID: "context.job", Group: GroupContext, Evidence: contextEvidence(d.obs.Context)}
	switch {
	case len(j.GPUs) > 0 && !j.Constrained:
		c.Status, c.Summary = OK, fmt.Sprintf("Slurm job %s was allocated GPU %s", j.ID, strings.Join(j.GPUs, ","))
	case len(j.GPUs) == 0 && (len(j.NodeGPUs) > 0 || d.hasGPU()):
		c.Status = Problem
		c.Summary = fmt.Sprintf("Slurm job %s runs on a node with GPUs but was allocated none: the job's cgroup hides them (\"no CUDA-capable device is detected\")", j.ID)
		c.Fix = &Fix{Text: "Ask Slurm for GPUs when submitting the job:", Commands: []string{"srun --gres=gpu:1 …", "sbatch --gpus=1 …"}}
	case j.Constrained:
		c.Status = Problem
		c.Summary = fmt.Sprintf("Slurm job %s's device cgroup admits no GPU", j.ID)
		c.Fix = &Fix{Text: "Ask Slurm for GPUs when submitting the job:", Commands: []string{"srun --gres=gpu:1 …"}}
	default:
		c.Status, c.Summary = Skipped, fmt.Sprintf("Slurm job %s: the node shows no GPU", j.ID)
	}
	d.add(c)
}

func (d *doctor) wsl() {
	w := d.obs.Context.WSL
	if w == nil {
		return
	}
	c := Check{ID: "context.wsl", Group: GroupContext, Evidence: contextEvidence(d.obs.Context)}
	switch {
	case !w.DXG:
		c.Status = Problem
		c.Summary = "WSL without /dev/dxg: the Windows GPU is not exposed to this distribution"
		c.Fix = &Fix{Text: "Install the NVIDIA Windows driver (it brings WSL's CUDA support), update WSL and restart it, from Windows:", Commands: []string{"wsl --update", "wsl --shutdown"}}
	case len(w.LinuxDriver) > 0:
		c.Status = Problem
		c.Summary = "A Linux NVIDIA driver is installed inside WSL: its " + strings.Join(w.LinuxDriver, ", ") + " shadows the Windows driver's libcuda in /usr/lib/wsl/lib, and it cannot reach the GPU"
		c.Fix = &Fix{Text: "Remove the Linux driver's packages inside WSL (only the CUDA toolkit belongs there, e.g. cuda-toolkit-12-x, never cuda or cuda-drivers), then rebuild the loader's cache:",
			Commands: []string{"apt-get remove --purge 'libnvidia-compute-*' 'nvidia-driver-*'", "ldconfig"}}
	case len(w.Libraries) == 0:
		c.Status = Problem
		c.Summary = "WSL has /dev/dxg but no libcuda in /usr/lib/wsl/lib: the Windows driver does not provide CUDA to WSL"
		c.Fix = &Fix{Text: "Install a current NVIDIA Windows driver, then restart WSL:", Commands: []string{"wsl --shutdown"}}
	default:
		c.Status, c.Summary = OK, "WSL reaches the GPU through /dev/dxg and the Windows driver's libraries"
	}
	d.add(c)
}

// consumerGPU reports whether the host's GPUs are GeForce or TITAN
// boards, which serve desktops that suspend.
func (d *doctor) consumerGPU() bool {
	for _, g := range d.consumerGPUs() {
		if strings.Contains(g, "GeForce") || strings.Contains(g, "TITAN") || strings.Contains(g, "RTX") && !strings.Contains(g, "RTX A") {
			return true
		}
	}
	return false
}

func (d *doctor) suspend() {
	s := d.obs.Context.Suspend
	if s == nil || !s.CanSuspend || !d.moduleLoaded() || !d.consumerGPU() {
		return
	}
	c := Check{ID: "context.suspend", Group: GroupContext, Evidence: contextEvidence(d.obs.Context)}
	if d.skipLive(c, "The driver's suspend settings and the resumes since boot") {
		return
	}
	if s.PreserveVideoMemory == "1" && len(s.Services) > 0 {
		c.Status, c.Summary = OK, "The driver's suspend support is enabled: CUDA survives suspend and resume"
		d.add(c)
		return
	}
	c.Status = Warning
	c.Summary = "The machine can suspend, but the driver's suspend support is off: after a resume, CUDA programs fail (\"CUDA unknown error\", torch.cuda.is_available() False) until nvidia_uvm is reloaded"
	if s.Resumes > 0 {
		// It has resumed since boot: the failure is now, not at the next
		// suspend.
		c.Status = Problem
		c.Summary = fmt.Sprintf("The machine has resumed from suspend %s since boot with the driver's suspend support off: CUDA programs fail now (\"CUDA unknown error\", torch.cuda.is_available() False) until nvidia_uvm is reloaded", plural(s.Resumes, "time"))
	}
	c.Fix = &Fix{Text: "Enable the driver's video-memory preservation and its suspend services, then rebuild the initramfs and reboot; until then, after a resume, reload nvidia_uvm (rmmod nvidia_uvm && modprobe nvidia_uvm):",
		Commands: []string{"echo 'options nvidia NVreg_PreserveVideoMemoryAllocations=1' > /etc/modprobe.d/nvidia-power-management.conf",
			"systemctl enable nvidia-suspend.service nvidia-hibernate.service nvidia-resume.service", d.initramfsCommand(), "reboot"}}
	d.add(c)
}

// requiredCUDA reads the CUDA floor of an NVIDIA_REQUIRE_CUDA constraint
// ("cuda>=12.8 brand=tesla,driver>=470…"): its first cuda>= clause.
func requiredCUDA(req string) (version.Version, bool) {
	for _, f := range strings.Fields(req) {
		if v, ok := strings.CutPrefix(f, "cuda>="); ok {
			pv, err := version.Parse(v)
			return pv, err == nil
		}
	}
	return version.Version{}, false
}
