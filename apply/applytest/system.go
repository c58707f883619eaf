package applytest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// groupFile is /etc/group or /etc/gshadow as lines of fields.
type groupFile struct {
	c     *Call
	name  string
	lines [][]string
	found bool
}

func readGroupFile(c *Call, name string) (*groupFile, error) {
	g := &groupFile{c: c, name: name}
	data, err := c.readFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, err
	}
	g.found = true
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if l != "" {
			g.lines = append(g.lines, strings.Split(l, ":"))
		}
	}
	return g, nil
}

func (g *groupFile) find(group string) []string {
	for _, l := range g.lines {
		if l[0] == group {
			return l
		}
	}
	return nil
}

// save writes the file as the shadow tools do, the old one kept as
// NAME- and the mode kept.
func (g *groupFile) save() error {
	if !g.found {
		return nil
	}
	mode := os.FileMode(0o644)
	uid, gid := -1, -1
	if fi, err := os.Stat(g.c.path(g.name)); err == nil {
		mode = fi.Mode().Perm()
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid = int(st.Uid), int(st.Gid)
		old, _ := g.c.readFile(g.name)
		if err := g.c.writeFile(g.name+"-", old, mode); err != nil {
			return err
		}
	}
	var b strings.Builder
	for _, l := range g.lines {
		b.WriteString(strings.Join(l, ":") + "\n")
	}
	if err := g.c.writeFile(g.name, []byte(b.String()), mode); err != nil {
		return err
	}
	// The shadow tools keep the files' owner (gshadow is root:shadow).
	if uid >= 0 && os.Geteuid() == 0 {
		os.Chown(g.c.path(g.name), uid, gid)
		os.Chown(g.c.path(g.name+"-"), uid, gid)
	}
	return nil
}

// memberField is the index of the member list: group:x:gid:members,
// gshadow's name:pw:admins:members.
const memberField = 3

func (g *groupFile) setMembers(group string, members []string) {
	if l := g.find(group); l != nil {
		l[memberField] = strings.Join(members, ",")
	}
}

func members(l []string) []string {
	if l == nil || l[memberField] == "" {
		return nil
	}
	return strings.Split(l[memberField], ",")
}

func openGroups(c *Call) (*groupFile, *groupFile, int) {
	grp, err := readGroupFile(c, "/etc/group")
	if err != nil {
		return nil, nil, c.errorf(10, "%s: cannot open /etc/group", c.Name)
	}
	gsh, err := readGroupFile(c, "/etc/gshadow")
	if err != nil {
		return nil, nil, c.errorf(10, "%s: cannot open /etc/gshadow", c.Name)
	}
	return grp, gsh, 0
}

func saveGroups(c *Call, grp, gsh *groupFile) int {
	if err := grp.save(); err != nil {
		return c.errorf(10, "%s: %v", c.Name, err)
	}
	if err := gsh.save(); err != nil {
		return c.errorf(10, "%s: %v", c.Name, err)
	}
	return 0
}

func fakeGroupadd(c *Call) int {
	gid := -1
	var name string
	system := false
	for i := 0; i < len(c.Args); i++ {
		switch a := c.Args[i]; a {
		case "-g", "--gid":
			i++
			if i >= len(c.Args) {
				return c.errorf(2, "groupadd: option requires an argument -- 'g'")
			}
			n, err := strconv.Atoi(c.Args[i])
			if err != nil {
				return c.errorf(3, "groupadd: invalid group ID '%s'", c.Args[i])
			}
			gid = n
		case "-r", "--system":
			system = true
		default:
			if strings.HasPrefix(a, "-") {
				return c.errorf(2, "groupadd: unrecognized option '%s'", a)
			}
			name = a
		}
	}
	grp, gsh, code := openGroups(c)
	if code != 0 {
		return code
	}
	if grp.find(name) != nil {
		return c.errorf(9, "groupadd: group '%s' already exists", name)
	}
	used := map[int]bool{}
	for _, l := range grp.lines {
		n, _ := strconv.Atoi(l[2])
		used[n] = true
	}
	if gid >= 0 && used[gid] {
		return c.errorf(4, "groupadd: GID '%d' already exists", gid)
	}
	if gid < 0 {
		// As login.defs says: system groups count down from 999,
		// others up from 1000.
		if system {
			for gid = 999; used[gid]; gid-- {
			}
		} else {
			for gid = 1000; used[gid]; gid++ {
			}
		}
	}
	grp.lines = append(grp.lines, []string{name, "x", strconv.Itoa(gid), ""})
	if gsh.found {
		gsh.lines = append(gsh.lines, []string{name, "!", "", ""})
	}
	return saveGroups(c, grp, gsh)
}

func fakeGroupdel(c *Call) int {
	if len(c.Args) != 1 {
		return c.errorf(2, "Usage: groupdel [options] GROUP")
	}
	grp, gsh, code := openGroups(c)
	if code != 0 {
		return code
	}
	name := c.Args[0]
	if grp.find(name) == nil {
		return c.errorf(6, "groupdel: group '%s' does not exist", name)
	}
	del := func(g *groupFile) {
		g.lines = slices.DeleteFunc(g.lines, func(l []string) bool { return l[0] == name })
	}
	del(grp)
	del(gsh)
	return saveGroups(c, grp, gsh)
}

// fakeGpasswd supports -a USER GROUP, -d USER GROUP and -M LIST GROUP.
// Its -R would chroot (and -Q is its --root); inside a chroot neither is
// needed, so neither is accepted, as a test that they are not passed.
func fakeGpasswd(c *Call) int {
	if len(c.Args) != 3 {
		return c.errorf(2, "Usage: gpasswd [option] GROUP")
	}
	op, arg, name := c.Args[0], c.Args[1], c.Args[2]
	grp, gsh, code := openGroups(c)
	if code != 0 {
		return code
	}
	l := grp.find(name)
	if l == nil {
		return c.errorf(3, "gpasswd: group '%s' does not exist in /etc/group", name)
	}
	cur := members(l)
	switch op {
	case "-a":
		if !userExists(c, arg) {
			return c.errorf(3, "gpasswd: user '%s' does not exist", arg)
		}
		if !slices.Contains(cur, arg) {
			cur = append(cur, arg)
		}
		fmt.Fprintf(c.Stdout, "Adding user %s to group %s\n", arg, name)
	case "-d":
		if !slices.Contains(cur, arg) {
			return c.errorf(3, "gpasswd: user '%s' is not a member of '%s'", arg, name)
		}
		cur = slices.DeleteFunc(cur, func(s string) bool { return s == arg })
		fmt.Fprintf(c.Stdout, "Removing user %s from group %s\n", arg, name)
	case "-M":
		cur = nil
		if arg != "" {
			cur = strings.Split(arg, ",")
		}
		for _, u := range cur {
			if !userExists(c, u) {
				return c.errorf(3, "gpasswd: user '%s' does not exist", u)
			}
		}
	default:
		return c.errorf(2, "gpasswd: invalid option -- '%s'", strings.TrimPrefix(op, "-"))
	}
	grp.setMembers(name, cur)
	gsh.setMembers(name, cur)
	return saveGroups(c, grp, gsh)
}

func userExists(c *Call, user string) bool {
	data, err := c.readFile("/etc/passwd")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if n, _, _ := strings.Cut(l, ":"); n == user {
			return true
		}
	}
	return false
}

// fakeSystemctl supports enable, disable (links from [Install]
// WantedBy=), is-enabled, is-active, daemon-reload.
func fakeSystemctl(c *Call) int {
	var pos []string
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
		} else if a == "--now" && c.Root != "/" {
			fmt.Fprintln(c.Stderr, "Running in chroot, ignoring command 'start'")
		}
	}
	if len(pos) == 0 {
		return c.errorf(1, "systemctl: no command")
	}
	switch pos[0] {
	case "daemon-reload":
		return 0
	case "is-active":
		if len(pos) > 1 && c.daemonRunning(pos[1]) {
			fmt.Fprintln(c.Stdout, "active")
			return 0
		}
		fmt.Fprintln(c.Stdout, "inactive")
		return 3
	case "start", "stop":
		return c.startStop(pos[0], pos[1:])
	case "enable", "disable", "is-enabled":
	default:
		return c.errorf(1, "Unknown command verb %s.", pos[0])
	}
	for _, unit := range pos[1:] {
		var data []byte
		var err error
		for _, dir := range []string{"/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"} {
			if data, err = c.readFile(path.Join(dir, unit)); err == nil {
				break
			}
		}
		if err != nil {
			return c.errorf(1, "Failed to %s unit: Unit file %s does not exist.", pos[0], unit)
		}
		var wanted []string
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "WantedBy="); ok {
				wanted = append(wanted, strings.Fields(v)...)
			}
		}
		sort.Strings(wanted)
		enabled := false
		for _, t := range wanted {
			link := path.Join("/etc/systemd/system", t+".wants", unit)
			_, lerr := os.Lstat(c.lpath(link))
			switch pos[0] {
			case "is-enabled":
				enabled = enabled || lerr == nil
			case "enable":
				if lerr != nil {
					os.MkdirAll(c.path(path.Dir(link)), 0o755)
					target := "/lib/systemd/system/" + unit
					if err := os.Symlink(target, c.lpath(link)); err != nil {
						return c.errorf(1, "Failed to enable unit: %v", err)
					}
					fmt.Fprintf(c.Stderr, "Created symlink %s → %s.\n", link, target)
				}
			case "disable":
				if lerr == nil {
					os.Remove(c.lpath(link))
					os.Remove(c.lpath(path.Dir(link)))
					fmt.Fprintf(c.Stderr, "Removed \"%s\".\n", link)
				}
			}
		}
		if pos[0] == "is-enabled" {
			if enabled {
				fmt.Fprintln(c.Stdout, "enabled")
				continue
			}
			fmt.Fprintln(c.Stdout, "disabled")
			return 1
		}
	}
	return 0
}

// fakeLdconfig rebuilds /etc/ld.so.cache from the configuration, so that
// the cache follows the files gpuenv writes and restores, as the real
// one's does.
func fakeLdconfig(c *Call) int {
	var dirs []string
	m, _ := c.h.Glob("/etc/ld.so.conf.d/*.conf")
	for _, f := range m {
		data, err := c.readFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				dirs = append(dirs, l)
			}
		}
	}
	sort.Strings(dirs)
	if err := c.writeFile("/etc/ld.so.cache", []byte("fake ld.so.cache\n"+strings.Join(dirs, "\n")+"\n"), 0o644); err != nil {
		return c.errorf(1, "ldconfig: %v", err)
	}
	return 0
}
