// Package kernel plans what the kernel needs for the NVIDIA driver:
// nouveau blacklisted and kept out of the initramfs ("kernel.nouveau"),
// and the running kernel's headers for DKMS to build the module
// ("kernel.headers"). What it observes comes from the driver's
// observation (facts.Kernel).
package kernel

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgkit"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// BlacklistFile is gpuenv's modprobe configuration for nouveau.
const BlacklistFile = "/etc/modprobe.d/gpuenv-blacklist-nouveau.conf"

// BlacklistContent keeps nouveau from binding NVIDIA GPUs: blacklist stops
// loading by alias, and modeset=0 keeps a nouveau loaded by hand from
// taking the console.
const BlacklistContent = `# Written by gpuenv: nouveau must not claim NVIDIA GPUs, so that the
# nvidia module can. The initramfs is rebuilt after this file changes.
blacklist nouveau
options nouveau modeset=0
`

// Provider plans kernel.nouveau and kernel.headers.
type Provider struct{}

var _ kind.Planner = Provider{}

// Plan compares the blacklist and headers the driver needs with the
// kernel's observed state.
func (Provider) Plan(ctx context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil || req.Desired.Driver == nil || req.Desired.NoKernel != "" {
		// A container's root has the host's kernel: the plan says once
		// why nothing is planned for it (planner.Desired.NoKernel).
		return resp
	}
	d := req.Desired.Driver
	if s := nouveauStep(req.Facts, d); s != nil {
		resp.Steps = append(resp.Steps, *s)
	}
	if s, w := headersStep(ctx, req); s != nil {
		resp.Steps = append(resp.Steps, *s)
	} else if w != nil {
		resp.Warnings = append(resp.Warnings, *w)
	}
	return resp
}

// nouveauBlacklists are the entries that keep nouveau from loading.
func nouveauBlacklists(obs *facts.Observation) []facts.Blacklist {
	var out []facts.Blacklist
	for _, b := range obs.Kernel.Blacklists {
		if b.Module == "nouveau" {
			out = append(out, b)
		}
	}
	return out
}

// nouveauStep blacklists nouveau when blacklist_nouveau = true, and takes
// gpuenv's blacklist away when it is false.
func nouveauStep(obs *facts.Observation, d *planner.DesiredDriver) *plan.Step {
	b := d.Block
	if b == nil || !b.BlacklistNouveau.Set || d.Absent {
		return nil
	}
	rebuild := plan.Operation{Kind: plan.OpKernel, Kernel: &plan.KernelOp{Action: plan.KernelRebuildInitramfs}}
	lists := nouveauBlacklists(obs)
	ours := slices.ContainsFunc(lists, func(l facts.Blacklist) bool { return l.File == BlacklistFile })
	if !d.BlacklistNouveau {
		if !ours {
			return nil
		}
		return &plan.Step{
			Address:    "kernel.nouveau",
			Action:     plan.Delete,
			Before:     map[string]string{"blacklist": BlacklistFile},
			Reason:     "blacklist_nouveau = false removes gpuenv's nouveau blacklist and rebuilds the initramfs without it.",
			ReasonCode: plan.ReasonNotRequested,
			Operations: []plan.Operation{{Kind: plan.OpFile, File: &plan.FileOp{Path: BlacklistFile, Remove: true}}, rebuild},
			Flags:      plan.Flags{NeedsReboot: true},
		}
	}
	loaded := doctor.NouveauLoaded(obs)
	if len(lists) > 0 {
		// A blacklist exists (the driver package often brings one); it
		// works at boot only once the initramfs holds it.
		stale := doctor.StaleNouveauBlacklist(obs)
		if stale == nil {
			return nil
		}
		return &plan.Step{
			Address: "kernel.nouveau",
			Action:  plan.Update,
			Before:  map[string]string{"blacklist": stale.File, "initramfs": "older than the blacklist"},
			After:   map[string]string{"blacklist": stale.File, "initramfs": "rebuilt"},
			Reason: fmt.Sprintf("%s blacklists nouveau but is newer than the initramfs %s, which still loads nouveau at boot; the initramfs is rebuilt.",
				stale.File, obs.Kernel.Initramfs.Path),
			ReasonCode: plan.ReasonStaleInitramfs,
			Operations: []plan.Operation{rebuild},
			Flags:      plan.Flags{NeedsReboot: loaded},
		}
	}
	reason := "blacklist_nouveau = true and nothing blacklists nouveau: " + BlacklistFile + " blacklists it and the initramfs is rebuilt so that it holds the blacklist at boot."
	if loaded {
		reason += " nouveau is loaded now, so the change takes effect at the next boot."
	}
	return &plan.Step{
		Address:    "kernel.nouveau",
		Action:     plan.Create,
		After:      map[string]string{"blacklist": BlacklistFile},
		Reason:     reason,
		ReasonCode: plan.ReasonMissing,
		Operations: []plan.Operation{
			{Kind: plan.OpFile, File: &plan.FileOp{Path: BlacklistFile, Content: BlacklistContent, Mode: 0o644}},
			rebuild,
		},
		Flags: plan.Flags{NeedsReboot: true},
	}
}

// kernelRelease is what a headers package name may contain.
var kernelRelease = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// headersPackage names the headers package of a kernel release.
func headersPackage(obs *facts.Observation, release string) string {
	if obs.OS.Family == "rpm" {
		return "kernel-devel-" + release
	}
	return "linux-headers-" + release
}

// headersStep installs the running kernel's headers when a DKMS-built
// module will be installed and they are missing; none for Ubuntu's signed
// prebuilt modules (planner.DesiredDriver.Signed).
func headersStep(ctx context.Context, req *planner.Request) (*plan.Step, *finding.Finding) {
	d := req.Desired.Driver
	obs := req.Facts
	if d.Absent || d.KernelModules == spec.KernelModulesNone || req.Desired.Manager == "" || d.Signed != nil {
		// Ubuntu's signed modules come built for the kernel: nothing
		// is compiled against its headers.
		return nil, nil
	}
	release := obs.Kernel.Release
	if release == "" || !kernelRelease.MatchString(release) {
		return nil, nil
	}
	for _, k := range obs.Kernel.Installed {
		if k.Release == release && k.Headers {
			return nil, nil
		}
	}
	name := headersPackage(obs, release)
	manager := req.Desired.Manager
	pkgs := []planner.PackageName{{Name: name}}
	picked, err := pkgkit.Pick(ctx, req.Candidates, pkgkit.PickQuery{Manager: manager, Packages: pkgs})
	if err != nil {
		return nil, &finding.Finding{
			Summary:  "Kernel headers for the running kernel are missing",
			Detail:   fmt.Sprintf("DKMS needs the headers of kernel %s to build the nvidia module, and %s cannot be planned: %v. Install them before applying, or boot a kernel whose headers are installed.", release, name, err),
			Evidence: []string{fmt.Sprintf("/lib/modules/%s/build does not lead to a directory", release)},
		}
	}
	return &plan.Step{
		Address:    "kernel.headers",
		Action:     plan.Create,
		After:      map[string]string{"package": name, "version": picked.Version},
		Reason:     fmt.Sprintf("DKMS builds the nvidia module against the running kernel's headers, which are not installed (/lib/modules/%s/build): installs %s %s.", release, name, picked.Version),
		ReasonCode: plan.ReasonDependency,
		Operations: []plan.Operation{{Kind: plan.OpPackages, Packages: picked.Install(manager, pkgs)}},
		DependsOn:  pkgkit.Deps(req),
	}, nil
}
