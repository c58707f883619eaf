package environment

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
	"github.com/gpuenv/gpuenv/spec"
)

// Provider plans the "environment" step: gpuenv's profile script, loader
// configuration and systemd drop-in. It compares the files' observed
// digests with the bytes the spec asks for.
type Provider struct{}

var _ kind.Planner = Provider{}

// managedFile is one of gpuenv's environment files: Content is what it
// must hold; Remove asks for it to be gone.
type managedFile struct {
	Path    string
	Content string
	Remove  bool
	After   []string
	What    string
	// Shown is the step's after value for the file; its lines without
	// comments when "".
	Shown string
}

// shellQuote writes a value for a POSIX shell's single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// systemdQuote writes NAME=value as one quoted DefaultEnvironment word.
func systemdQuote(name, value string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(name+"="+value) + `"`
}

// planVariables are the variables the environment block sets, in the
// order they are written.
func planVariables(e *spec.Environment) [][2]string {
	var out [][2]string
	if e.CUDAVisibleDevices.Set {
		out = append(out, [2]string{"CUDA_VISIBLE_DEVICES", strings.Join(e.CUDAVisibleDevices.Value, ",")})
	}
	if e.CUDADeviceOrder.Set {
		out = append(out, [2]string{"CUDA_DEVICE_ORDER", string(e.CUDADeviceOrder.Value)})
	}
	names := make([]string, 0, len(e.Variables.Value))
	for n := range e.Variables.Value {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, [2]string{n, e.Variables.Value[n]})
	}
	return out
}

// planFiles returns gpuenv's environment files as the spec wants them;
// files the spec does not manage are left out. The systemd drop-in is
// followed by daemon-reexec, which makes the manager read it again, only
// where systemd runs the root: elsewhere (a container whose process 1 is
// not systemd, an image) systemctl cannot reach a manager and fails, and
// the drop-in is read when the root next boots with systemd.
func planFiles(req *planner.Request) []managedFile {
	var files []managedFile
	env := req.Spec.Environment
	var cudaDir string
	cudaManaged := false
	if dc := req.Desired.CUDA; dc != nil && dc.Block.SetEnvironment.Set {
		cudaManaged = true
		if !dc.Absent && dc.SetEnvironment && dc.Path != "" && dc.Path != "/usr" {
			cudaDir = dc.Path
		}
	}
	envManaged := env != nil
	teams := liveTeams(req.Spec)
	if !envManaged && !cudaManaged && len(req.Spec.Teams) == 0 {
		return nil
	}
	var vars [][2]string
	if env != nil && !env.IsAbsent() {
		vars = planVariables(env)
	}
	if envManaged || cudaManaged || len(teams) > 0 {
		var b strings.Builder
		for _, v := range vars {
			fmt.Fprintf(&b, "export %s=%s\n", v[0], shellQuote(v[1]))
		}
		if cudaDir != "" {
			fmt.Fprintf(&b, "case \":$PATH:\" in *:%s/bin:*) ;; *) export PATH=%s\"/bin:$PATH\" ;; esac\n", cudaDir, shellQuote(cudaDir))
		}
		shown := strings.Join(contentLines(b.String()), "; ")
		if len(teams) > 0 {
			// After the host-wide assignments, which a team's replace.
			b.WriteString(teamScript)
			shown = strings.TrimPrefix(shown+"; team members: CUDA_VISIBLE_DEVICES from "+TeamsDir+"/<group>.env", "; ")
		}
		f := managedFile{Path: ManagedProfile, What: "login shells' variables", Remove: b.Len() == 0, Shown: shown}
		if b.Len() > 0 {
			f.Content = "# Written by gpuenv from the spec; gpuenv rewrites it on every apply.\n" + b.String()
		}
		files = append(files, f)
	}
	for _, t := range req.Spec.Teams {
		f := managedFile{Path: TeamFile(t.Group), What: fmt.Sprintf("the team %s's devices", t.Group), Remove: t.IsAbsent()}
		if !t.IsAbsent() {
			f.Content = teamContent(t)
		}
		files = append(files, f)
	}
	if cudaManaged {
		f := managedFile{Path: ManagedLdSoConf, What: "the dynamic loader's path", After: []string{"ldconfig"}, Remove: cudaDir == ""}
		if cudaDir != "" {
			// Library directories go to the loader's cache, not a global
			// LD_LIBRARY_PATH, which would shadow the libraries that pip
			// wheels bring.
			f.Content = "# Written by gpuenv from the spec.\n" + path.Join(cudaDir, "lib64") + "\n"
		}
		files = append(files, f)
	}
	if envManaged {
		f := managedFile{Path: ManagedSystemd, What: "services' variables", Remove: len(vars) == 0}
		if req.Facts.Init.Systemd {
			f.After = []string{"systemctl", "daemon-reexec"}
		}
		if len(vars) > 0 {
			words := make([]string, len(vars))
			for i, v := range vars {
				words[i] = systemdQuote(v[0], v[1])
			}
			f.Content = "# Written by gpuenv from the spec: services see the same variables as login shells.\n[Manager]\nDefaultEnvironment=" + strings.Join(words, " ") + "\n"
		}
		files = append(files, f)
	}
	return files
}

// Plan compares gpuenv's environment files with the spec.
func (p Provider) Plan(_ context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	if req.Desired == nil {
		return resp
	}
	if resp.Diagnostics = checkTeamGroups(req); resp.Diagnostics.HasErrors() {
		return resp
	}
	files := planFiles(req)
	var ops []plan.Operation
	before, after := map[string]string{}, map[string]string{}
	var why []string
	var code plan.ReasonCode // the first change's
	because := func(c plan.ReasonCode) {
		if code == "" {
			code = c
		}
	}
	existed, removes := 0, 0
	changed := map[string]bool{}
	for _, f := range files {
		exists, same := current(req, f)
		if exists {
			existed++
			before[f.Path] = "present"
		}
		switch {
		case f.Remove && !exists:
			continue
		case f.Remove:
			removes++
			changed[f.Path] = true
			ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: f.Path, Remove: true, After: f.After}})
			why = append(why, fmt.Sprintf("removes %s: the spec sets nothing for %s", f.Path, f.What))
			because(plan.ReasonNotRequested)
			continue
		}
		after[f.Path] = f.Shown
		if f.Shown == "" {
			after[f.Path] = strings.TrimSpace(strings.Join(contentLines(f.Content), "; "))
		}
		if same {
			continue
		}
		changed[f.Path] = true
		ops = append(ops, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: f.Path, Content: f.Content, Mode: 0o644, After: f.After}})
		if exists {
			why = append(why, fmt.Sprintf("rewrites %s, which differs from the spec (%s)", f.Path, f.What))
			because(plan.ReasonContentDiffers)
		} else {
			why = append(why, fmt.Sprintf("writes %s (%s)", f.Path, f.What))
			because(plan.ReasonMissing)
		}
	}
	if len(ops) == 0 {
		return resp
	}
	action := plan.Update
	switch {
	case existed == 0:
		action = plan.Create
	case removes == len(ops) && len(after) == 0:
		action = plan.Delete
	}
	reason := plan.Sentence(why)
	if changed[ManagedSystemd] && !req.Facts.Init.Systemd {
		reason += " " + nextBoot(req.Facts.Init, changed[ManagedProfile])
	}
	s := plan.Step{
		Address:    "environment",
		Action:     action,
		Reason:     reason,
		ReasonCode: code,
		Operations: ops,
		DependsOn:  []string{"cuda"},
	}
	if len(before) > 0 && action != plan.Create {
		s.Before = before
	}
	if len(after) > 0 {
		s.After = after
	}
	resp.Steps = append(resp.Steps, s)
	return resp
}

// nextBoot says when a changed systemd drop-in reaches services on a root
// that systemd does not run now, and, when the profile script changed with
// it, when login shells see the change.
func nextBoot(in facts.Init, profile bool) string {
	var s string
	switch {
	case !in.Live:
		s = "The root is not the running system, so services see the change when it next boots"
	case in.PID1 == "":
		s = "Process 1 is unknown (no /proc/1/comm), so services see the change at the next boot with systemd"
	default:
		s = fmt.Sprintf("systemd is not process 1 here (%s is), so services see the change at the next boot with systemd", in.PID1)
	}
	if profile {
		s += ", and login shells at their next login"
	}
	return s + "."
}

// contentLines are a file's lines without comments, for the step's
// after values.
func contentLines(c string) []string {
	var out []string
	for _, l := range strings.Split(c, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// current tells whether a managed file exists and already holds exactly
// its content, from the observed digests.
func current(req *planner.Request, f managedFile) (exists, same bool) {
	for _, d := range req.Facts.Environment.ManagedDigests {
		if d.Path == f.Path {
			return true, d.SHA256 != "" && d.SHA256 == planner.Digest(f.Content)
		}
	}
	return slices.Contains(req.Facts.Environment.Managed, f.Path), false
}
