package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// pipNorm is PEP 503's normalised project name.
var pipRun = lazyregexp.New(`[-_.]+`)

func pipNorm(name string) string { return pipRun.ReplaceAllString(strings.ToLower(name), "-") }

// pipPython is the interpreter a pip operation runs: the venv's when it
// names one, else the one it names, else python3.
func pipPython(op *plan.PackagesOp) string {
	if op.Venv != "" {
		return path.Join(op.Venv, "bin", "python")
	}
	if op.Python != "" {
		return op.Python
	}
	return "python3"
}

// pipQuiet are options of every pip run. Package arguments follow a "--"
// in every pip command (pip's optparse stops reading options there), so
// that none is read as an option.
var pipQuiet = []string{"--disable-pip-version-check", "--no-input"}

// pipList is what pip says is installed, by normalised name.
func (x pipManager) pipList(ctx context.Context, ws *Workspace, python string) (map[string]string, error) {
	out, err := x.output(ctx, ws, nil, python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
	if err != nil {
		return nil, fmt.Errorf("listing the packages of %s: %w", python, err)
	}
	var list []struct{ Name, Version string }
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("pip list of %s: %w", python, err)
	}
	m := make(map[string]string, len(list))
	for _, p := range list {
		m[pipNorm(p.Name)] = p.Version
	}
	return m, nil
}

func pipRequirement(p plan.PackagePin) string {
	s := p.Name
	if len(p.Extras) > 0 {
		s += "[" + strings.Join(p.Extras, ",") + "]"
	}
	return s + "==" + p.Version
}

func pipIndex(op *plan.PackagesOp) []string {
	if op.IndexURL == "" {
		return nil
	}
	return []string{"--index-url", op.IndexURL}
}

func (x pipManager) venvExists(venv string) (bool, error) {
	_, err := x.Host.Lstat(path.Join(venv, "bin", "python"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// pipManager carries out pip transactions in an interpreter's or a
// virtual environment's site-packages.
type pipManager struct{ *HostExecutor }

var _ packageManager = pipManager{}

// waitLock does nothing: pip takes no lock.
func (pipManager) waitLock(context.Context, *Workspace) error { return nil }

// pinPending does nothing: pip's pins are exact when planned.
func (pipManager) pinPending(context.Context, *Workspace, *plan.PackagesOp) error { return nil }

func (x pipManager) readPrior(ctx context.Context, ws *Workspace, op *plan.PackagesOp, inv *PackagesInverse) (priorState, error) {
	inv.Python, inv.Venv, inv.IndexURL = pipPython(op), op.Venv, op.IndexURL
	if op.Venv != "" {
		ok, err := x.venvExists(op.Venv)
		if err != nil {
			return nil, err
		}
		if !ok {
			// Undoing a transaction into a new environment is removing
			// the environment: nothing of the host's is in it.
			if _, err := x.Host.Lstat(op.Venv); err == nil {
				return nil, fmt.Errorf("%s exists but is not a virtual environment (no bin/python); gpuenv will not create one over it", op.Venv)
			}
			inv.VenvCreated = true
			return nil, nil
		}
	}
	before, err := x.pipList(ctx, ws, inv.Python)
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for _, p := range op.Install {
		want[pipNorm(p.Name)] = p.Version
	}
	return &pipPrior{x: x, op: op, python: inv.Python, before: before, want: want}, nil
}

// pipPrior is what pip lists as installed before a pip transaction, by
// normalised name.
type pipPrior struct {
	x      pipManager
	op     *plan.PackagesOp
	python string
	before map[string]string
	// want is the version the transaction installs of each package.
	want map[string]string
}

func (p *pipPrior) direct(op *plan.PackagesOp) (affected, changes []string, err error) {
	for _, i := range op.Install {
		affected = append(affected, pipNorm(i.Name))
	}
	for _, r := range op.Remove {
		affected = append(affected, pipNorm(r))
	}
	for _, n := range affected {
		if p.changes(n) {
			changes = append(changes, n)
		}
	}
	return affected, changes, nil
}

func (p *pipPrior) simulate(ctx context.Context, ws *Workspace, op *plan.PackagesOp) ([]string, error) {
	if len(op.Install) == 0 {
		return nil, nil
	}
	// pip's dry-run report names every distribution the install
	// would bring in or change, dependencies included.
	argv := []string{p.python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-"}
	argv = append(append(append(argv, pipQuiet...), pipReinstall(op)...), pipIndex(op)...)
	argv = append(argv, "--")
	for _, i := range op.Install {
		argv = append(argv, pipRequirement(i))
	}
	out, err := p.x.output(ctx, ws, nil, argv...)
	if err != nil {
		return nil, fmt.Errorf("pip cannot carry out the transaction (dry run failed; see %s): %w", ws.Dir+"/"+logName, err)
	}
	var report struct {
		Install []struct {
			Metadata struct{ Name, Version string } `json:"metadata"`
		} `json:"install"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		return nil, fmt.Errorf("reading pip's dry-run report: %w", err)
	}
	var names []string
	for _, i := range report.Install {
		names = append(names, pipNorm(i.Metadata.Name))
	}
	return names, nil
}

// changes: a package installed at another version than the transaction
// installs, or removed.
func (p *pipPrior) changes(name string) bool {
	_, pinned := p.want[name]
	return p.before[name] != "" && (p.want[name] != p.before[name] || pinned && p.op.Reinstall)
}

// pipReinstall are the options of a reinstall (-replace): the pinned
// version over itself, its dependencies left as they are, since pip
// would otherwise reinstall every one of them too.
func pipReinstall(op *plan.PackagesOp) []string {
	if op.Reinstall {
		return []string{"--force-reinstall", "--no-deps"}
	}
	return nil
}

func (p *pipPrior) prior(ctx context.Context, ws *Workspace, seq int, name string, changed bool) ([]PriorPackage, error) {
	pp := PriorPackage{Name: name, Version: p.before[name]}
	if changed {
		saved, err := p.x.saveWheel(ctx, ws, seq, p.op, p.python, name, pp.Version)
		if err != nil {
			return nil, err
		}
		pp.Saved = saved
	}
	return []PriorPackage{pp}, nil
}

func (p *pipPrior) finish(*PackagesInverse, map[string]bool) {}

// recover does nothing: pip keeps no transaction state to repair.
func (pipManager) recover(context.Context, *Workspace) error { return nil }

// check does nothing: undo checks a pip transaction, comparing each
// package with its prior version.
func (pipManager) check(context.Context, *Workspace, []Expectation) error { return nil }

// saveWheel downloads the installed version's wheel into the generation,
// from the plan's index and then from pip's configured one.
func (x pipManager) saveWheel(ctx context.Context, ws *Workspace, seq int, op *plan.PackagesOp, python, name, version string) (string, error) {
	sub := path.Join(packagesDir, strconv.Itoa(seq)+"-"+name)
	dir := filepath.Join(ws.Path, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	inRoot := path.Join(ws.Dir, sub)
	indexes := [][]string{pipIndex(op)}
	if op.IndexURL != "" {
		indexes = append(indexes, nil)
	}
	var lastErr error
	for _, idx := range indexes {
		argv := append([]string{python, "-m", "pip", "download", "--no-deps", "--dest", inRoot}, pipQuiet...)
		argv = append(append(argv, idx...), "--", name+"=="+version)
		if lastErr = x.command(ctx, ws, nil, argv...); lastErr != nil {
			continue
		}
		m, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
		if len(m) == 1 {
			return path.Join(inRoot, filepath.Base(m[0])), syncDir(dir)
		}
		lastErr = fmt.Errorf("pip download left %d wheels", len(m))
	}
	return "", fmt.Errorf("cannot save %s %s for rollback (see %s): %w", name, version, ws.Dir+"/"+logName, lastErr)
}

func (x pipManager) run(ctx context.Context, ws *Workspace, op *plan.PackagesOp) error {
	python := pipPython(op)
	if op.Venv != "" {
		ok, err := x.venvExists(op.Venv)
		if err != nil {
			return err
		}
		if !ok {
			base := op.Python
			if base == "" {
				base = "python3"
			}
			if err := x.command(ctx, ws, nil, base, "-m", "venv", "--", op.Venv); err != nil {
				return err
			}
		}
	}
	if len(op.Remove) > 0 {
		argv := append([]string{python, "-m", "pip", "uninstall", "--yes"}, pipQuiet...)
		if err := x.command(ctx, ws, nil, append(append(argv, "--"), op.Remove...)...); err != nil {
			return err
		}
	}
	if len(op.Install) > 0 {
		argv := append([]string{python, "-m", "pip", "install"}, pipQuiet...)
		argv = append(append(append(argv, pipReinstall(op)...), pipIndex(op)...), "--")
		for _, p := range op.Install {
			argv = append(argv, pipRequirement(p))
		}
		return x.command(ctx, ws, nil, argv...)
	}
	return nil
}

func (x pipManager) undo(ctx context.Context, ws *Workspace, inv *PackagesInverse) error {
	if inv.VenvCreated {
		rp, err := x.Host.Resolve(inv.Venv)
		if err != nil {
			return err
		}
		if filepath.Clean(rp) == filepath.Clean(x.Host.Root()) || inv.Venv == "/" {
			return fmt.Errorf("refusing to remove %s", inv.Venv)
		}
		if err := os.RemoveAll(rp); err != nil {
			return err
		}
		return syncDir(filepath.Dir(rp))
	}
	cur, err := x.pipList(ctx, ws, inv.Python)
	if err != nil {
		return err
	}
	var wheels, fetch, remove []string
	for _, p := range inv.Packages {
		c := cur[p.Name]
		switch {
		case p.Version == "" && c != "":
			remove = append(remove, p.Name)
		case p.Version != "" && c != p.Version:
			if _, err := x.Host.Stat(p.Saved); p.Saved == "" || err != nil {
				// Pruned by history --keep: the index may still have it.
				ws.say("the saved wheel of %s %s is gone; installing it from the index", p.Name, p.Version)
				fetch = append(fetch, p.Name+"=="+p.Version)
			} else {
				wheels = append(wheels, p.Saved)
			}
		}
	}
	if len(remove) > 0 {
		argv := append([]string{inv.Python, "-m", "pip", "uninstall", "--yes"}, pipQuiet...)
		if err := x.command(ctx, ws, nil, append(append(argv, "--"), remove...)...); err != nil {
			return err
		}
	}
	if len(wheels) > 0 {
		// --no-index: rollback works offline, from the saved wheels only.
		argv := append([]string{inv.Python, "-m", "pip", "install", "--no-deps", "--no-index"}, pipQuiet...)
		if err := x.command(ctx, ws, nil, append(append(argv, "--"), wheels...)...); err != nil {
			return err
		}
	}
	if len(fetch) > 0 {
		argv := append([]string{inv.Python, "-m", "pip", "install", "--no-deps"}, pipQuiet...)
		if inv.IndexURL != "" {
			argv = append(argv, "--index-url", inv.IndexURL)
		}
		return x.command(ctx, ws, nil, append(append(argv, "--"), fetch...)...)
	}
	return nil
}
