package environment

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/spec"
)

// TeamsDir holds one file per team, <group>.env, of KEY=VALUE lines:
// the format systemd's EnvironmentFile= and docker run --env-file read
// too, so that a team's services and containers can be given the same
// devices from the same file.
const TeamsDir = "/etc/gpuenv/teams"

// teamVariable is the one variable a team file sets.
const teamVariable = "CUDA_VISIBLE_DEVICES"

// TeamFile is the file of group's team.
func TeamFile(group string) string { return path.Join(TeamsDir, group+".env") }

// teamGroup is the group whose team file p is, and whether p is one.
func teamGroup(p string) (string, bool) {
	if path.Dir(p) != TeamsDir || !strings.HasSuffix(p, ".env") {
		return "", false
	}
	g := strings.TrimSuffix(path.Base(p), ".env")
	return g, g != ""
}

// teamScript is the end of gpuenv's profile script when the spec has
// teams. It is the same for every spec: which teams there are, and their
// devices, are in the team files, which it reads and does not run. A
// user gets the first team (by file name) whose group they are in,
// compared by group ID so that a group name with spaces, which a
// directory service may have, cannot match part of another. It comes
// after the host-wide assignments, which it overrides for team members.
const teamScript = `# Members of a team's group get its CUDA_VISIBLE_DEVICES from
# ` + TeamsDir + `/<group>.env, read here, never run.
gpuenv_gids=" $(id -G 2>/dev/null) "
for gpuenv_team in ` + TeamsDir + `/*.env; do
	[ -r "$gpuenv_team" ] || continue
	gpuenv_gid=${gpuenv_team##*/}
	gpuenv_gid=$(getent group "${gpuenv_gid%.env}" 2>/dev/null)
	gpuenv_gid=${gpuenv_gid#*:*:}
	gpuenv_gid=${gpuenv_gid%%:*}
	case $gpuenv_gid in ''|*[!0-9]*) continue ;; esac
	case $gpuenv_gids in *" $gpuenv_gid "*) ;; *) continue ;; esac
	while IFS= read -r gpuenv_line || [ -n "$gpuenv_line" ]; do
		case $gpuenv_line in ` + teamVariable + `=*) export "$gpuenv_line" ;; esac
	done < "$gpuenv_team"
	break
done
unset gpuenv_gids gpuenv_team gpuenv_gid gpuenv_line
`

// ParseTeamFile reads a team file as the profile script does: a line
// that starts with CUDA_VISIBLE_DEVICES= sets it to the rest of the line,
// as it stands (no quotes are removed, as none are when the script
// exports it). Comments and blank lines are passed over; any other line
// is a problem, which the script ignores.
func ParseTeamFile(file, group string, data []byte) (as []facts.Assignment, problems []string) {
	for n, line := range lines(data) {
		if value, ok := strings.CutPrefix(line, teamVariable+"="); ok {
			as = append(as, facts.Assignment{Name: teamVariable, Value: value, File: file, Line: n + 1, Group: group})
			continue
		}
		if t := strings.TrimSpace(line); t != "" && t[0] != '#' {
			problems = append(problems, fmt.Sprintf("line %d is ignored: the profile script reads only %s= lines: %.60q", n+1, teamVariable, line))
		}
	}
	return as, problems
}

// observeTeams reads every team file, in name order as the profile
// script finds them. Each is one of gpuenv's files.
func observeTeams(h *host.Host, read func(string) ([]byte, bool), out *facts.Environment) []facts.Warning {
	var warns []facts.Warning
	files, _ := h.Glob(path.Join(TeamsDir, "*.env"))
	for _, f := range files {
		group, _ := teamGroup(f)
		out.Managed = append(out.Managed, f)
		sum, _ := h.SHA256(f)
		out.ManagedDigests = append(out.ManagedDigests, facts.FileDigest{Path: f, SHA256: sum})
		data, ok := read(f)
		if !ok {
			continue
		}
		as, problems := ParseTeamFile(f, group, data)
		out.Teams = append(out.Teams, as...)
		for _, p := range problems {
			warns = append(warns, facts.Warning{Path: f, Message: p})
		}
	}
	return warns
}

// liveTeams are the spec's teams that are not absent.
func liveTeams(s *spec.Spec) []*spec.Team {
	var out []*spec.Team
	for _, t := range s.Teams {
		if !t.IsAbsent() {
			out = append(out, t)
		}
	}
	return out
}

// teamContent is a team's file: one line of validated device
// identifiers, which need no quotes in any reader of the format.
func teamContent(t *spec.Team) string {
	return fmt.Sprintf("# Written by gpuenv from the spec's team %q: the members of the group %s get these devices at login.\n%s=%s\n",
		t.Group, t.Group, teamVariable, strings.Join(t.CUDAVisibleDevices.Value, ","))
}

// checkTeamGroups refuses a team whose group neither the spec makes nor
// the host has (in /etc/group, which gpuenv reads: a group a directory
// service alone provides is not seen), or whose group the spec removes.
func checkTeamGroups(req *planner.Request) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, t := range liveTeams(req.Spec) {
		var made *spec.Group
		for _, g := range req.Spec.Groups {
			if g.Name == t.Group {
				made = g
			}
		}
		switch {
		case made != nil && made.IsAbsent():
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Team of a removed group",
				Detail:  fmt.Sprintf("The group block at %s removes the group %q, so no one would get the team's devices. Remove absent = true from the group, or write absent = true in the team too.", made.DefRange, t.Group),
				Subject: t.GroupRange.Ptr()})
		case made != nil:
		case !slices.ContainsFunc(req.Facts.Groups, func(g facts.Group) bool { return g.Name == t.Group }):
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown group",
				Detail:  fmt.Sprintf("The host has no group %q in /etc/group, and the spec makes none, so no one would get the team's devices. Add a group block for it with its members:\n\n  group %q {\n    members = [\"alice\"]\n  }", t.Group, t.Group),
				Subject: t.GroupRange.Ptr()})
		}
	}
	return diags
}
