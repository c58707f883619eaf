package groups

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/kind"
)

// Provider plans group.<name> steps: the users who must be in a group
// (and, with exclusive, only they), or the group's removal.
type Provider struct{}

var _ kind.Planner = Provider{}

// Plan compares each group block with /etc/group as observed.
func (Provider) Plan(_ context.Context, req *planner.Request) *planner.Response {
	resp := &planner.Response{}
	resp.Warnings = unknownMembers(req)
	for _, g := range req.Spec.Groups {
		var cur *facts.Group
		for i := range req.Facts.Groups {
			if req.Facts.Groups[i].Name == g.Name {
				cur = &req.Facts.Groups[i]
				break
			}
		}
		addr := "group." + g.Name
		if g.IsAbsent() {
			if cur == nil {
				continue
			}
			resp.Steps = append(resp.Steps, plan.Step{
				Address:    addr,
				Action:     plan.Delete,
				Before:     map[string]string{"members": strings.Join(cur.Members, ", ")},
				Reason:     fmt.Sprintf("absent = true removes the group %s.", g.Name),
				ReasonCode: plan.ReasonAbsentRequested,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: g.Name, Delete: true}}},
			})
			continue
		}
		want := g.Members.Value
		if cur == nil {
			if !g.Members.Set {
				// A group block without members asks only that the group
				// exists.
				want = nil
			}
			resp.Steps = append(resp.Steps, plan.Step{
				Address:    addr,
				Action:     plan.Create,
				After:      map[string]string{"members": strings.Join(want, ", ")},
				Reason:     fmt.Sprintf("The group %s does not exist: it is created%s.", g.Name, withMembers(want)),
				ReasonCode: plan.ReasonMissing,
				Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: g.Name, Create: true, System: deviceGroups[g.Name], Add: slices.Clone(want)}}},
			})
			continue
		}
		var add, remove []string
		for _, u := range want {
			// A user whose primary group this is is in it already.
			if !slices.Contains(cur.Members, u) && !slices.Contains(cur.PrimaryOf, u) {
				add = append(add, u)
			}
		}
		if g.Exclusive.Value && g.Members.Set {
			for _, u := range cur.Members {
				if !slices.Contains(want, u) {
					remove = append(remove, u)
				}
			}
		}
		if len(add) == 0 && len(remove) == 0 {
			continue
		}
		after := slices.Clone(cur.Members)
		after = slices.DeleteFunc(after, func(u string) bool { return slices.Contains(remove, u) })
		after = append(after, add...)
		var why []string
		if len(add) > 0 {
			why = append(why, fmt.Sprintf("adds %s, whom the spec lists, to %s", and(add), g.Name))
		}
		if len(remove) > 0 {
			why = append(why, fmt.Sprintf("removes %s from %s: exclusive = true admits only the listed members", and(remove), g.Name))
		}
		resp.Steps = append(resp.Steps, plan.Step{
			Address:    addr,
			Action:     plan.Update,
			Before:     map[string]string{"members": strings.Join(cur.Members, ", ")},
			After:      map[string]string{"members": strings.Join(after, ", ")},
			Reason:     plan.Sentence(why),
			ReasonCode: plan.ReasonMembersDiffer,
			Operations: []plan.Operation{{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: g.Name, Add: add, Remove: remove}}},
		})
	}
	return resp
}

// UnknownUserCheck names the warning about a member who is no user of
// the root.
const UnknownUserCheck = "unknown-user"

// unknownMembers warns of each user the spec lists as a member who is
// not in the root's /etc/passwd: added to the group, the name gives no
// one access. Users of a directory service (LDAP, SSSD) are not in the
// file, so this is a warning, not an error. The users are those whose
// primary group /etc/group lists; when no group has any, /etc/passwd was
// not read and nothing is said.
func unknownMembers(req *planner.Request) []finding.Finding {
	users := map[string]bool{}
	for _, g := range req.Facts.Groups {
		for _, u := range g.PrimaryOf {
			users[u] = true
		}
	}
	if len(users) == 0 {
		return nil
	}
	var out []finding.Finding
	for _, g := range req.Spec.Groups {
		if g.IsAbsent() {
			continue
		}
		var unknown []string
		for _, u := range g.Members.Value {
			if !users[u] {
				unknown = append(unknown, u)
			}
		}
		if len(unknown) == 0 {
			continue
		}
		out = append(out, finding.Finding{
			ID:      UnknownUserCheck,
			Summary: fmt.Sprintf("No such user: %s", and(unknown)),
			Detail: fmt.Sprintf("The group %s lists %s, whom %s does not know: added to the group, the name gives no one access to the GPU. "+
				"Check the spelling; a user from a directory service (LDAP, SSSD) is not in the file, and this warning can then be ignored.",
				g.Name, and(unknown), PasswdPath),
			Evidence: []string{PasswdPath + " has no entry for " + strings.Join(unknown, ", ")},
		})
	}
	return out
}

// and joins names as a sentence does.
func and(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func withMembers(users []string) string {
	if len(users) == 0 {
		return ""
	}
	return " with " + and(users)
}

// deviceGroups own device nodes (/dev/dri/render*, and /dev/nvidia* where
// the driver is set up with NVreg_DeviceFileGID): distributions create them
// as system groups, and so does gpuenv when a host lacks one.
var deviceGroups = map[string]bool{"video": true, "render": true}
