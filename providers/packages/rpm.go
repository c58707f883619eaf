package packages

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// rpmQueryFormat prints one tab-separated line per package. EPOCHNUM is 0
// for a package without an epoch (EPOCH would print "(none)").
const rpmQueryFormat = `%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\t%{SOURCERPM}\n`

// rpmQuery is the command run on an RPM-family host.
func rpmQuery() []string { return []string{"rpm", "-qa", "--qf", rpmQueryFormat} }

func observeRPM(ctx context.Context, h *host.Host) (facts.Packages, []facts.Warning) {
	out := facts.Packages{Manager: ManagerRPM, Packages: []facts.Package{}}
	var stdout, stderr bytes.Buffer
	err := h.Run(ctx, host.Command{Argv: rpmQuery(), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			msg = ": " + msg
		}
		return out, []facts.Warning{{Message: fmt.Sprintf("querying the RPM database: %v%s", err, msg)}}
	}
	var warns []facts.Warning
	locks, lockWarn := readVersionlock(h)
	if lockWarn != nil {
		warns = append(warns, *lockWarn)
	}
	total, pkgs, problems := parseRPM(stdout.Bytes())
	for i, p := range problems {
		if i == maxProblems {
			warns = append(warns, facts.Warning{Message: fmt.Sprintf("rpm -qa: and %d more problems", len(problems)-maxProblems)})
			break
		}
		warns = append(warns, facts.Warning{Message: "rpm -qa: " + p})
	}
	for i := range pkgs {
		if locked(locks, pkgs[i]) {
			pkgs[i].Want, pkgs[i].Hold = "hold", true
		}
	}
	out.Total = total
	out.Packages = append(out.Packages, pkgs...)
	sortPackages(out.Packages)
	return out, warns
}

// parseRPM reads the output of rpmQuery.
func parseRPM(data []byte) (total int, pkgs []facts.Package, problems []string) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 || f[0] == "" || f[2] == "" {
			problems = append(problems, fmt.Sprintf("line %d: unexpected output %q", n, line))
			continue
		}
		if f[0] == "gpg-pubkey" {
			// rpm lists imported signing keys as packages; they are not.
			continue
		}
		total++
		if !Relevant(f[0]) {
			continue
		}
		version := f[2] + "-" + f[3]
		if f[1] != "0" && f[1] != "(none)" && f[1] != "" {
			version = f[1] + ":" + version
		}
		pkgs = append(pkgs, facts.Package{
			Name:         f[0],
			Version:      version,
			Architecture: f[4],
			Source:       sourceName(f[5], f[2], f[3]),
			State:        "installed",
			Want:         "install",
		})
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, err.Error())
	}
	return total, pkgs, problems
}

// sourceName turns "nvidia-driver-550.54.15-1.el9.src.rpm" into
// "nvidia-driver" when the source carries the binary's version, as it
// nearly always does.
func sourceName(srpm, version, release string) string {
	s := strings.TrimSuffix(srpm, ".src.rpm")
	if s == "(none)" {
		return ""
	}
	if t, ok := strings.CutSuffix(s, "-"+version+"-"+release); ok {
		return t
	}
	return s
}

// readVersionlock reads the dnf versionlock list: one NEVRA glob a line
// ("nvidia-driver-3:550.54.15-1.el9.*"), "!" for an exclusion (not a
// lock), "#" for a comment. A missing file means no locks.
func readVersionlock(h *host.Host) ([]string, *facts.Warning) {
	data, err := h.ReadFile(VersionlockPath)
	if err != nil {
		if _, serr := h.Lstat(VersionlockPath); serr != nil {
			return nil, nil
		}
		return nil, &facts.Warning{Path: VersionlockPath, Message: fmt.Sprintf("reading the version locks: %v", err)}
	}
	var locks []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		locks = append(locks, line)
	}
	return locks, nil
}

// locked reports whether a versionlock pattern matches p in one of the
// spellings dnf accepts: name-epoch:version-release.arch, without the
// epoch, or epoch first.
func locked(patterns []string, p facts.Package) bool {
	if len(patterns) == 0 {
		return false
	}
	epoch, vr, found := strings.Cut(p.Version, ":")
	if !found {
		epoch, vr = "0", p.Version
	}
	forms := []string{
		p.Name + "-" + epoch + ":" + vr + "." + p.Architecture,
		p.Name + "-" + vr + "." + p.Architecture,
		epoch + ":" + p.Name + "-" + vr + "." + p.Architecture,
		p.Name,
	}
	for _, pat := range patterns {
		for _, f := range forms {
			if ok, _ := path.Match(pat, f); ok {
				return true
			}
		}
	}
	return false
}
