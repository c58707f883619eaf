package providers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/providers/kind"
)

const module = "github.com/gpuenv/gpuenv"

// notKinds are the packages under providers/ that plan and observe
// nothing: host access, active probes and captures, the descriptors' own
// package, and the folder the observers that plan nothing live in (each
// of them is a package that must describe itself).
var notKinds = []string{"export", "host", "kind", "observer", "probe", "testdata"}

// TestDescriptorsListEveryPackage: a package under providers/ or
// providers/observer/ that is not in the descriptor list would neither
// plan nor observe, without a word. Every package declares its Kind, and
// the list names each.
func TestDescriptorsListEveryPackage(t *testing.T) {
	listed := listedDescriptors(t)
	var dirs []string
	for _, parent := range []string{".", "observer"} {
		entries, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !(parent == "." && slices.Contains(notKinds, e.Name())) {
				dirs = append(dirs, path.Join(parent, e.Name()))
			}
		}
	}
	if !slices.Contains(dirs, "observer/kernellog") {
		t.Fatalf("the observers are not where this test looks: %q", dirs)
	}
	for _, dir := range dirs {
		if !declaresKind(t, dir) {
			t.Errorf("providers/%s declares no Kind (a *kind.Descriptor): every package under providers/ that plans or observes describes itself once", dir)
		}
		if !listed[module+"/providers/"+dir] {
			t.Errorf("providers/%s is missing from the descriptor list (providers/planners.go)", dir)
		}
	}
	names := map[string]bool{}
	for _, d := range descriptors {
		if names[d.Name] {
			t.Errorf("two descriptors are named %q", d.Name)
		}
		names[d.Name] = true
	}
}

// listedDescriptors returns the import paths of the packages whose Kind
// the descriptor list names.
func listedDescriptors(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "planners.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]string{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		imports[name] = p
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "descriptors" {
			return true
		}
		for _, el := range vs.Values[0].(*ast.CompositeLit).Elts {
			sel, ok := el.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Kind" {
				t.Fatalf("the descriptor list holds %T, not a package's Kind", el)
			}
			out[imports[sel.X.(*ast.Ident).Name]] = true
		}
		return false
	})
	if len(out) == 0 {
		t.Fatal("planners.go has no descriptor list")
	}
	return out
}

// declaresKind reports whether the package in dir declares the variable
// Kind outside its tests.
func declaresKind(t *testing.T, dir string) bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if o := f.Scope.Lookup("Kind"); o != nil && o.Kind == ast.Var {
			return true
		}
	}
	return false
}

// TestEveryAddressHasOneKind: the planner places a step and picks the
// facts its plan is fingerprinted with by the one kind its address is
// of; the kinds the providers describe place the stack as the design
// orders it.
func TestEveryAddressHasOneKind(t *testing.T) {
	k := Kinds()
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
	drv := []string{planner.FactsOS, planner.FactsKernel, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages}
	for _, tt := range []struct {
		addr     string
		layer    planner.Layer
		sections []string
	}{
		{"repository.cuda", planner.LayerRepositories, []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
		{"repository.distro-components", planner.LayerRepositories, []string{planner.FactsOS, planner.FactsPackages, planner.FactsRepos, planner.FactsRepoFiles}},
		{"driver.purge", planner.LayerPurge, drv},
		{"kernel.nouveau", planner.LayerNouveau, drv},
		{"kernel.headers", planner.LayerKernelHeaders, drv},
		{"driver", planner.LayerDriver, drv},
		{"driver.hold", planner.LayerHold, drv},
		{"driver.persistence", planner.LayerDriverSettings, append(slices.Clone(drv), planner.FactsInit, planner.FactsUnits)},
		{"driver.fabricmanager", planner.LayerDriverSettings, append(slices.Clone(drv), planner.FactsInit, planner.FactsUnits)},
		{"cuda", planner.LayerCUDA, []string{planner.FactsOS, planner.FactsPCI, planner.FactsNVML, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA}},
		{"cudnn", planner.LayerCuDNN, []string{planner.FactsOS, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN}},
		{"framework.pytorch", planner.LayerFrameworks, []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
		{"framework.jax[/opt]", planner.LayerFrameworks, []string{planner.FactsOS, planner.FactsPCI, planner.FactsDriver, planner.FactsPackages, planner.FactsCUDA, planner.FactsCuDNN, planner.FactsPython}},
		{"group.video", planner.LayerGroups, []string{planner.FactsGroups, planner.FactsDeviceNodes}},
		{"environment", planner.LayerEnvironment, []string{planner.FactsCUDA, planner.FactsEnvironment, planner.FactsInit, planner.FactsGroups}},
		{"device.0", planner.LayerDevices, []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
		{"device.boot", planner.LayerDevices, []string{planner.FactsPCI, planner.FactsNVML, planner.FactsDevices, planner.FactsInit, planner.FactsUnits}},
		{"container_toolkit", planner.LayerContainers, []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsDevices, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
		{"container_toolkit.engine.docker", planner.LayerContainers, []string{planner.FactsOS, planner.FactsDriver, planner.FactsDeviceNodes, planner.FactsDevices, planner.FactsPackages, planner.FactsInit, planner.FactsContainers}},
		{"index.apt", planner.LayerIndexes, nil},
	} {
		if got := k.Layer(tt.addr); got != tt.layer {
			t.Errorf("Layer(%q) = %v, want %v", tt.addr, got, tt.layer)
		}
		if tt.sections == nil {
			continue
		}
		if diff := cmp.Diff(tt.sections, k.Sections(tt.addr)); diff != "" {
			t.Errorf("Sections(%q) (-want +got):\n%s", tt.addr, diff)
		}
	}
	// Each kind's addresses are its own: no two descriptors share a
	// name, and a name of no descriptor places nothing.
	for _, d := range descriptors {
		for _, sk := range d.Steps {
			addr := sk.Address
			if addr == "" {
				addr = d.Name + ".other"
			}
			n, _, _ := strings.Cut(addr, ".")
			if n != d.Name {
				t.Errorf("%s describes %q, of the kind %q", d.Name, sk.Address, n)
			}
		}
	}
	for _, addr := range []string{"drivers", "groups.video", "devices.0", "containers", ""} {
		if k.Known(addr) {
			t.Errorf("%q is of a kind, and none plans it", addr)
		}
	}
}

// TestObserversFeedEveryReaderAfterItsWriters holds the providers' own
// observers to what kind.ObserveOrder promises: each reads a section
// only after every other observer that writes it ran, and the package
// indexes apply reads again need only their own writers.
func TestObserversFeedEveryReaderAfterItsWriters(t *testing.T) {
	order, err := observers()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range descriptors {
		n += len(d.Observers)
	}
	if len(order) != n {
		t.Fatalf("%d observers ordered of %d", len(order), n)
	}
	for i, r := range order {
		for _, sec := range r.Reads {
			for _, w := range order[i+1:] {
				if slices.Contains(w.Writes, sec) {
					t.Errorf("%s runs before %s, which writes %s that it reads", r.Name, w.Name, sec)
				}
			}
		}
	}
	var got []string
	for _, o := range observersFor(kind.PackageIndexes) {
		got = append(got, o.Name)
	}
	if diff := cmp.Diff([]string{"system", "packages", "repository", "packages.indexes"}, got); diff != "" {
		t.Errorf("observers of the package indexes (-want +got):\n%s", diff)
	}
}
