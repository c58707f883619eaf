package applytest

import (
	"fmt"
	"sort"
)

// fakeAptCache answers "apt-cache policy NAME…" and "apt-cache madison
// NAME…" from the fake archive and the root's dpkg database, in apt's
// format (LC_ALL=C), as the planner asks for candidate versions.
func fakeAptCache(c *Call) int {
	if len(c.Args) == 0 {
		return c.errorf(100, "E: No operation given")
	}
	arch, d, err := aptState(c)
	if err != nil {
		return c.errorf(100, "E: %v", err)
	}
	const source = "file:/fake-archive bookworm/main amd64 Packages"
	for _, name := range c.Args[1:] {
		var versions []string
		inArchive := map[string]bool{}
		for _, deb := range arch[name] {
			v := deb.control.get("Version")
			versions = append(versions, v)
			inArchive[v] = true
		}
		installed := d.installedVersion(name)
		if installed != "" && !inArchive[installed] {
			versions = append(versions, installed)
		}
		if len(versions) == 0 {
			continue
		}
		sort.Slice(versions, func(i, j int) bool { return compareVersions(versions[i], versions[j]) > 0 })
		switch c.Args[0] {
		case "madison":
			for _, v := range versions {
				if inArchive[v] {
					fmt.Fprintf(c.Stdout, "%10s | %s | %s\n", name, v, source)
				}
			}
		case "policy":
			candidate := "(none)"
			for _, v := range versions {
				if inArchive[v] {
					candidate = v
					break
				}
			}
			inst := installed
			if inst == "" {
				inst = "(none)"
			}
			fmt.Fprintf(c.Stdout, "%s:\n  Installed: %s\n  Candidate: %s\n  Version table:\n", name, inst, candidate)
			for _, v := range versions {
				mark := "    "
				if v == installed {
					mark = " ***"
				}
				prio := 500
				if !inArchive[v] {
					prio = 100
				}
				fmt.Fprintf(c.Stdout, "%s %s %d\n", mark, v, prio)
				if inArchive[v] {
					fmt.Fprintf(c.Stdout, "        500 %s\n", source)
				}
				if v == installed {
					fmt.Fprintf(c.Stdout, "        100 %s\n", statusPath)
				}
			}
		default:
			return c.errorf(100, "E: Invalid operation %s", c.Args[0])
		}
	}
	return 0
}
