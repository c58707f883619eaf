package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

func TestKernelFlavour(t *testing.T) {
	for rel, want := range map[string]string{
		"6.8.0-45-generic":              "generic",
		"6.8.0-1015-aws":                "aws",
		"6.8.0-1017-azure":              "azure",
		"6.8.0-1015-gcp":                "gcp",
		"6.8.0-1009-nvidia":             "nvidia",
		"5.15.0-1063-nvidia-lowlatency": "nvidia-lowlatency",
		"6.8.0-45-lowlatency":           "lowlatency",
		"6.8.0-45-generic-64k":          "generic-64k",
		"":                              "",
	} {
		got, ok := kernelFlavour(rel)
		if got != want || ok != (want != "") {
			t.Errorf("kernelFlavour(%q) = %q, %v; want %q", rel, got, ok, want)
		}
	}
	for _, rel := range []string{"5.14.0-427.13.1.el9_4.x86_64", "6.9.1", "6.8.0-45-Generic"} {
		if f, ok := kernelFlavour(rel); ok {
			t.Errorf("kernelFlavour(%q) = %q; it is not an Ubuntu release", rel, f)
		}
	}
}

// signedArchive is the Ubuntu 22.04 H100 host on kernel 6.8.0-45-generic
// (the HWE kernel, linux-image-generic-hwe-22.04 installed) with
// jammy-updates listing nvidia-driver-550-open and the packages pkgs, each
// at its version.
func signedArchive(pkgs map[string]string) *facts.Observation {
	obs := machine(ubuntu2204, h100)
	obs.Kernel.Release = "6.8.0-45-generic"
	obs.Kernel.Installed = []facts.InstalledKernel{{Release: "6.8.0-45-generic", Running: true}}
	obs.Packages.Packages = []facts.Package{
		{Name: "linux-image-6.8.0-45-generic", Version: "6.8.0-45.45~22.04.1", State: facts.StateInstalled},
		{Name: "linux-image-generic-hwe-22.04", Version: "6.8.0.45.45~22.04.1", State: facts.StateInstalled},
	}
	obs.PackageIndexes = facts.PackageIndexes{
		Manager: "apt",
		Indexes: []facts.PackageIndex{{Path: ixUpdates, Source: facts.IndexSource{URI: "http://archive.ubuntu.com/ubuntu/", Suite: "jammy-updates", Component: "restricted"}, Site: "archive.ubuntu.com",
			Release: &facts.ReleaseData{Origin: "Ubuntu", Label: "Ubuntu", Suite: "jammy-updates", Codename: "jammy"}, Priority: 500, PriorityFrom: "default"}},
	}
	add := func(name, v string) {
		for i := range obs.PackageIndexes.Packages {
			p := &obs.PackageIndexes.Packages[i]
			if p.Name == name {
				p.Versions = append(p.Versions, facts.IndexedVersion{Version: v, Priority: 500, PriorityFrom: "default", Origins: []string{ixUpdates}})
				return
			}
		}
		obs.PackageIndexes.Packages = append(obs.PackageIndexes.Packages, facts.IndexedPackage{Name: name, Versions: []facts.IndexedVersion{{Version: v, Priority: 500, PriorityFrom: "default", Origins: []string{ixUpdates}}}})
	}
	add("nvidia-driver-550-open", "550.120-0ubuntu0.22.04.1")
	for n, v := range pkgs {
		for _, one := range strings.Split(v, " ") {
			add(n, one)
		}
	}
	return obs
}

const signedSpec = "driver {\n  version = \"550.*\"\n  source = \"distro\"\n  kernel_modules = \"open\"\n}\n"

func TestSignedModules(t *testing.T) {
	const rel = "6.8.0-45-generic"
	full := map[string]string{
		"linux-modules-nvidia-550-open-" + rel:              "6.8.0-45.45~22.04.1",
		"linux-objects-nvidia-550-open-" + rel:              "6.8.0-45.45~22.04.1",
		"linux-signatures-nvidia-" + rel:                    "6.8.0-45.45~22.04.1",
		"linux-modules-nvidia-550-open-generic-hwe-22.04":   "6.8.0-45.45~22.04.1",
		"linux-modules-nvidia-550-open-generic":             "5.15.0-105.115",
		"linux-modules-nvidia-550-server-open-" + rel:       "6.8.0-45.45~22.04.1",
		"linux-modules-nvidia-550-open-6.8.0-40-generic":    "6.8.0-40.40~22.04.3",
		"linux-modules-nvidia-550-open-5.15.0-105-generic":  "5.15.0-105.115",
		"linux-signatures-nvidia-5.15.0-105-generic":        "5.15.0-105.115",
		"linux-objects-nvidia-550-open-5.15.0-105-generic":  "5.15.0-105.115",
		"linux-modules-nvidia-550-open-generic-hwe-22.04-x": "6.8.0-45.45~22.04.1",
	}
	t.Run("the running kernel's, its companions and the HWE meta", func(t *testing.T) {
		obs := signedArchive(full)
		d, diags := Resolve(loadSpec(t, signedSpec), obs)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		want := &SignedModules{
			Series: "550-open",
			Kernels: []SignedKernel{{Release: rel, Packages: []SignedPackage{
				{"linux-modules-nvidia-550-open-" + rel, "6.8.0-45.45~22.04.1"},
				{"linux-objects-nvidia-550-open-" + rel, "6.8.0-45.45~22.04.1"},
				{"linux-signatures-nvidia-" + rel, "6.8.0-45.45~22.04.1"},
			}}},
			Meta:       SignedPackage{"linux-modules-nvidia-550-open-generic-hwe-22.04", "6.8.0-45.45~22.04.1"},
			KernelMeta: "linux-image-generic-hwe-22.04",
		}
		if diff := cmp.Diff(want, d.Driver.Signed); diff != "" {
			t.Errorf("signed modules (-want +got):\n%s", diff)
		}
		if got := d.Driver.ModulesWhy; got != "Ubuntu's signed modules for 6.8.0-45-generic: no build, no MOK" {
			t.Errorf("why = %q", got)
		}
	})

	t.Run("each installed kernel the archive has them for", func(t *testing.T) {
		obs := signedArchive(full)
		obs.Kernel.Installed = append(obs.Kernel.Installed, facts.InstalledKernel{Release: "5.15.0-105-generic"}, facts.InstalledKernel{Release: "5.15.0-99-generic"})
		d, _ := Resolve(loadSpec(t, signedSpec), obs)
		var got []string
		for _, k := range d.Driver.Signed.Kernels {
			got = append(got, k.Release)
		}
		if diff := cmp.Diff([]string{rel, "5.15.0-105-generic"}, got); diff != "" {
			t.Errorf("kernels (-want +got):\n%s", diff)
		}
	})

	t.Run("a disk image's newest kernel", func(t *testing.T) {
		obs := signedArchive(full)
		obs.Kernel.Release = ""
		obs.Kernel.Installed = []facts.InstalledKernel{{Release: "6.8.0-40-generic"}, {Release: "6.8.0-45-generic"}, {Release: "5.15.0-105-generic"}}
		d, _ := Resolve(loadSpec(t, signedSpec), obs)
		s := d.Driver.Signed
		if s == nil || len(s.Kernels) != 3 || s.Kernels[0].Release != rel {
			t.Fatalf("signed = %+v; want the newest kernel, %s, first of three", s, rel)
		}
	})

	for _, c := range []struct {
		name string
		obs  func() *facts.Observation
		spec string
		why  string // "" when the choice does not arise
	}{
		{name: "no module package for the running kernel", obs: func() *facts.Observation {
			return signedArchive(map[string]string{"linux-modules-nvidia-550-open-6.8.0-40-generic": "6.8.0-40.40~22.04.3"})
		}, spec: signedSpec, why: "no linux-modules-nvidia-550-open-6.8.0-45-generic in Ubuntu 22.04's archive (jammy-updates): DKMS builds the module"},
		{name: "companions only at another version", obs: func() *facts.Observation {
			return signedArchive(map[string]string{
				"linux-modules-nvidia-550-open-" + rel: "6.8.0-45.45~22.04.1",
				"linux-signatures-nvidia-" + rel:       "6.8.0-45.44~22.04.1",
			})
		}, spec: signedSpec, why: "no linux-modules-nvidia-550-open-6.8.0-45-generic in Ubuntu 22.04's archive (jammy-updates): DKMS builds the module"},
		{name: "lists not fetched", obs: func() *facts.Observation {
			obs := signedArchive(full)
			obs.PackageIndexes.Missing = []facts.IndexSource{{File: "/etc/apt/sources.list", URI: "http://security.ubuntu.com/ubuntu/", Suite: "jammy-security", Component: "restricted"}}
			return obs
		}, spec: signedSpec, why: "whether Ubuntu 22.04's archive has linux-modules-nvidia-550-open-6.8.0-45-generic is known only once apt-get update has fetched its lists: DKMS builds the module"},
		{name: "a kernel not of Ubuntu's form", obs: func() *facts.Observation {
			obs := signedArchive(full)
			obs.Kernel.Release = "6.9.1-custom+"
			return obs
		}, spec: signedSpec, why: "kernel 6.9.1-custom+ is not one of Ubuntu's, for which the archive builds signed modules: DKMS builds the module"},
		{name: "the user space only", obs: func() *facts.Observation { return signedArchive(full) },
			spec: "driver {\n  version = \"550.*\"\n  source = \"distro\"\n  kernel_modules = \"none\"\n}\n"},
		{name: "Debian", obs: func() *facts.Observation {
			obs := signedArchive(full)
			obs.OS = facts.OS{ID: "debian", VersionID: "12", Codename: "bookworm", Family: "deb"}
			return obs
		}, spec: "driver {\n  source = \"distro\"\n}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, _ := Resolve(loadSpec(t, c.spec), c.obs())
			if d.Driver == nil {
				t.Fatal("no driver resolved")
			}
			if d.Driver.Signed != nil {
				t.Errorf("signed modules chosen: %+v", d.Driver.Signed)
			}
			if d.Driver.ModulesWhy != c.why {
				t.Errorf("why = %q\nwant %q", d.Driver.ModulesWhy, c.why)
			}
		})
	}
}

func TestSignedMetaFollowsKernelMeta(t *testing.T) {
	const rel = "6.8.0-45-generic"
	pkgs := map[string]string{
		"linux-modules-nvidia-550-open-" + rel:            "6.8.0-45.45",
		"linux-modules-nvidia-550-open-generic":           "6.8.0-45.45",
		"linux-modules-nvidia-550-open-generic-hwe-22.04": "6.8.0-45.45",
	}
	for _, c := range []struct {
		name      string
		installed []string
		meta      string
		kernel    string
	}{
		{"GA kernel meta", []string{"linux-image-generic"}, "linux-modules-nvidia-550-open-generic", "linux-image-generic"},
		{"HWE kernel meta", []string{"linux-image-generic-hwe-22.04"}, "linux-modules-nvidia-550-open-generic-hwe-22.04", "linux-image-generic-hwe-22.04"},
		// Another flavour's meta is not this kernel's.
		{"no meta installed", []string{"linux-image-generic-64k"}, "linux-modules-nvidia-550-open-generic", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := signedArchive(pkgs)
			obs.Packages.Packages = nil
			for _, n := range c.installed {
				obs.Packages.Packages = append(obs.Packages.Packages, facts.Package{Name: n, Version: "1", State: facts.StateInstalled})
			}
			d, _ := Resolve(loadSpec(t, signedSpec), obs)
			s := d.Driver.Signed
			if s == nil || s.Meta.Name != c.meta || s.KernelMeta != c.kernel {
				t.Errorf("signed = %+v; want meta %s following %q", s, c.meta, c.kernel)
			}
		})
	}
}

// signedPlan is a plan whose driver step installs Ubuntu's signed modules
// beside the driver, each at its own version, as the driver provider
// makes it.
func signedPlan() *plan.Plan {
	const mod, sig, meta = "linux-modules-nvidia-550-open-6.8.0-45-generic", "linux-signatures-nvidia-6.8.0-45-generic", "linux-modules-nvidia-550-open-generic"
	steps := []plan.Step{{Address: "driver", Action: plan.Create,
		After: map[string]string{"version": "550.120-0ubuntu0.22.04.1", "packages": "nvidia-driver-550-open",
			plan.AfterSignedModules: ShownPins([]SignedPackage{{mod, "6.8.0-45.45"}, {sig, "6.8.0-45.45"}, {meta, "6.8.0-45.45"}})},
		Operations: []plan.Operation{aptOp("nvidia-driver-550-open", "550.120-0ubuntu0.22.04.1", mod, "6.8.0-45.45", sig, "6.8.0-45.45", meta, "6.8.0-45.45")}}}
	p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: steps}
	p.Transactions = Batch(p.Steps)
	return p
}

// TestValidateSignedModules: a saved plan's signed module packages are
// installed at the versions its driver step shows, and no others.
func TestValidateSignedModules(t *testing.T) {
	pins := func(p *plan.Plan) []plan.PackagePin { return p.Steps[0].Operations[0].Packages.Install }
	edit := func(change func(pins []plan.PackagePin)) func(p *plan.Plan) {
		return func(p *plan.Plan) {
			change(pins(p))
			change(p.Transactions[0].Op.Install)
		}
	}
	checkRefused(t, signedPlan, "the signed plan as made", []planEdit{
		{"another version of a signed package", edit(func(in []plan.PackagePin) { in[2].Version = "6.8.0-45.44" }),
			"it shows linux-signatures-nvidia-6.8.0-45-generic=6.8.0-45.45 but installs linux-signatures-nvidia-6.8.0-45-generic 6.8.0-45.44"},
		{"a signed package shown and not installed", edit(func(in []plan.PackagePin) {
			in[3] = plan.PackagePin{Name: "nvidia-utils-550", Version: "550.120-0ubuntu0.22.04.1"}
		}),
			"it shows the signed module packages linux-modules-nvidia-550-open-generic but does not install them"},
		{"a package at its own version, not shown", func(p *plan.Plan) {
			p.Steps[0].After[plan.AfterSignedModules] = ShownPins([]SignedPackage{{"linux-modules-nvidia-550-open-6.8.0-45-generic", "6.8.0-45.45"}, {"linux-signatures-nvidia-6.8.0-45-generic", "6.8.0-45.45"}})
		}, "it shows version 550.120-0ubuntu0.22.04.1 but installs linux-modules-nvidia-550-open-generic 6.8.0-45.45"},
		{"not a list of name=version", func(p *plan.Plan) {
			p.Steps[0].After[plan.AfterSignedModules] = "linux-modules-nvidia-550-open-generic"
		},
			"which is not a list of name=version"},
	})
}

// BenchmarkResolveSignedModules resolves a driver from Ubuntu's archive
// whose indexes have the signed modules of the running kernel and of two
// more installed kernels, against the same archive without them (DKMS).
func BenchmarkResolveSignedModules(b *testing.B) {
	const rel = "6.8.0-45-generic"
	pkgs := map[string]string{}
	for _, r := range []string{rel, "6.8.0-40-generic", "5.15.0-105-generic"} {
		pkgs["linux-modules-nvidia-550-open-"+r] = "1"
		pkgs["linux-objects-nvidia-550-open-"+r] = "1"
		pkgs["linux-signatures-nvidia-"+r] = "1"
	}
	pkgs["linux-modules-nvidia-550-open-generic-hwe-22.04"] = "1"
	s := loadSpec(b, signedSpec)
	for _, c := range []struct {
		name string
		pkgs map[string]string
	}{{"signed", pkgs}, {"dkms", nil}} {
		b.Run(c.name, func(b *testing.B) {
			obs := signedArchive(c.pkgs)
			obs.Kernel.Installed = append(obs.Kernel.Installed, facts.InstalledKernel{Release: "6.8.0-40-generic"}, facts.InstalledKernel{Release: "5.15.0-105-generic"})
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := Resolve(s, obs); (d.Driver.Signed != nil) != (c.pkgs != nil) {
					b.Fatal("wrong choice")
				}
			}
		})
	}
}
