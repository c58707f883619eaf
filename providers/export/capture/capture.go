// Package capture writes a spec that describes a host as observed: the
// driver, CUDA toolkit, cuDNN, frameworks with their interpreters, GPU
// groups and environment, so that a working machine can be reproduced on
// a fresh one. It captures only what gpuenv manages as observed, so that
// planning the captured spec against the same host finds nothing to do;
// what it sees but cannot manage that way (a driver installed without a
// package, variables set outside gpuenv's files) becomes a comment.
package capture

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/driver"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// driverTopLevel matches the packages that pull in a whole driver; one of
// them installed means the driver is a package gpuenv can manage.
var driverTopLevel = lazyregexp.New(`^(nvidia-driver(-[0-9]+)?(-server)?(-open)?|nvidia-driver-[0-9]+-server-open|cuda-drivers(-[0-9]+)?|nvidia-open(-[0-9]+)?|nvidia-kernel-dkms|nvidia-open-kernel-dkms|nvidia-dkms-[0-9]+(-server)?(-open)?|nvidia-tesla(-[0-9]+)?-driver|kmod-nvidia.*)$`)

// nvidiaRepoDriver matches driver packages only NVIDIA's repository ships.
var nvidiaRepoDriver = lazyregexp.New(`^(cuda-drivers(-[0-9]+)?|nvidia-open(-[0-9]+)?)$`)

// Spec returns the captured spec as formatted HCL.
func Spec(obs *facts.Observation) []byte {
	w := &writer{f: hclwrite.NewEmptyFile()}
	w.comment("Captured by gpuenv init: this host's GPU stack as it was observed, with the " +
		"package repositories beyond the distribution's archive that it came from. gpuenv plan " +
		"against the same host shows no changes. On a fresh host of the same OS and release it " +
		"installs the same versions, once each repository's keyring is in place as its comment " +
		"says. Review it before applying it elsewhere.")
	w.repositories(obs)
	w.driver(obs)
	w.cuda(obs)
	w.cudnn(obs)
	w.frameworks(obs)
	w.containerToolkit(obs)
	w.devices(obs)
	w.groups(obs)
	w.environment(obs)
	w.teams(obs)
	return hclwrite.Format(w.f.Bytes())
}

type writer struct {
	f *hclwrite.File
	// written is true once anything was written, after which a blank
	// line separates what follows.
	written bool
}

// commentWidth is where comment text wraps.
const commentWidth = 76

// comment writes a comment, one paragraph per argument, wrapped; a
// paragraph starting with spaces is written as it is. A blank line
// separates it from what came before.
func (w *writer) comment(paragraphs ...string) {
	body := w.f.Body()
	if w.written {
		body.AppendNewline()
	}
	w.written = true
	for _, p := range paragraphs {
		for _, l := range wrap(p) {
			body.AppendUnstructuredTokens(hclwrite.Tokens{
				{Type: hclsyntax.TokenComment, Bytes: []byte(strings.TrimRight("# "+l, " ") + "\n")},
			})
		}
	}
}

func wrap(p string) []string {
	if strings.HasPrefix(p, " ") {
		return []string{p}
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(p) {
		if line != "" && len(line)+1+len(word) > commentWidth {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

// block starts a block, after the comment lines given.
func (w *writer) block(typ string, labels []string, comment ...string) *hclwrite.Body {
	if len(comment) > 0 {
		w.comment(comment...)
	} else if w.written {
		w.f.Body().AppendNewline()
	}
	w.written = true
	return w.f.Body().AppendNewBlock(typ, labels).Body()
}

func (w *writer) driver(obs *facts.Observation) {
	drv, _ := doctor.DriverVersion(obs)
	v := drv.String()
	if v == "" {
		return
	}
	var top, held, origins []string
	nvidiaOnly := false
	for _, p := range obs.Packages.Packages {
		if p.State != facts.StateInstalled || !driverTopLevel.MatchString(p.Name) {
			continue
		}
		top = append(top, p.Name)
		if o := origin(obs, p.Name); o != "" && !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
		if nvidiaRepoDriver.MatchString(p.Name) {
			nvidiaOnly = true
		}
		if p.Hold || p.Want == "hold" {
			held = append(held, p.Name)
		}
	}
	if len(origins) == 0 {
		// No index lists the installed versions: the packages' names
		// tell where only NVIDIA's repository ships one of them.
		origins = []string{map[bool]string{true: "nvidia", false: "distro"}[nvidiaOnly]}
	}
	source := packageSource(origins)
	if len(top) == 0 && obs.Packages.Total == 0 {
		w.comment(fmt.Sprintf("The driver %s is installed, but no package database could be read to "+
			"tell which package installed it (see gpuenv observe), so no driver block describes it.", v))
		return
	}
	if len(top) == 0 {
		w.comment(fmt.Sprintf("The driver %s is not installed from a package gpuenv manages (a "+
			"runfile or a container's driver), so no driver block describes it.", v))
		return
	}
	comment := []string{"The driver as installed: " + strings.Join(top, ", ") + "."}
	if source == "" {
		comment = append(comment, "They come from "+sourceWords(origins)+", which source cannot state, so source is left for plan to infer.")
	}
	b := w.block("driver", nil, comment...)
	b.SetAttributeValue("version", cty.StringVal(v))
	if fl := obs.Driver.ModuleFlavor; fl == "open" || fl == "proprietary" {
		b.SetAttributeValue("kernel_modules", cty.StringVal(fl))
	}
	if source != "" {
		b.SetAttributeValue("source", cty.StringVal(source))
	}
	if slices.ContainsFunc(obs.Kernel.Blacklists, func(bl facts.Blacklist) bool { return bl.Module == "nouveau" }) {
		b.SetAttributeValue("blacklist_nouveau", cty.True)
	}
	if on, known := driver.PersistenceEnabled(obs); known {
		b.SetAttributeValue("persistence_mode", cty.BoolVal(on))
	}
	// hold = true holds every package of the driver; a host that holds
	// only some has no hold the spec can state, and keeps its own.
	switch {
	case len(held) > 0 && len(held) == len(top):
		b.SetAttributeValue("hold", cty.True)
	case len(held) > 0:
		w.comment(fmt.Sprintf("Held: %s; not held: %s. hold = true would hold them all, so the "+
			"driver block leaves holds as they are.", strings.Join(held, ", "), strings.Join(without(top, held), ", ")))
	}
}

// packageSource is the source attribute for packages from the origins
// given ("distro", "nvidia", "other"): "" when they do not all come
// from one place the attribute names.
func packageSource(origins []string) string {
	if len(origins) == 1 && origins[0] != "other" {
		return origins[0]
	}
	return ""
}

func sourceWords(origins []string) string {
	words := map[string]string{"distro": "the distribution's archive", "nvidia": "NVIDIA's repository", "other": "another repository"}
	var out []string
	for _, o := range origins {
		out = append(out, words[o])
	}
	return strings.Join(out, " and ")
}

func without(all, some []string) []string {
	var out []string
	for _, s := range all {
		if !slices.Contains(some, s) {
			out = append(out, s)
		}
	}
	return out
}

// mainToolkit is /usr/local/cuda's toolkit, else the only one.
func mainToolkit(obs *facts.Observation) *facts.Toolkit {
	tks := obs.CUDA.Toolkits
	for i := range tks {
		if tks[i].Path == obs.CUDA.Default {
			return &tks[i]
		}
	}
	if len(tks) == 1 {
		return &tks[0]
	}
	return nil
}

func (w *writer) cuda(obs *facts.Observation) {
	tk := mainToolkit(obs)
	if tk == nil {
		if len(obs.CUDA.Toolkits) > 1 {
			var paths []string
			for _, t := range obs.CUDA.Toolkits {
				paths = append(paths, t.Path)
			}
			w.comment("Several CUDA toolkits and no /usr/local/cuda to say which is the main one: " +
				strings.Join(paths, ", ") + "; no cuda block.")
		}
		return
	}
	if tk.Package == "" && obs.Packages.Total == 0 {
		w.comment(fmt.Sprintf("The CUDA %s toolkit in %s is installed, but no package database could be "+
			"read to tell which package installed it, so no cuda block describes it.", tk.Version, tk.Path))
		return
	}
	if tk.Package == "" {
		w.comment(fmt.Sprintf("The CUDA %s toolkit in %s is not installed from a package gpuenv "+
			"manages, so no cuda block describes it.", tk.Version, tk.Path))
		return
	}
	source := "nvidia"
	if tk.Layout == "distro" {
		source = "distro"
	}
	b := w.block("cuda", nil, fmt.Sprintf("The CUDA toolkit in %s (%s).", tk.Path, tk.Package))
	b.SetAttributeValue("version", cty.StringVal(tk.Version))
	b.SetAttributeValue("source", cty.StringVal(source))
	if len(obs.CUDA.Toolkits) > 1 {
		w.comment("Other toolkits are installed and left unmanaged.")
	}
}

func (w *writer) cudnn(obs *facts.Observation) {
	for _, in := range obs.CuDNN.Installs {
		if in.Package == "" {
			continue
		}
		source := "nvidia"
		if strings.HasPrefix(in.Package, "nvidia-cudnn") {
			source = "distro"
		}
		v := in.PackageVersion
		if i := strings.IndexByte(v, '-'); i > 0 {
			v = v[:i]
		}
		if v == "" {
			v = in.Version
		}
		comment := fmt.Sprintf("cuDNN %s (%s)", in.Version, in.Package)
		if in.CUDAMajor != "" {
			comment += " for CUDA " + in.CUDAMajor
		}
		b := w.block("cudnn", nil, comment+".")
		b.SetAttributeValue("version", cty.StringVal(v))
		b.SetAttributeValue("source", cty.StringVal(source))
		return
	}
}

func (w *writer) frameworks(obs *facts.Observation) {
	for _, env := range obs.Python {
		for _, fw := range env.Frameworks {
			switch fw.Name {
			case "pytorch", "tensorflow", "jax":
			default:
				continue
			}
			distro := fw.Installer == "debian" || fw.Installer == "rpm"
			if !distro && !env.Virtual {
				w.comment(fmt.Sprintf("%s %s in %s was installed by %s outside a virtual environment, "+
					"which gpuenv does not manage: no framework block describes it.", fw.Name, fw.Version, env.Interpreter, orUnknown(fw.Installer)))
				continue
			}
			if distro {
				comment := fmt.Sprintf("%s %s from the distribution's package %s", fw.Name, fw.Version, fw.Package)
				v := distroVersion(obs, fw.Package)
				if v != "" {
					comment += fmt.Sprintf(", whose version %s the block states (the upstream part of the package's version).", v)
				} else {
					comment += "; the package database does not show its version, so the block states none."
				}
				b := w.block("framework", []string{fw.Name}, comment)
				if v != "" {
					b.SetAttributeValue("version", cty.StringVal(v))
				}
				b.SetAttributeValue("source", cty.StringVal("distro"))
				continue
			}
			b := w.block("framework", []string{fw.Name}, fmt.Sprintf("%s %s in %s.", fw.Name, fw.Version, env.Prefix))
			b.SetAttributeValue("version", cty.StringVal(fw.Version))
			b.SetAttributeValue("python", cty.StringVal(env.Interpreter))
			if fw.Name == "pytorch" && strings.HasPrefix(fw.Variant, "cu") && fw.CUDA != "" {
				b.SetAttributeValue("cuda", cty.StringVal(fw.CUDA))
			}
		}
	}
}

// distroVersion is the upstream version of the installed package name,
// which a distribution's framework block states as its version; "" when
// it is not installed or its version cannot be read.
func distroVersion(obs *facts.Observation, name string) string {
	for _, p := range obs.Packages.Packages {
		if p.Name != name || p.State != facts.StateInstalled {
			continue
		}
		up, err := pkgdb.UpstreamVersion(string(obs.Packages.Manager), p.Version)
		if err != nil {
			return ""
		}
		return up.String()
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown installer"
	}
	return s
}

// gpuGroups are the groups that give access to GPUs: those owning device
// nodes, and video and render.
func gpuGroups(obs *facts.Observation) []facts.Group {
	want := map[uint32]bool{}
	for _, n := range obs.DeviceNodes {
		if n.GID != 0 {
			want[n.GID] = true
		}
	}
	var out []facts.Group
	for _, g := range obs.Groups {
		if want[g.GID] || g.Name == "video" || g.Name == "render" {
			out = append(out, g)
		}
	}
	return out
}

func (w *writer) groups(obs *facts.Observation) {
	for _, g := range gpuGroups(obs) {
		if len(g.Members) == 0 {
			continue
		}
		members := slices.Clone(g.Members)
		slices.Sort(members)
		var vals []cty.Value
		for _, m := range members {
			vals = append(vals, cty.StringVal(m))
		}
		b := w.block("group", []string{g.Name}, fmt.Sprintf("Users in %s (gid %d).", g.Name, g.GID))
		b.SetAttributeValue("members", cty.ListVal(vals))
	}
}

// managed reports whether file is one of gpuenv's own environment files,
// whose variables an environment block describes.
func managed(obs *facts.Observation, file string) bool {
	return slices.Contains(obs.Environment.Managed, file)
}

func (w *writer) environment(obs *facts.Observation) {
	last := map[string]facts.Assignment{}
	var others []string
	for _, a := range obs.Environment.Variables {
		switch a.Name {
		case "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER":
			if managed(obs, a.File) {
				last[a.Name] = a
			} else {
				others = append(others, fmt.Sprintf("%s=%s (%s:%d)", a.Name, a.Value, a.File, a.Line))
			}
		}
	}
	if len(last) > 0 {
		b := w.block("environment", nil, "Variables gpuenv sets for login shells and services.")
		if a, ok := last["CUDA_VISIBLE_DEVICES"]; ok {
			vals := []cty.Value{}
			for _, e := range strings.Split(a.Value, ",") {
				if e = strings.TrimSpace(e); e != "" {
					vals = append(vals, cty.StringVal(e))
				}
			}
			if len(vals) == 0 {
				b.SetAttributeValue("cuda_visible_devices", cty.ListValEmpty(cty.String))
			} else {
				b.SetAttributeValue("cuda_visible_devices", cty.ListVal(vals))
			}
		}
		if a, ok := last["CUDA_DEVICE_ORDER"]; ok {
			b.SetAttributeValue("cuda_device_order", cty.StringVal(a.Value))
		}
	}
	if len(others) > 0 {
		lines := []string{"Set outside gpuenv's files, and left to them (an environment block would set them in gpuenv's own):"}
		for _, o := range others {
			lines = append(lines, "  "+o)
		}
		w.comment(lines...)
	}
}

// teams writes a team block for each team file, with the setting the
// profile script ends with (the file's last); one a spec could not hold
// (a group or device name the spec refuses, a group the host lacks,
// which plan refuses) is a comment.
func (w *writer) teams(obs *facts.Observation) {
	last := map[string]facts.Assignment{}
	var groups []string
	for _, a := range obs.Environment.Teams {
		if a.Name != "CUDA_VISIBLE_DEVICES" || a.Group == "" {
			continue
		}
		if _, ok := last[a.Group]; !ok {
			groups = append(groups, a.Group)
		}
		last[a.Group] = a
	}
	for _, g := range groups {
		a := last[g]
		var vals []cty.Value
		good := spec.CheckAccountName("group", g) == "" && slices.ContainsFunc(obs.Groups, func(h facts.Group) bool { return h.Name == g })
		for _, e := range strings.Split(a.Value, ",") {
			good = good && spec.IsVisibleDevice(e)
			vals = append(vals, cty.StringVal(e))
		}
		if !good {
			w.comment(fmt.Sprintf("The team file %s:%d sets CUDA_VISIBLE_DEVICES=%s, which no team block says: the group is not one of this host's, or an entry is not a device index, GPU-<uuid> or MIG device.", a.File, a.Line, a.Value))
			continue
		}
		b := w.block("team", []string{g}, fmt.Sprintf("What the members of the group %s get at login (%s).", g, a.File))
		b.SetAttributeValue("cuda_visible_devices", cty.ListVal(vals))
	}
}
