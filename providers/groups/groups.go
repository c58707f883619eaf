// Package groups observes the host's groups and who is in them: the
// members listed in /etc/group, and the users whose primary group it is in
// /etc/passwd. A user in the "video" or "render" group by either route can
// open the GPU's device nodes.
package groups

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files read.
const (
	GroupPath  = "/etc/group"
	PasswdPath = "/etc/passwd"
)

// maxProblems bounds the warnings one file yields.
const maxProblems = 10

// Observe reads every group of /etc/group, in file order, with its
// members and the users of /etc/passwd whose primary group it is. A
// malformed line is a warning naming the file and line, and is skipped;
// a missing /etc/group is a warning and no groups.
func Observe(h *host.Host) ([]facts.Group, []facts.Warning) {
	var warns []facts.Warning
	out := []facts.Group{}
	data, err := h.ReadFile(GroupPath)
	if err != nil {
		return out, []facts.Warning{{Path: GroupPath, Message: err.Error()}}
	}
	groups, problems := ParseGroup(data)
	warns = append(warns, capped(GroupPath, problems)...)

	byGID := make(map[uint32][]int, len(groups))
	for i, g := range groups {
		byGID[g.GID] = append(byGID[g.GID], i)
	}
	if pw, err := h.ReadFile(PasswdPath); err != nil {
		warns = append(warns, facts.Warning{Path: PasswdPath, Message: err.Error()})
	} else {
		users, problems := ParsePasswd(pw)
		warns = append(warns, capped(PasswdPath, problems)...)
		for _, u := range users {
			for _, i := range byGID[u.GID] {
				groups[i].PrimaryOf = append(groups[i].PrimaryOf, u.Name)
			}
		}
	}
	if len(groups) > 0 {
		out = groups
	}
	return out, warns
}

func capped(file string, problems []string) []facts.Warning {
	var ws []facts.Warning
	for i, p := range problems {
		if i == maxProblems {
			ws = append(ws, facts.Warning{Path: file, Message: fmt.Sprintf("and %d more problems", len(problems)-maxProblems)})
			break
		}
		ws = append(ws, facts.Warning{Path: file, Message: p})
	}
	return ws
}

// ParseGroup reads group(5) lines, "name:password:gid:member,member".
// Comment lines and NIS "+"/"-" entries are skipped, as the C library
// does with files it cannot resolve.
func ParseGroup(data []byte) (groups []facts.Group, problems []string) {
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		n++
		line = strings.TrimRight(line, "\r")
		if skip(line) {
			continue
		}
		var f [4]string
		if k := fields(line, f[:]); k != len(f) || f[0] == "" {
			problems = append(problems, fmt.Sprintf("line %d: %d fields where group(5) has 4", n, k))
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			problems = append(problems, fmt.Sprintf("line %d: group %s has GID %q", n, f[0], f[2]))
			continue
		}
		members := []string{}
		if f[3] != "" {
			members = make([]string, 0, strings.Count(f[3], ",")+1)
		}
		for m := range strings.SplitSeq(f[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				members = append(members, m)
			}
		}
		if groups == nil {
			groups = make([]facts.Group, 0, bytes.Count(data, []byte("\n"))+1)
		}
		groups = append(groups, facts.Group{Name: f[0], GID: uint32(gid), Members: members})
	}
	return groups, problems
}

// fields cuts line at its colons into f, and returns how many fields
// the line has, which may be more than f holds.
func fields(line string, f []string) int {
	n := 0
	for {
		v, rest, more := strings.Cut(line, ":")
		if n < len(f) {
			f[n] = v
		}
		n++
		if !more {
			return n
		}
		line = rest
	}
}

// User is the part of a passwd(5) entry groups need.
type User struct {
	Name string
	UID  uint32
	GID  uint32
	Home string
	// Shell is the login shell, "" when passwd(5) leaves it empty.
	Shell string
}

// ParsePasswd reads passwd(5) lines, "name:password:uid:gid:gecos:home:shell".
func ParsePasswd(data []byte) (users []User, problems []string) {
	n := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		n++
		line = strings.TrimRight(line, "\r")
		if skip(line) {
			continue
		}
		var f [7]string
		if k := fields(line, f[:]); k != len(f) || f[0] == "" {
			problems = append(problems, fmt.Sprintf("line %d: %d fields where passwd(5) has 7", n, k))
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			problems = append(problems, fmt.Sprintf("line %d: user %s has UID %q, GID %q", n, f[0], f[2], f[3]))
			continue
		}
		if users == nil {
			users = make([]User, 0, bytes.Count(data, []byte("\n"))+1)
		}
		users = append(users, User{Name: f[0], UID: uint32(uid), GID: uint32(gid), Home: f[5], Shell: f[6]})
	}
	return users, problems
}

func skip(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || t[0] == '#' || t[0] == '+' || t[0] == '-'
}
