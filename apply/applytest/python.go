package applytest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

const pyVersion = "python3.11"

// fakePython supports "-m venv DIR" and "-m pip" list, install (with
// --dry-run --report -), uninstall and download, over real wheel files
// from a file:// index.
func fakePython(c *Call) int {
	if len(c.Args) < 2 || c.Args[0] != "-m" {
		return c.errorf(2, "%s: fake python runs only -m venv and -m pip", c.Name)
	}
	switch c.Args[1] {
	case "venv":
		args := c.Args[2:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) != 1 || strings.HasPrefix(args[0], "-") {
			return c.errorf(2, "usage: venv ENV_DIR")
		}
		dir := args[0]
		if err := os.MkdirAll(c.path(path.Join(dir, "lib", pyVersion, "site-packages")), 0o755); err != nil {
			return c.errorf(1, "venv: %v", err)
		}
		if err := c.writeFile(path.Join(dir, "pyvenv.cfg"), []byte("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n"), 0o644); err != nil {
			return c.errorf(1, "venv: %v", err)
		}
		if err := c.writeFile(path.Join(dir, "bin", "python"), []byte("#!/bin/false fake python\n"), 0o755); err != nil {
			return c.errorf(1, "venv: %v", err)
		}
		return 0
	case "pip":
		return fakePip(c, c.Args[2:])
	}
	return c.errorf(1, "%s: No module named %s", c.Name, c.Args[1])
}

// site is the site-packages directory of the interpreter called.
func (c *Call) site() string {
	if strings.Contains(c.Argv0, "/") {
		venv := path.Dir(path.Dir(c.Argv0))
		if _, err := os.Stat(c.path(path.Join(venv, "pyvenv.cfg"))); err == nil {
			return path.Join(venv, "lib", pyVersion, "site-packages")
		}
	}
	return "/usr/local/lib/" + pyVersion + "/dist-packages"
}

type dist struct {
	name, version, info string // info: the .dist-info directory inside the root
}

func installed(c *Call) map[string]dist {
	out := map[string]dist{}
	site := c.site()
	m, _ := c.h.Glob(site + "/*.dist-info")
	for _, info := range m {
		data, err := c.readFile(info + "/METADATA")
		if err != nil {
			continue
		}
		var d dist
		d.info = info
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "Name: "); ok {
				d.name = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Version: "); ok {
				d.version = strings.TrimSpace(v)
			}
		}
		out[normName(d.name)] = d
	}
	return out
}

// findWheel looks for name==version in a file:// index: INDEX/<name>/ or
// INDEX itself.
func findWheel(c *Call, index, name, version string) (string, []byte, error) {
	dir, ok := strings.CutPrefix(index, "file://")
	if !ok {
		return "", nil, fmt.Errorf("the fake pip reads file:// indexes only, not %s", index)
	}
	want := fmt.Sprintf("%s-%s-", strings.ToLower(distName(name)), strings.ToLower(version))
	for _, d := range []string{filepath.Join(dir, normName(name)), dir} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(strings.ToLower(e.Name()), want) && strings.HasSuffix(e.Name(), ".whl") {
				data, err := os.ReadFile(filepath.Join(d, e.Name()))
				return e.Name(), data, err
			}
		}
	}
	return "", nil, fmt.Errorf("ERROR: No matching distribution found for %s==%s", name, version)
}

func parseRequirement(r string) (string, string) {
	name, ver, _ := strings.Cut(r, "==")
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return name, ver
}

func fakePip(c *Call, args []string) int {
	if len(args) == 0 {
		return c.errorf(1, "pip: no command")
	}
	sub := args[0]
	opts := map[string]string{}
	var pos []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch a {
		case "--":
			// optparse: what follows is arguments.
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case "--index-url", "-i", "--report", "--dest", "-d", "--format":
			if i+1 < len(args) {
				opts[a] = args[i+1]
			}
			i++
		default:
			if k, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
				opts[k] = v
			} else if strings.HasPrefix(a, "-") {
				opts[a] = "true"
			} else {
				pos = append(pos, a)
			}
		}
	}
	index := opts["--index-url"]
	if index == "" {
		index = opts["-i"]
	}
	have := installed(c)
	switch sub {
	case "list":
		var out []map[string]string
		for _, n := range slices.Sorted(maps.Keys(have)) {
			out = append(out, map[string]string{"name": have[n].name, "version": have[n].version})
		}
		if out == nil {
			out = []map[string]string{}
		}
		json.NewEncoder(c.Stdout).Encode(out)
		return 0
	case "download":
		dest := opts["--dest"]
		if dest == "" {
			dest = opts["-d"]
		}
		for _, r := range pos {
			name, ver := parseRequirement(r)
			if index == "" {
				return c.errorf(1, "ERROR: Could not find a version that satisfies the requirement %s (no index: the fake host is offline)", r)
			}
			fn, data, err := findWheel(c, index, name, ver)
			if err != nil {
				return c.errorf(1, "%v", err)
			}
			if err := c.writeFile(path.Join(dest, fn), data, 0o644); err != nil {
				return c.errorf(1, "ERROR: %v", err)
			}
			fmt.Fprintf(c.Stdout, "Saved %s\n", path.Join(dest, fn))
		}
		return 0
	case "uninstall":
		for _, n := range pos {
			d, ok := have[normName(n)]
			if !ok {
				fmt.Fprintf(c.Stderr, "WARNING: Skipping %s as it is not installed.\n", n)
				continue
			}
			if err := uninstall(c, d); err != nil {
				return c.errorf(1, "ERROR: %v", err)
			}
			fmt.Fprintf(c.Stdout, "Successfully uninstalled %s-%s\n", d.name, d.version)
		}
		return 0
	case "install":
	default:
		return c.errorf(1, "ERROR: unknown command \"%s\"", sub)
	}
	type pick struct {
		name, version string
		data          []byte
	}
	var picks []pick
	for _, r := range pos {
		if strings.HasSuffix(r, ".whl") {
			data, err := c.readFile(r)
			if err != nil {
				return c.errorf(1, "ERROR: Could not install requirement %s: %v", r, err)
			}
			parts := strings.SplitN(path.Base(r), "-", 3)
			if len(parts) < 3 {
				return c.errorf(1, "ERROR: %s is not a valid wheel filename", r)
			}
			picks = append(picks, pick{parts[0], parts[1], data})
			continue
		}
		name, ver := parseRequirement(r)
		if opts["--no-index"] != "" || index == "" {
			return c.errorf(1, "ERROR: Could not find a version that satisfies the requirement %s (from versions: none)", r)
		}
		_, data, err := findWheel(c, index, name, ver)
		if err != nil {
			return c.errorf(1, "%v", err)
		}
		picks = append(picks, pick{name, ver, data})
	}
	if opts["--dry-run"] != "" {
		type item struct {
			Metadata struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"metadata"`
		}
		report := struct {
			Version string `json:"version"`
			Install []item `json:"install"`
		}{Version: "1", Install: []item{}}
		force := opts["--force-reinstall"] != ""
		for _, p := range picks {
			if d, ok := have[normName(p.name)]; ok && d.version == p.version && !force {
				continue
			}
			var it item
			it.Metadata.Name, it.Metadata.Version = p.name, p.version
			report.Install = append(report.Install, it)
		}
		if opts["--report"] == "-" {
			json.NewEncoder(c.Stdout).Encode(report)
		}
		return 0
	}
	for _, p := range picks {
		if d, ok := have[normName(p.name)]; ok {
			if d.version == p.version && opts["--force-reinstall"] == "" {
				fmt.Fprintf(c.Stdout, "Requirement already satisfied: %s==%s\n", p.name, p.version)
				continue
			}
			if err := uninstall(c, d); err != nil {
				return c.errorf(1, "ERROR: %v", err)
			}
		}
		if err := unpack(c, p.data); err != nil {
			return c.errorf(1, "ERROR: %v", err)
		}
		fmt.Fprintf(c.Stdout, "Successfully installed %s-%s\n", p.name, p.version)
	}
	return 0
}

func unpack(c *Call, data []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	site := c.site()
	var info string
	for _, f := range zr.File {
		if strings.Contains(f.Name, "..") {
			return fmt.Errorf("bad wheel member %s", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		if err := c.writeFile(path.Join(site, f.Name), b, 0o644); err != nil {
			return err
		}
		if d, _, ok := strings.Cut(f.Name, "/"); ok && strings.HasSuffix(d, ".dist-info") {
			info = d
		}
	}
	if info != "" {
		return c.writeFile(path.Join(site, info, "INSTALLER"), []byte("pip\n"), 0o644)
	}
	return nil
}

func uninstall(c *Call, d dist) error {
	site := c.site()
	rec, err := c.readFile(d.info + "/RECORD")
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, l := range strings.Split(string(rec), "\n") {
		f, _, _ := strings.Cut(l, ",")
		if f == "" {
			continue
		}
		p := path.Join(site, f)
		os.Remove(c.lpath(p))
		for dir := path.Dir(p); dir != site && dir != "/"; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	os.RemoveAll(c.path(d.info))
	list := make([]string, 0, len(dirs))
	for dir := range dirs {
		list = append(list, dir)
	}
	// Deepest first, so that a parent is empty when its turn comes.
	sort.Slice(list, func(i, j int) bool { return len(list[i]) > len(list[j]) })
	for _, dir := range list {
		os.Remove(c.lpath(dir))
	}
	return nil
}
