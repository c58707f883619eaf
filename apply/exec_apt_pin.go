package apply

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
	"github.com/gpuenv/gpuenv/spec/version"
)

// The preparation of an apt transaction reads the package indexes once
// (HostExecutor.Indexes), after the operations before it (a refresh, a
// repository) ran; they answer its questions about versions without a
// process: which version a pin left to apply gets, which packages a pin
// depends on at one exact version, and which package file in the package
// cache is the one the index describes.

// indexesFor returns the package indexes for the transaction op, read
// once for it; nil when they cannot answer for apt (no reader, no apt
// index on disk), and apt is asked instead.
func (x aptManager) indexesFor(ctx context.Context, ws *Workspace, op *plan.PackagesOp) *facts.PackageIndexes {
	if x.indexesOp != op {
		x.indexes, x.indexesOp = x.readIndexes(ctx, ws), op
	}
	return x.indexes
}

// readIndexes reads the root's package indexes; nil when they cannot
// answer for apt, having logged why.
func (x aptManager) readIndexes(ctx context.Context, ws *Workspace) *facts.PackageIndexes {
	if x.Indexes == nil {
		return nil
	}
	ix, err := x.Indexes(ctx)
	if err != nil {
		fmt.Fprintf(ws.Log, "gpuenv: reading the package indexes: %v; asking apt instead\n", err)
		return nil
	}
	if ix == nil || ix.Manager != string(plan.ManagerApt) || len(ix.Indexes) == 0 {
		return nil
	}
	return ix
}

func (x aptManager) waitLock(ctx context.Context, ws *Workspace) error {
	return x.waitDpkgLock(ctx, ws)
}

func (x aptManager) readPrior(ctx context.Context, ws *Workspace, op *plan.PackagesOp, _ *PackagesInverse) (priorState, error) {
	before, err := x.readDpkg()
	if err != nil {
		return nil, err
	}
	return &aptPrior{x: x, before: before, ix: x.indexesFor(ctx, ws, op)}, nil
}

// pinPending pins what the plan left to apply, then the packages the pins
// depend on at one exact version, and checks the pins as the planner's
// own are checked: a version read from the indexes reaches apt-get's
// command line as one written in the plan would.
func (x aptManager) pinPending(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error {
	ix := x.indexesFor(ctx, ws, op)
	if err := x.pinLatest(ctx, ws, op, ix); err != nil {
		return err
	}
	x.pinExactDependencies(ctx, ws, op, ix)
	if err := plan.CheckOperation(plan.Operation{Kind: plan.OpPackages, Packages: op}); err != nil {
		return fmt.Errorf("the pins apply chose: %w", err)
	}
	return nil
}

// listed returns the versions apt can install of each of names: from the
// indexes, in apt's order of preference (preferred), when they keep every
// one of them; else from one apt-cache policy of them all, newest first. from says where they came from, as the
// subject of "list".
func (x aptManager) listed(ctx context.Context, ws *Workspace, names []string, ix *facts.PackageIndexes) (map[string][]string, string, error) {
	out := map[string][]string{}
	fromIndexes := ix != nil
	for _, n := range names {
		fromIndexes = fromIndexes && pkgdb.Relevant(n)
	}
	if fromIndexes {
		for _, n := range names {
			out[n] = preferred(ix, n)
		}
		return out, "the package indexes list", nil
	}
	data, err := x.output(ctx, ws, aptEnv, append([]string{"apt-cache", "policy", "--"}, names...)...)
	if err != nil {
		return nil, "", fmt.Errorf("asking apt for the versions of %s: %w", strings.Join(names, ", "), err)
	}
	policies, err := pkgdb.ParseAptPolicy(data)
	if err != nil {
		return nil, "", fmt.Errorf("reading apt-cache policy: %w", err)
	}
	for _, pol := range policies {
		out[pol.Name] = pol.Installable()
	}
	return out, "apt-cache policy lists", nil
}

// preferred lists the versions of name the indexes list in the order apt
// prefers them, as the planner picks from a source's (planner.Archive's
// Offers): the highest priority first, the newest first on a tie, none
// apt may never install (a negative priority).
func preferred(ix *facts.PackageIndexes, name string) []string {
	p := pkgdb.IndexedPackage(ix, name)
	if p == nil {
		return nil
	}
	var vs []facts.IndexedVersion
	for _, v := range p.Versions {
		if len(v.Origins) > 0 && v.Priority >= 0 {
			vs = append(vs, v)
		}
	}
	slices.SortStableFunc(vs, func(a, b facts.IndexedVersion) int { return b.Priority - a.Priority })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

// pinLatest fixes the versions the plan could only learn after apply: the
// steps before the transaction configured the repositories or fetched the
// indexes they come from. The pins of one step follow each other in the
// transaction with the same constraint, and get one version as the
// planner picks one for a set (pkgdb.PickVersion): the first, in apt's
// order of preference, that satisfies the constraint and that each of
// them is listed at. The journal then records the exact versions.
func (x aptManager) pinLatest(ctx context.Context, ws *Workspace, op *plan.PackagesOp, ix *facts.PackageIndexes) error {
	var names []string
	for _, p := range op.Install {
		if p.KnownAfterApply() {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	listed, from, err := x.listed(ctx, ws, names, ix)
	if err != nil {
		return err
	}
	for i := 0; i < len(op.Install); {
		if !op.Install[i].KnownAfterApply() {
			i++
			continue
		}
		end := i + 1
		for end < len(op.Install) && op.Install[end].KnownAfterApply() && op.Install[end].Constraint == op.Install[i].Constraint {
			end++
		}
		set := op.Install[i:end]
		if err := pinSet(ws, set, listed, from); err != nil {
			return err
		}
		i = end
	}
	return nil
}

// pinSet gives the pins of one step, which share a constraint, the version
// the planner's rule picks for them. Pins that no one version suits are
// not one set after all (two steps with the same constraint): each gets
// the newest version of its own.
func pinSet(ws *Workspace, set []plan.PackagePin, listed map[string][]string, from string) error {
	c, err := version.ParseConstraint(set[0].Constraint)
	if set[0].Constraint == "" {
		c, err = version.Constraint{}, nil
	}
	if err != nil {
		return fmt.Errorf("package %s: %w", set[0].Name, err)
	}
	keep := func(_ string, up version.Version) bool { return c.Check(up) }
	others := map[string][]string{}
	for _, p := range set[1:] {
		others[p.Name] = listed[p.Name]
	}
	v, _ := pkgdb.PickVersion(string(plan.ManagerApt), listed[set[0].Name], others, keep)
	for i := range set {
		p := &set[i]
		pick := v
		if pick == "" {
			pick, _ = pkgdb.PickVersion(string(plan.ManagerApt), listed[p.Name], nil, keep)
		}
		if pick == "" {
			has := "nothing"
			if vs := listed[p.Name]; len(vs) > 0 {
				has = strings.Join(vs, ", ")
			}
			return fmt.Errorf("apt lists no version of %s that satisfies %q, even with the plan's repositories configured and its indexes fetched (%s %s)", p.Name, p.Constraint, from, has)
		}
		ws.say("apt: pinned %s=%s, the newest that satisfies %q of the versions %s", p.Name, pick, p.Constraint, from)
		p.Version = pick
	}
	return nil
}

// pinExactDependencies adds to the transaction the packages its pins depend
// on at one exact version. Debian's driver packages depend on each other
// with "(= version)": installing nvidia-smi=535.261.03-1 while the archive's
// candidate for nvidia-alternative is 535.309.01 leaves apt unable to
// resolve the transaction, since apt takes candidates for what is not
// pinned. Pinning them too installs the consistent set the plan asked for.
// The relations come from the indexes; the pins they do not describe are
// shown by one apt-cache show for them all (and again for dependencies
// found that way, which the indexes do not describe either). A pin apt
// cannot show (a version no longer in the archive) is left as it is: the
// dry run that follows reports what apt cannot do.
func (x aptManager) pinExactDependencies(ctx context.Context, ws *Workspace, op *plan.PackagesOp, ix *facts.PackageIndexes) {
	pinned := map[string]bool{}
	for _, p := range op.Install {
		pinned[p.Name] = true
	}
	add := func(p plan.PackagePin, deps []plan.PackagePin) {
		for _, dep := range deps {
			if pinned[dep.Name] {
				continue
			}
			pinned[dep.Name] = true
			ws.say("apt: pinning %s=%s, which %s %s depends on exactly", dep.Name, dep.Version, p.Name, p.Version)
			op.Install = append(op.Install, dep)
		}
	}
	for next := 0; next < len(op.Install); {
		var ask []plan.PackagePin
		for ; next < len(op.Install); next++ {
			p := op.Install[next]
			if v := pkgdb.IndexedVersion(ix, p.Name, p.Version); v != nil && len(v.Origins) > 0 {
				add(p, pinsOf(v.ExactDepends))
			} else {
				ask = append(ask, p)
			}
		}
		if len(ask) == 0 {
			break
		}
		argv := []string{"apt-cache", "show", "--"}
		for _, p := range ask {
			argv = append(argv, p.Name+"="+p.Version)
		}
		// apt-cache shows what it finds and fails for the rest, which
		// is left to the dry run.
		out, _ := x.output(ctx, ws, aptEnv, argv...)
		shown := map[string][]plan.PackagePin{}
		for _, para := range bytes.Split(out, []byte("\n\n")) {
			name, ver := controlField(para, "Package"), controlField(para, "Version")
			if _, dup := shown[name+"="+ver]; !dup && name != "" {
				shown[name+"="+ver] = exactDependencies(para)
			}
		}
		for _, p := range ask {
			add(p, shown[p.Name+"="+p.Version])
		}
	}
}

// pinsOf turns "name=version" relations into pins.
func pinsOf(rels []string) []plan.PackagePin {
	out := make([]plan.PackagePin, 0, len(rels))
	for _, r := range rels {
		name, v, _ := strings.Cut(r, "=")
		out = append(out, plan.PackagePin{Name: name, Version: v})
	}
	return out
}

// controlField is the value of field in one control paragraph.
func controlField(para []byte, field string) string {
	for line := range bytes.Lines(para) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// exactDependencies reads the first paragraph of apt-cache show and returns
// the dependencies (Depends, Pre-Depends) that name one package at one
// exact version, without alternatives.
func exactDependencies(show []byte) []plan.PackagePin {
	fields := map[string]string{}
	var last string
	for _, line := range strings.Split(string(show), "\n") {
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			last = ""
			continue
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return pinsOf(pkgdb.ExactRelations(fields["Pre-Depends"], fields["Depends"]))
}
