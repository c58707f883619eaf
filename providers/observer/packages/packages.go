package packages

import (
	"bytes"
	"context"
	"fmt"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// maxProblems bounds the warnings `rpm -qa` yields: output that is
// garbage throughout says so in a few lines, not in thousands.
const maxProblems = 10

// Observe reads the package database of the host's OS family, as
// facts.OS.Family names it: "deb" reads dpkg's files, "rpm" runs
// `rpm -qa` inside the root (ctx bounds it), "" reads dpkg's files when
// they exist and otherwise reports no manager. It never fails: what could
// not be read is a warning naming the file or command, and the rest of
// the observation stands.
//
// The returned Packages lists only relevant packages (see pkgdb.Relevant)
// that are installed or half-installed, sorted by name and architecture;
// Total counts every package the database holds that is not
// "not-installed".
func Observe(ctx context.Context, h *host.Host, family string) (facts.Packages, []facts.Warning) {
	switch family {
	case "rpm":
		return observeRPM(ctx, h)
	case "deb":
		return observeDpkg(h)
	}
	if _, err := h.Lstat(pkgdb.StatusPath); err == nil {
		return observeDpkg(h)
	}
	return facts.Packages{Packages: []facts.Package{}}, nil
}

func observeDpkg(h *host.Host) (facts.Packages, []facts.Warning) {
	db := pkgdb.ReadDpkg(h)
	out := facts.Packages{Manager: facts.DatabaseDpkg, Packages: db.Packages, Total: db.Total, Interrupted: db.Interrupted}
	if out.Packages == nil {
		out.Packages = []facts.Package{}
	}
	return out, db.Warnings
}

func observeRPM(ctx context.Context, h *host.Host) (facts.Packages, []facts.Warning) {
	out := facts.Packages{Manager: facts.DatabaseRPM, Packages: []facts.Package{}}
	var stdout bytes.Buffer
	var stderr childproc.Tail
	err := h.Run(ctx, host.Command{Argv: pkgdb.RPMQuery(), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		msg := stderr.Text(0)
		if msg != "" {
			msg = ": " + msg
		}
		return out, []facts.Warning{{Message: fmt.Sprintf("querying the RPM database: %v%s", err, msg)}}
	}
	var warns []facts.Warning
	locks, lockWarn := pkgdb.ReadVersionlock(h)
	if lockWarn != nil {
		warns = append(warns, *lockWarn)
	}
	total, pkgs, problems := pkgdb.ParseRPM(stdout.Bytes(), pkgdb.Relevant)
	for i, p := range problems {
		if i == maxProblems {
			warns = append(warns, facts.Warning{Message: fmt.Sprintf("rpm -qa: and %d more problems", len(problems)-maxProblems)})
			break
		}
		warns = append(warns, facts.Warning{Message: "rpm -qa: " + p})
	}
	for i := range pkgs {
		if pkgdb.Locked(locks, pkgs[i]) {
			pkgs[i].Want, pkgs[i].Hold = "hold", true
		}
	}
	out.Total = total
	out.Packages = append(out.Packages, pkgs...)
	pkgdb.SortPackages(out.Packages)
	return out, warns
}
