package doctor

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// sessionAssignments are the settings of the user's and the job's own
// environment, after the system's: the shell start-up files, then the
// named process's environment.
func (d *doctor) sessionAssignments() []facts.Assignment {
	out := append([]facts.Assignment{}, d.obs.Session.ShellFiles...)
	if p := d.obs.Session.Process; p != nil {
		out = append(out, p.Variables...)
	}
	return out
}

// stubLibrary judges the driver stubs an LD_LIBRARY_PATH brings within
// the loader's reach. The toolkit's lib64/stubs/libcuda.so exists to link
// against where no driver is installed; at run time every call fails
// with CUDA_ERROR_STUB_LIBRARY ("CUDA driver is a stub library", 34).
// Programs that open libcuda.so by that name (numba, Warp, Triton's
// loader) get it whenever its directory is on LD_LIBRARY_PATH; a
// libcuda.so.1 there shadows the driver's for every CUDA program.
func (d *doctor) stubLibrary() {
	c := Check{ID: "env.stub-libcuda", Group: GroupEnv}
	stubs := d.obs.Session.StubLibraries
	// The loader's own resolution says the same when the stub is what
	// libcuda.so.1 resolves to.
	var resolved []string
	for _, r := range d.obs.Loader.Consumers {
		for _, l := range r.Libraries {
			if (l.Soname == "libcuda.so.1" || l.Soname == "libnvidia-ml.so.1") && (inStubDir(l.Path) || inStubDir(l.Real)) && !slices.Contains(resolved, l.Path) {
				resolved = append(resolved, l.Path)
			}
		}
	}
	if len(stubs) == 0 && len(resolved) == 0 {
		if len(d.assignments("LD_LIBRARY_PATH")) == 0 {
			return
		}
		c.Status, c.Summary = OK, "No LD_LIBRARY_PATH names a driver stub directory"
		d.add(c)
		return
	}
	var dirs, settings []string
	all := false
	conf := false
	for _, s := range stubs {
		e := fmt.Sprintf("%s: LD_LIBRARY_PATH=%s names %s", where(s.Setting), s.Setting.Value, path.Dir(s.Path))
		if strings.HasPrefix(s.Setting.File, "/etc/ld.so.conf") {
			e = fmt.Sprintf("%s names %s for the loader's cache", s.Setting.File, path.Dir(s.Path))
			conf = true
		}
		if s.Real != "" && s.Real != s.Path {
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s (leads to %s), a stub", s.Path, s.Real))
		} else {
			c.Evidence = append(c.Evidence, s.Path+", a stub")
		}
		if !slices.Contains(c.Evidence, e) {
			c.Evidence = append(c.Evidence, e)
		}
		if strings.HasSuffix(s.Path, ".so.1") {
			all = true
		}
		if dir := path.Dir(s.Path); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		if w := where(s.Setting); !slices.Contains(settings, w) {
			settings = append(settings, w)
		}
	}
	for _, p := range resolved {
		all = true
		c.Evidence = append(c.Evidence, "the loader resolves libcuda.so.1 to "+p)
		if dir := path.Dir(p); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	c.Status = Problem
	who := "programs that open libcuda.so by name (numba, Warp, Triton) load the stub and fail"
	if all {
		who = "every CUDA program loads the stub and fails"
	}
	lead := "LD_LIBRARY_PATH puts"
	if conf {
		lead = "The loader's search path puts"
	}
	c.Summary = fmt.Sprintf(lead+" the CUDA toolkit's stub driver library (%s) before the driver's: %s with \"CUDA driver is a stub library\" (CUDA_ERROR_STUB_LIBRARY, 34)", strings.Join(dirs, ", "), who)
	text := fmt.Sprintf("Remove %s from LD_LIBRARY_PATH", strings.Join(dirs, ", "))
	if len(settings) > 0 {
		text += " where it is set (" + strings.Join(settings, ", ") + ")"
	}
	if conf {
		text += " and from the ld.so.conf files that name it, then run ldconfig"
	}
	text += "; the stubs are for linking only: give them to the linker (LIBRARY_PATH, -L) at build time, never to the loader at run time."
	if all {
		text += " Delete any libcuda.so.1 made in a stubs directory."
	}
	c.Fix = &Fix{Text: text}
	if conf {
		c.Fix.Commands = []string{"ldconfig"}
	}
	d.add(c)
}

func inStubDir(p string) bool {
	return strings.Contains(p, "/stubs/")
}

// uuidFirstTorch is the first PyTorch release that reads GPU UUIDs in
// CUDA_VISIBLE_DEVICES. 1.13 began to parse the variable itself (NVML-
// based device count, pytorch/pytorch#84879) and took every entry for an
// ordinal: a GPU-… entry ends the list, and torch.cuda.device_count()
// is 0 (pytorch/pytorch#90543, reported on 1.13.0+cu117; fixed by
// pytorch/pytorch#92315, in 2.0).
var uuidFirstTorch = version.MustParse("2.0")

// visibleDeviceUUIDs judges GPU UUIDs in CUDA_VISIBLE_DEVICES against the
// frameworks that read the variable themselves. Schedulers that hand
// GPUs out by UUID (HTCondor, some Slurm and Kubernetes set-ups) set
// such lists; CUDA itself reads them.
func (d *doctor) visibleDeviceUUIDs() {
	var withUUID []facts.Assignment
	for _, a := range append(d.assignments("CUDA_VISIBLE_DEVICES"), d.teamSettings()...) {
		for _, e := range strings.Split(a.Value, ",") {
			e = strings.ToUpper(strings.TrimSpace(e))
			if strings.HasPrefix(e, "GPU-") || strings.HasPrefix(e, "MIG-") {
				withUUID = append(withUUID, a)
				break
			}
		}
	}
	if len(withUUID) == 0 {
		return
	}
	for _, env := range d.obs.Python {
		for _, fw := range env.Frameworks {
			if fw.Name != "pytorch" {
				continue
			}
			v, err := version.Parse(fw.Version)
			if err != nil || len(v.Parts()) < 2 || v.Major() != 1 || v.Trunc(2).Compare(version.MustParse("1.13")) != 0 {
				continue
			}
			c := Check{ID: "env.visible-devices-uuid:" + FrameworkID(env.Interpreter, fw.Name), Group: GroupEnv}
			for _, a := range withUUID {
				c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA_VISIBLE_DEVICES=%s", where(a), a.Value))
			}
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: PyTorch %s", fw.Location, fw.Version))
			c.Status = Problem
			c.Summary = fmt.Sprintf("CUDA_VISIBLE_DEVICES names GPUs by UUID, which PyTorch %s reads as ordinals: torch.cuda.device_count() is 0 and no GPU is used (pytorch/pytorch#90543)", fw.Version)
			c.Fix = &Fix{Text: fmt.Sprintf("Upgrade PyTorch in %s to %s or newer, which reads GPU UUIDs (pytorch/pytorch#92315); or have the scheduler set CUDA_VISIBLE_DEVICES to GPU indexes (nvidia-smi -L lists each GPU's index beside its UUID).", env.Prefix, uuidFirstTorch)}
			d.add(c)
		}
	}
	d.vllmVisibleUUIDs(withUUID)
}
