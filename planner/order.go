package planner

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Layer is a step's place in the fixed order of a GPU stack: each layer
// needs the ones before it in place. Steps are ordered by their
// dependencies first; among steps free to go, the lower layer goes first,
// then the lower address, so that a plan is the same every time.
type Layer int

const (
	LayerRepositories  Layer = iota + 1 // package sources, before anything is installed from them
	LayerIndexes                        // their indexes fetched, once the sources are in place
	LayerPurge                          // conflicting driver packages out before others come in
	LayerNouveau                        // nouveau blacklisted and out of the initramfs before nvidia is built
	LayerKernelHeaders                  // headers before DKMS builds the module
	LayerDriver                         // the driver packages
	LayerHold                           // held once installed
	LayerCUDA
	LayerCuDNN
	LayerFrameworks
	LayerGroups      // who may open the device nodes
	LayerEnvironment // PATH, the loader cache, CUDA_VISIBLE_DEVICES: after the toolkit they point at
	// LayerDriverSettings is the persistence daemon and other driver
	// services. They need only the driver, but placed right after it they
	// would split the package transaction of the driver, CUDA and cuDNN in
	// two; with the device settings they start once everything is in.
	LayerDriverSettings
	LayerDevices // NVML settings, once the driver is in place
	// LayerContainers is the container toolkit, the engines' runtime
	// entries and the CDI spec, which names the driver's files: after
	// everything it describes is in place.
	LayerContainers
	LayerOther // an address of a kind the planner does not know, last
)

var layerNames = [...]string{
	LayerRepositories:   "repositories",
	LayerIndexes:        "indexes",
	LayerPurge:          "purge",
	LayerNouveau:        "nouveau",
	LayerKernelHeaders:  "kernel-headers",
	LayerDriver:         "driver",
	LayerHold:           "hold",
	LayerCUDA:           "cuda",
	LayerCuDNN:          "cudnn",
	LayerFrameworks:     "frameworks",
	LayerGroups:         "groups",
	LayerEnvironment:    "environment",
	LayerDriverSettings: "driver-settings",
	LayerDevices:        "devices",
	LayerContainers:     "containers",
	LayerOther:          "other",
}

func (l Layer) String() string {
	if l <= 0 || int(l) >= len(layerNames) {
		return fmt.Sprintf("Layer(%d)", int(l))
	}
	return layerNames[l]
}

// StepKind is what the planner needs to know of some of a kind's steps:
// where they go in the order and which facts decide them. A provider
// describes its steps with them (Provider.Steps), so that the planner
// knows no kind by name but its own.
type StepKind struct {
	// Address is a step's whole address ("driver.hold"), or "" for every
	// address of the kind that no other StepKind of it names, the kind's
	// name alone included.
	Address string
	Layer   Layer
	// Sections are the sections of the facts (FactsOS …) the steps are
	// decided from: the saved plan's fingerprint covers them.
	Sections []string
}

// indexKind is the planner's own kind: the refresh of a package
// manager's indexes (RefreshAddress). It depends on every section, as an
// address of no kind does.
const indexKind = "index"

// Kinds are the kinds of step a planner knows: those its providers
// describe, and its own. An address's kind is its part before the first
// dot; within a kind, the StepKind naming the whole address places it,
// and the one with no address places the others.
type Kinds struct {
	// kinds are few: a list scanned beats a map built for every plan.
	kinds []kindSteps
	err   error
}

type kindSteps struct {
	name  string
	steps []StepKind
}

// NewKinds collects the kinds providers describe. Two providers of one
// kind, a StepKind outside its provider's kind, one address described
// twice, or a layer out of range are a programming error, kept for
// Err.
func NewKinds(providers ...Provider) *Kinds {
	k := &Kinds{}
	k.init(providers)
	return k
}

func (k *Kinds) init(providers []Provider) {
	k.kinds = make([]kindSteps, 1, len(providers)+1)
	k.kinds[0] = kindSteps{indexKind, []StepKind{{Layer: LayerIndexes, Sections: allSections}}}
	var errs []error
	for _, p := range providers {
		name := p.Name()
		if name == "" || strings.ContainsAny(name, ".[") {
			errs = append(errs, fmt.Errorf("a provider's kind %q is not a word of an address", name))
			continue
		}
		if slices.ContainsFunc(k.kinds, func(ks kindSteps) bool { return ks.name == name }) {
			errs = append(errs, fmt.Errorf("two providers are of the kind %q", name))
			continue
		}
		steps := p.Steps()
		described := false
		for i, sk := range steps {
			if sk.Address != "" && sk.Address != name && !strings.HasPrefix(sk.Address, name+".") {
				errs = append(errs, fmt.Errorf("the %s provider describes the address %q, which is not of its kind", name, sk.Address))
			}
			if slices.ContainsFunc(steps[:i], func(o StepKind) bool { return o.Address == sk.Address }) {
				errs = append(errs, fmt.Errorf("the %s provider describes the address %q twice", name, sk.Address))
			}
			if sk.Layer <= 0 || sk.Layer >= LayerOther {
				errs = append(errs, fmt.Errorf("the %s provider places %q in no layer of the stack (%v)", name, sk.Address, sk.Layer))
			}
			described = described || sk.Address == "" || sk.Address == name
		}
		if !described {
			errs = append(errs, fmt.Errorf("the %s provider describes neither its kind's other addresses nor %q", name, name))
		}
		k.kinds = append(k.kinds, kindSteps{name, steps})
	}
	k.err = errors.Join(errs...)
}

// steps returns what the kind of name describes; nil for no kind.
func (k *Kinds) steps(name string) []StepKind {
	for _, ks := range k.kinds {
		if ks.name == name {
			return ks.steps
		}
	}
	return nil
}

// Err is what was wrong with the providers' descriptions, if anything.
func (k *Kinds) Err() error { return k.err }

// find returns the StepKind that places address, if any.
func (k *Kinds) find(address string) (StepKind, bool) {
	name, _, _ := strings.Cut(address, ".")
	var other *StepKind
	sks := k.steps(name)
	for i := range sks {
		switch sks[i].Address {
		case address:
			return sks[i], true
		case "":
			other = &sks[i]
		}
	}
	if other == nil {
		return StepKind{}, false
	}
	return *other, true
}

// Known reports whether address is of a kind the planner knows.
func (k *Kinds) Known(address string) bool {
	_, ok := k.find(address)
	return ok
}

// Layer places an address (see Step.Address) in its layer: LayerOther
// for one of no kind known.
func (k *Kinds) Layer(address string) Layer {
	if sk, ok := k.find(address); ok {
		return sk.Layer
	}
	return LayerOther
}

// CycleError reports steps that depend on each other in a circle: a
// provider's programming error, since no order of steps could satisfy it.
type CycleError struct {
	// Cycle is the circle of addresses, its first address repeated at the
	// end: a → b → a.
	Cycle []string
}

func (e *CycleError) Error() string {
	return "steps depend on each other in a cycle: " + strings.Join(e.Cycle, " → ")
}

// Order sorts steps into execution order: every step after the steps it
// depends on, and among steps free to go, by layer and then address. The
// result does not depend on the order of the input. Dependencies on
// addresses that are not among steps are met already and ignored. Steps
// that share an address, or a cycle, are an error.
func Order(steps []plan.Step, kinds *Kinds) ([]plan.Step, error) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		if _, dup := index[s.Address]; dup {
			return nil, fmt.Errorf("two steps have the address %q", s.Address)
		}
		index[s.Address] = i
	}
	// waiting[i] counts the unmet dependencies of step i; next[j] lists
	// the steps waiting for step j.
	waiting := make([]int, len(steps))
	next := make([][]int, len(steps))
	for i, s := range steps {
		seen := map[int]bool{}
		for _, d := range s.DependsOn {
			j, ok := index[d]
			if !ok || seen[j] {
				continue
			}
			if j == i {
				return nil, &CycleError{Cycle: []string{s.Address, s.Address}}
			}
			seen[j] = true
			waiting[i]++
			next[j] = append(next[j], i)
		}
	}
	layers := make([]Layer, len(steps))
	for i, s := range steps {
		layers[i] = kinds.Layer(s.Address)
	}
	ready := &stepQueue{steps: steps, layers: layers}
	for i := range steps {
		if waiting[i] == 0 {
			ready.idx = append(ready.idx, i)
		}
	}
	heap.Init(ready)
	out := make([]plan.Step, 0, len(steps))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, steps[i])
		for _, k := range next[i] {
			waiting[k]--
			if waiting[k] == 0 {
				heap.Push(ready, k)
			}
		}
	}
	if len(out) < len(steps) {
		return nil, &CycleError{Cycle: findCycle(steps, layers, index, waiting)}
	}
	return out, nil
}

// findCycle walks from a step left waiting along its unmet dependencies
// until an address repeats; every step left waiting has one, so the walk
// must close a circle.
func findCycle(steps []plan.Step, layers []Layer, index map[string]int, waiting []int) []string {
	start := -1
	for i := range steps {
		if waiting[i] > 0 && (start < 0 || less(steps, layers, i, start)) {
			start = i
		}
	}
	pos := map[int]int{}
	var path []int
	for i := start; ; {
		if p, ok := pos[i]; ok {
			var cycle []string
			for _, j := range path[p:] {
				cycle = append(cycle, steps[j].Address)
			}
			return append(cycle, steps[i].Address)
		}
		pos[i] = len(path)
		path = append(path, i)
		// Follow the lowest unmet dependency, for a stable message.
		deps := slices.Clone(steps[i].DependsOn)
		slices.Sort(deps)
		moved := false
		for _, d := range deps {
			if j, ok := index[d]; ok && waiting[j] > 0 {
				i, moved = j, true
				break
			}
		}
		if !moved {
			// Unreachable while Order's counts are right; the path so far
			// still names the steps involved.
			var names []string
			for _, j := range path {
				names = append(names, steps[j].Address)
			}
			return names
		}
	}
}

func less(steps []plan.Step, layers []Layer, i, j int) bool {
	li, lj := layers[i], layers[j]
	if li != lj {
		return li < lj
	}
	return steps[i].Address < steps[j].Address
}

// stepQueue is a heap of step indices, lowest layer and address first.
type stepQueue struct {
	steps  []plan.Step
	layers []Layer
	idx    []int
}

func (q *stepQueue) Len() int           { return len(q.idx) }
func (q *stepQueue) Less(a, b int) bool { return less(q.steps, q.layers, q.idx[a], q.idx[b]) }
func (q *stepQueue) Swap(a, b int)      { q.idx[a], q.idx[b] = q.idx[b], q.idx[a] }
func (q *stepQueue) Push(x any)         { q.idx = append(q.idx, x.(int)) }
func (q *stepQueue) Pop() any {
	n := len(q.idx) - 1
	x := q.idx[n]
	q.idx = q.idx[:n]
	return x
}
