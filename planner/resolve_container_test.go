package planner

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// TestChrootPlansNoKernel: an image being built in a chroot (gpuenv runs
// with root "/" and process 1's root is another directory, or no /proc
// is mounted) gets no kernel-side step, says once why, and refuses a
// spec that asks for kernel work, unless the root will boot.
func TestChrootPlansNoKernel(t *testing.T) {
	const rel = "6.8.0-45-generic"
	lrm := map[string]string{"linux-modules-nvidia-550-open-" + rel: "6.8.0-45.45"}
	chroot := func(state string) (*Desired, hcl.Diagnostics) {
		obs := signedArchive(lrm)
		obs.Init.Live, obs.Init.Chroot = true, state
		return Resolve(loadSpec(t, "driver {\n  version = \"550.*\"\n  source = \"distro\"\n}\n"), obs)
	}

	d, diags := chroot("yes")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if d.NoKernel != chrootReason || !d.Driver.FromHost || d.Driver.Signed != nil {
		t.Errorf("in a chroot: NoKernel %q, driver from the host %v, signed %+v", d.NoKernel, d.Driver.FromHost, d.Driver.Signed)
	}
	w := noKernelWarning(d)
	if w == nil || !strings.Contains(w.Summary, "the root is a chroot's, as an image being built is") || !strings.Contains(w.Detail, "--root-boots") {
		t.Errorf("warning %+v", w)
	}

	// Where root may not look at process 1's root, nothing is assumed.
	if d, _ := chroot("unknown"); d.NoKernel != "" {
		t.Errorf("chroot unknown: NoKernel %q", d.NoKernel)
	}

	// A spec that asks for a module in a chroot is refused with the reason.
	obs := signedArchive(lrm)
	obs.Init.Live, obs.Init.Chroot = true, "yes"
	_, diags = Resolve(loadSpec(t, signedSpec), obs)
	if !diags.HasErrors() || diags[0].Summary != "Kernel-side setting in a chroot" || !strings.Contains(diags[0].Detail, "kernel_modules = \"open\" asks for the open kernel module, and the root is a chroot's") {
		t.Errorf("kernel_modules in a chroot: %v", diags)
	}

	// A root that will boot gets its kernel-side steps: here Ubuntu's
	// signed modules.
	d, diags = ResolveBootingRoot(loadSpec(t, signedSpec), obs)
	if diags.HasErrors() || d.NoKernel != "" || d.Driver.Signed == nil {
		t.Errorf("--root-boots in a chroot: NoKernel %q, signed %+v, %v", d.NoKernel, d.Driver.Signed, diags)
	}
}
