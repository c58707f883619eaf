package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
)

// gpuCount is how many GPUs CUDA could enumerate (the rule GPUCount).
func (d *doctor) gpuCount() int { return GPUCount(d.obs) }

func (d *doctor) visibleDevices() {
	teams := d.teamGroups()
	c := Check{ID: "env.cuda-visible-devices", Group: GroupEnv}
	as := d.assignments("CUDA_VISIBLE_DEVICES")
	if len(as) == 0 {
		c.Status = OK
		c.Summary = "CUDA_VISIBLE_DEVICES is not set: programs see every GPU"
		c.Evidence = []string{"no setting in /etc/environment, /etc/profile.d or systemd DefaultEnvironment="}
		if len(teams) > 0 {
			c.Summary = "CUDA_VISIBLE_DEVICES is not set for everyone: programs of users in no team see every GPU"
		}
		d.add(c)
	} else {
		d.judgeVisible(c, as, "")
	}
	for _, g := range teams {
		d.judgeVisible(Check{ID: "env.cuda-visible-devices:" + g, Group: GroupEnv}, d.teamAssignments(g), g)
	}
}

// teamGroups are the groups of the teams that have a setting, in the
// order the profile script reads their files.
func (d *doctor) teamGroups() []string {
	var out []string
	for _, a := range d.teamSettings() {
		if !slices.Contains(out, a.Group) {
			out = append(out, a.Group)
		}
	}
	return out
}

// teamSettings are the teams' CUDA_VISIBLE_DEVICES settings.
func (d *doctor) teamSettings() []facts.Assignment {
	var out []facts.Assignment
	for _, a := range d.obs.Environment.Teams {
		if a.Name == "CUDA_VISIBLE_DEVICES" && a.Group != "" {
			out = append(out, a)
		}
	}
	return out
}

func (d *doctor) teamAssignments(group string) []facts.Assignment {
	var out []facts.Assignment
	for _, a := range d.teamSettings() {
		if a.Group == group {
			out = append(out, a)
		}
	}
	return out
}

// judgeVisible judges the settings as of one audience: everyone's
// (team "") or the members' of one team, whose fix is the team block.
func (d *doctor) judgeVisible(c Check, as []facts.Assignment, team string) {
	uuids := map[string]bool{}
	for _, g := range d.obs.NVML.Devices {
		uuids[strings.ToLower(g.UUID)] = true
	}
	n := d.gpuCount()
	migs := d.migUUIDs()
	var bad []string
	var good []string
	for _, a := range as {
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA_VISIBLE_DEVICES=%s", where(a), a.Value))
		v := strings.TrimSpace(a.Value)
		if strings.Contains(v, "$") {
			continue
		}
		if v == "" {
			bad = append(bad, fmt.Sprintf("%s sets it empty, which hides every GPU", where(a)))
			continue
		}
		// CUDA stops at the first entry that names no device: the later
		// ones are ignored even when valid.
		for _, e := range strings.Split(v, ",") {
			e = strings.TrimSpace(e)
			switch {
			case IsDeviceIndex(e):
				i, _ := strconv.Atoi(e)
				if i >= n {
					if n == 0 {
						bad = append(bad, fmt.Sprintf("%s names GPU %s, but the host shows no GPU", where(a), e))
					} else {
						bad = append(bad, fmt.Sprintf("%s names GPU %s, but the host has %s (0 to %d)", where(a), e, plural(n, "GPU"), n-1))
					}
					continue
				}
				good = append(good, e)
			case strings.HasPrefix(strings.ToLower(e), "gpu-"):
				if len(uuids) > 0 && !uuids[strings.ToLower(e)] {
					bad = append(bad, fmt.Sprintf("%s names %s, which no GPU of this host has", where(a), e))
					continue
				}
				good = append(good, e)
			case strings.HasPrefix(strings.ToUpper(e), "MIG-"):
				// Resolved against the MIG devices NVML lists, once it
				// lists any: a MIG UUID of another host, or of a
				// layout since changed, names nothing.
				if at, ok := migs[strings.ToLower(e)]; ok {
					c.Evidence = append(c.Evidence, fmt.Sprintf("%s is %s (NVML)", e, at))
				} else if len(migs) > 0 {
					bad = append(bad, fmt.Sprintf("%s names %s, which no MIG device of this host has", where(a), e))
					continue
				}
				good = append(good, e)
			default:
				bad = append(bad, fmt.Sprintf("%s names %q, which is no device (CUDA hides it and every later entry)", where(a), e))
			}
		}
	}
	whose := ""
	if team != "" {
		whose = fmt.Sprintf("The team %s's ", team)
	}
	if len(bad) == 0 {
		c.Status = OK
		c.Summary = whose + "CUDA_VISIBLE_DEVICES names existing GPUs"
		d.add(c)
		return
	}
	c.Status = Problem
	c.Summary = whose + "CUDA_VISIBLE_DEVICES hides GPUs: " + strings.Join(bad, "; ")
	var files []string
	for _, a := range as {
		files = append(files, where(a))
	}
	text := fmt.Sprintf("Remove the setting (%s) to show every GPU, or name existing ones", strings.Join(files, ", "))
	if team != "" {
		text = fmt.Sprintf("Remove the team's file (%s), whose members then get the host-wide setting, or name existing ones", strings.Join(files, ", "))
	}
	// A fix names GPUs that exist: the valid entries, else every GPU.
	// An empty list would hide them all again. The same setting in
	// several files (a profile script and systemd's) names each once.
	var distinct []string
	for _, g := range good {
		if !slices.Contains(distinct, g) {
			distinct = append(distinct, g)
		}
	}
	good = distinct
	if len(good) == 0 {
		for i := range n {
			good = append(good, strconv.Itoa(i))
		}
	}
	if len(good) == 0 {
		c.Fix = &Fix{Text: text + "."}
		d.add(c)
		return
	}
	var q []string
	for _, g := range good {
		q = append(q, strconv.Quote(g))
	}
	if team != "" {
		c.Fix = &Fix{Text: text + "; with gpuenv, which writes the team's file:", Spec: fmt.Sprintf("team %q {\n  cuda_visible_devices = [%s]\n}", team, strings.Join(q, ", "))}
	} else {
		c.Fix = &Fix{Text: text + "; with gpuenv, which writes it to /etc/profile.d and systemd:", Spec: fmt.Sprintf("environment {\n  cuda_visible_devices = [%s]\n}", strings.Join(q, ", "))}
	}
	d.add(c)
}

func (d *doctor) deviceOrder() {
	c := Check{ID: "env.cuda-device-order", Group: GroupEnv}
	var indexed, visible []string
	// The host-wide settings and the teams': CUDA_DEVICE_ORDER is the
	// same for both.
	for _, a := range append(d.assignments("CUDA_VISIBLE_DEVICES"), d.teamSettings()...) {
		if entries := strings.Split(a.Value, ","); slices.ContainsFunc(entries, IsDeviceIndex) {
			indexed = append(indexed, fmt.Sprintf("%s: CUDA_VISIBLE_DEVICES=%s", where(a), a.Value))
			visible = append(visible, entries...)
		}
	}
	if !IndexOrderAmbiguous(d.gpuCount(), visible, "") {
		c.Status, c.Summary = Skipped, "No GPU is chosen by index among several"
		d.add(c)
		return
	}
	c.Evidence = indexed
	order := ""
	for _, a := range d.assignments("CUDA_DEVICE_ORDER") {
		order = a.Value
		c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA_DEVICE_ORDER=%s", where(a), a.Value))
	}
	if !IndexOrderAmbiguous(d.gpuCount(), visible, order) {
		c.Status, c.Summary = OK, "GPUs are chosen by index with CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA numbers them as nvidia-smi does"
		d.add(c)
		return
	}
	if order == "" {
		c.Evidence = append(c.Evidence, "CUDA_DEVICE_ORDER is not set: CUDA's default is FASTEST_FIRST")
	}
	c.Status = Warning
	c.Summary = "GPUs are chosen by index, but CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA's index can name a different GPU than nvidia-smi's"
	c.Fix = &Fix{Text: "Number GPUs by PCI bus, as nvidia-smi does; with gpuenv:", Spec: "environment {\n  cuda_device_order = \"PCI_BUS_ID\"\n}"}
	d.add(c)
}

func (d *doctor) ldLibraryPath() {
	c := Check{ID: "env.ld-library-path", Group: GroupEnv}
	var set []string
	for _, a := range d.obs.Environment.Variables {
		if a.Name == "LD_LIBRARY_PATH" {
			set = append(set, fmt.Sprintf("%s: LD_LIBRARY_PATH=%s", where(a), a.Value))
		}
	}
	if len(set) == 0 {
		c.Status, c.Summary = OK, "LD_LIBRARY_PATH is not set system-wide"
		d.add(c)
		return
	}
	c.Status = Warning
	c.Evidence = set
	c.Summary = "LD_LIBRARY_PATH is set system-wide: its libraries shadow the CUDA and cuDNN libraries that pip wheels bring"
	c.Fix = &Fix{Text: "Remove the setting and let the loader's configuration find the toolkit; with gpuenv (which writes /etc/ld.so.conf.d/gpuenv.conf):", Spec: "cuda {\n  set_environment = true\n}"}
	d.add(c)
}

func (d *doctor) gpuState() {
	n := d.obs.NVML
	if n.Status != "ok" {
		d.add(Check{ID: "gpu.state", Group: GroupGPUState, Status: Skipped,
			Summary: "NVML did not answer: GPU memory, compute modes and MIG cannot be read"})
		return
	}
	if d.skipLive(Check{ID: "gpu.state", Group: GroupGPUState}, "GPU memory, compute modes and MIG instances as NVML shows them now") {
		return
	}
	mem := Check{ID: "gpu.memory", Group: GroupGPUState, Status: OK, Summary: "No process holds GPU memory"}
	mode := Check{ID: "gpu.compute-mode", Group: GroupGPUState, Status: OK, Summary: "Every GPU accepts new programs (compute mode)"}
	mig := Check{ID: "gpu.mig", Group: GroupGPUState, Status: OK, Summary: "No GPU has MIG enabled without instances"}
	var busy, closed, empty []string
	var modeSpec, migCmds []string
	for _, g := range n.Devices {
		for _, p := range g.Processes {
			name := p.Name
			if name == "" {
				name = "?"
			}
			mem.Evidence = append(mem.Evidence, fmt.Sprintf("GPU %d (%s): pid %d %s holds %s", g.Index, g.UUID, p.PID, name, bytesText(p.UsedMemory)))
		}
		// NVML's used memory can read 0 while its process list shows
		// allocations (MIG, some vGPU setups): the larger is the truth.
		used := g.MemoryUsed
		var held uint64
		for _, p := range g.Processes {
			held += p.UsedMemory
		}
		used = max(used, held)
		if len(g.Processes) > 0 || g.MemoryTotal > 0 && used > g.MemoryTotal/20 {
			busy = append(busy, fmt.Sprintf("GPU %d (%s of %s used)", g.Index, bytesText(used), bytesText(g.MemoryTotal)))
		}
		switch {
		case g.ComputeMode == "prohibited":
			closed = append(closed, fmt.Sprintf("GPU %d is in compute mode prohibited: no program can use it", g.Index))
		case g.ComputeMode == "exclusive_process" && len(g.Processes) > 0:
			closed = append(closed, fmt.Sprintf("GPU %d is exclusive to pid %d: no other program can use it", g.Index, g.Processes[0].PID))
		}
		if g.ComputeMode != "" && g.ComputeMode != "default" {
			mode.Evidence = append(mode.Evidence, fmt.Sprintf("GPU %d (%s): compute mode %s, %s", g.Index, g.UUID, g.ComputeMode, plural(len(g.Processes), "process")))
			modeSpec = append(modeSpec, fmt.Sprintf("device %q {\n  compute_mode = \"default\"\n}", strconv.Itoa(g.Index)))
		}
		if g.MIGMode == "enabled" {
			mig.Evidence = append(mig.Evidence, fmt.Sprintf("GPU %d (%s): MIG enabled, %s", g.Index, g.UUID, plural(g.MIGDevices, "MIG device")))
			if g.MIGDevices == 0 {
				empty = append(empty, strconv.Itoa(g.Index))
				migCmds = append(migCmds, fmt.Sprintf("nvidia-smi mig -i %d -cgi <profile> -C", g.Index))
			}
		}
	}
	if len(busy) > 0 {
		mem.Status = Warning
		mem.Summary = "GPU memory is already in use: " + strings.Join(busy, ", ")
		mem.Fix = &Fix{Text: "A new program may run out of memory; stop the processes listed if they should not be there."}
	}
	if len(closed) > 0 {
		mode.Status = Problem
		mode.Summary = strings.Join(closed, "; ")
		mode.Fix = &Fix{Text: "Return the GPUs to the default compute mode; with gpuenv:", Spec: strings.Join(modeSpec, "\n\n")}
	}
	if len(empty) > 0 {
		mig.Status = Problem
		mig.Summary = fmt.Sprintf("MIG is enabled on GPU %s without instances: CUDA finds no device there", strings.Join(empty, ", "))
		var off []string
		for _, i := range empty {
			off = append(off, fmt.Sprintf("nvidia-smi -i %s -mig 0", i))
		}
		mig.Fix = &Fix{Text: "Create GPU and compute instances (nvidia-smi mig -lgip lists the profiles), or disable MIG (" + strings.Join(off, "; ") + "):", Commands: migCmds}
	}
	d.add(mem)
	d.add(mode)
	d.add(mig)
}
