package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// Names of the planner's own checks (Warning.Check).
const (
	CheckSecureBootDKMS     = "secure-boot-dkms"
	CheckUnfinishedApply    = "unfinished-apply"
	CheckUnattendedUpgrades = "unattended-upgrades"
	CheckGPUProcesses       = "gpu-processes"
)

// checkInput is what the checks look at: the host, the spec, the ordered
// steps and the state directory's status.
type checkInput struct {
	spec       *spec.Spec
	obs        *facts.Observation
	steps      []plan.Step
	status     *plan.ApplyStatus
	statusPath string
	// noKernel is Desired.NoKernel: the root's kernel module is the
	// host's.
	noKernel string
}

// checks are the warnings a user needs that no single resource asks for,
// in the order they are shown.
var checks = []func(*checkInput) *finding.Finding{
	checkUnfinishedApply,
	checkSecureBootDKMS,
	checkGPUProcesses,
	checkUnattendedUpgrades,
}

func runChecks(in *checkInput) []finding.Finding {
	var out []finding.Finding
	for _, c := range checks {
		if w := c(in); w != nil {
			out = append(out, *w)
		}
	}
	return out
}

func checkUnfinishedApply(in *checkInput) *finding.Finding {
	st := in.status
	if st == nil || !st.Unfinished {
		return nil
	}
	kind := string(st.Kind)
	if kind == "" {
		kind = string(plan.KindApply)
	}
	ev := fmt.Sprintf("%s: generation %d (%s) is unfinished", in.statusPath, st.Generation, kind)
	var more []string
	if c := st.Command; c != "" {
		if !strings.HasPrefix(c, "gpuenv ") {
			c = "gpuenv " + c
		}
		more = append(more, c)
	}
	if st.PID != 0 {
		more = append(more, fmt.Sprintf("pid %d", st.PID))
	}
	if !st.Started.IsZero() {
		more = append(more, "started "+st.Started.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if len(more) > 0 {
		ev += ": " + strings.Join(more, ", ")
	}
	return &finding.Finding{
		ID:      CheckUnfinishedApply,
		Summary: "An earlier " + kind + " did not finish",
		Detail: fmt.Sprintf("Generation %d stopped before it finished, and the host may be between two states. "+
			"gpuenv apply refuses to run until it is dealt with: run gpuenv rollback to finish reverting it, "+
			"then plan again.", st.Generation),
		Evidence: []string{ev},
	}
}

// dkmsBuilder returns the first step that builds a kernel module with
// DKMS, and the package that does it when a pin says.
func dkmsBuilder(steps []plan.Step) (string, string, bool) {
	for _, s := range steps {
		for _, op := range s.Operations {
			if op.Packages == nil {
				continue
			}
			for _, p := range op.Packages.Install {
				if strings.Contains(p.Name, "dkms") {
					return s.Address, p.Name, true
				}
			}
		}
		if s.Flags.BuildsKernelModule {
			return s.Address, "", true
		}
	}
	return "", "", false
}

func checkSecureBootDKMS(in *checkInput) *finding.Finding {
	if in.obs.Kernel.SecureBoot != "enabled" {
		return nil
	}
	addr, pkg, ok := dkmsBuilder(in.steps)
	if !ok {
		return nil
	}
	how := "step " + addr + " builds the nvidia module with DKMS"
	if pkg != "" {
		how += " (" + pkg + ")"
	}
	return &finding.Finding{
		ID:      CheckSecureBootDKMS,
		Summary: "Secure Boot is enabled and the driver's module will be built by DKMS",
		Detail: "With Secure Boot on, the kernel loads only modules signed by a key it trusts. DKMS signs the " +
			"module with its own key (/var/lib/dkms/mok.pub), which must be enrolled with mokutil --import " +
			"and confirmed at the next boot; until then the module is rejected (\"Key was rejected by service\") " +
			"and no GPU is usable.",
		Evidence: []string{"EFI variable SecureBoot: enabled", how},
	}
}

// gpuProcesses lists the running GPU processes as evidence lines.
func gpuProcesses(obs *facts.Observation) []string {
	var out []string
	for _, d := range obs.NVML.Devices {
		for _, p := range d.Processes {
			name := p.Name
			if name == "" {
				name = "?"
			}
			out = append(out, fmt.Sprintf("GPU %d (%s): pid %d %s, %s", d.Index, d.UUID, p.PID, name, bytesText(p.UsedMemory)))
		}
	}
	return out
}

func bytesText(n uint64) string {
	const mib = 1 << 20
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n/mib)
}

func checkGPUProcesses(in *checkInput) *finding.Finding {
	procs := gpuProcesses(in.obs)
	if len(procs) == 0 {
		return nil
	}
	var addrs []string
	for _, s := range in.steps {
		if s.Flags.InterruptsGPUProcesses {
			addrs = append(addrs, s.Address)
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	return &finding.Finding{
		ID:      CheckGPUProcesses,
		Summary: "Applying this plan interrupts running GPU processes",
		Detail: fmt.Sprintf("%s must unload the nvidia modules, which stops every process using a GPU. "+
			"Stop them first, or apply when they are done.", strings.Join(addrs, ", ")),
		Evidence: procs,
	}
}

// isDriverPackage reports whether name is part of the NVIDIA driver (its
// kernel module or userspace), which must move together with the loaded
// module: unlike the toolkit or cuDNN, an unplanned upgrade of one breaks
// every GPU program until a reboot.
func isDriverPackage(name string) bool {
	for _, p := range []string{"nvidia-cuda-", "nvidia-container-", "nvidia-cudnn", "nvidia-settings", "nvidia-prime"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	if strings.HasPrefix(name, "linux-modules-nvidia-") && !kernelReleaseIn.MatchString(name) {
		// Ubuntu's meta package of the signed modules follows the kernel
		// meta package: its upgrade brings a new kernel's modules and
		// leaves the running kernel's alone.
		return false
	}
	for _, p := range []string{"nvidia-", "libnvidia-", "cuda-drivers", "kmod-nvidia", "linux-modules-nvidia", "linux-objects-nvidia", "linux-signatures-nvidia", "xserver-xorg-video-nvidia", "libcuda1", "libnvcuvid1", "libnvoptix1"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// kernelReleaseIn matches a package name that carries a kernel release
// ("linux-modules-nvidia-550-open-6.8.0-45-generic").
var kernelReleaseIn = lazyregexp.New(`-[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-`)

// autoUpgraders are the packages that upgrade other packages unattended.
var autoUpgraders = []string{"unattended-upgrades", "dnf-automatic"}

func checkUnattendedUpgrades(in *checkInput) *finding.Finding {
	var upgrader *facts.Package
	for i, p := range in.obs.Packages.Packages {
		if slices.Contains(autoUpgraders, p.Name) && p.State == facts.StateInstalled && p.Want != "deinstall" && p.Want != "purge" {
			upgrader = &in.obs.Packages.Packages[i]
			break
		}
	}
	if upgrader == nil || in.noKernel != "" {
		// In a container no module of the root's own is loaded for an
		// upgrade to leave behind: the host's is, with its libraries.
		return nil
	}
	// The driver packages as they will be after the plan: installed ones
	// not removed, plus those installed; held when held now or by the
	// plan, unless the plan releases them.
	held := map[string]bool{}
	present := map[string]bool{}
	for _, p := range in.obs.Packages.Packages {
		if isDriverPackage(p.Name) && (p.State == facts.StateInstalled || p.State == facts.StateHalfConfigured || p.State == facts.StateUnpacked) {
			present[p.Name] = true
			held[p.Name] = p.Hold || p.Want == "hold"
		}
	}
	for _, s := range in.steps {
		for _, op := range s.Operations {
			po := op.Packages
			if po == nil || plan.Manager(po.Manager) == plan.ManagerPip {
				continue
			}
			for _, n := range po.Remove {
				delete(present, n)
			}
			for _, p := range po.Install {
				if isDriverPackage(p.Name) {
					present[p.Name] = true
				}
			}
			for _, n := range po.Hold {
				held[n] = true
			}
			for _, n := range po.Unhold {
				held[n] = false
			}
		}
	}
	var unheld []string
	for n := range present {
		if !held[n] {
			unheld = append(unheld, n)
		}
	}
	if len(unheld) == 0 {
		return nil
	}
	slices.Sort(unheld)
	const shown = 6
	list := strings.Join(unheld, ", ")
	if len(unheld) > shown {
		list = strings.Join(unheld[:shown], ", ") + fmt.Sprintf(" and %d more", len(unheld)-shown)
	}
	return &finding.Finding{
		ID:      CheckUnattendedUpgrades,
		Summary: "Unattended upgrades can move the driver",
		Detail: upgrader.Name + " may upgrade driver packages that are not held while the old kernel module stays " +
			"loaded, and GPU programs then fail with \"Driver/library version mismatch\" until a reboot. " +
			"Set hold = true in the driver block to hold them.",
		Evidence: []string{
			fmt.Sprintf("%s %s is installed", upgrader.Name, upgrader.Version),
			"not held after this plan: " + list,
		},
	}
}

// rangeText writes a spec range as file:line, the way evidence cites it.
func rangeText(r hcl.Range) string {
	if r.Filename == "" {
		return "the spec"
	}
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}
