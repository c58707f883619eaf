package planner

import (
	"container/heap"
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

// LayerOf places an address (see Step.Address) in its layer.
func LayerOf(address string) Layer {
	kind, rest, _ := strings.Cut(address, ".")
	switch kind {
	case "repository":
		return LayerRepositories
	case "index":
		return LayerIndexes
	case "kernel":
		if rest == "headers" {
			return LayerKernelHeaders
		}
		return LayerNouveau
	case "driver":
		switch {
		case rest == "":
			return LayerDriver
		case rest == "purge":
			return LayerPurge
		case rest == "hold":
			return LayerHold
		}
		return LayerDriverSettings
	case "cuda":
		return LayerCUDA
	case "cudnn":
		return LayerCuDNN
	case "framework":
		return LayerFrameworks
	case "group":
		return LayerGroups
	case "environment":
		return LayerEnvironment
	case "device":
		return LayerDevices
	case "container_toolkit":
		return LayerContainers
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
func Order(steps []plan.Step) ([]plan.Step, error) {
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
	ready := &stepQueue{steps: steps}
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
		return nil, &CycleError{Cycle: findCycle(steps, index, waiting)}
	}
	return out, nil
}

// findCycle walks from a step left waiting along its unmet dependencies
// until an address repeats; every step left waiting has one, so the walk
// must close a circle.
func findCycle(steps []plan.Step, index map[string]int, waiting []int) []string {
	start := -1
	for i := range steps {
		if waiting[i] > 0 && (start < 0 || less(steps, i, start)) {
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

func less(steps []plan.Step, i, j int) bool {
	li, lj := LayerOf(steps[i].Address), LayerOf(steps[j].Address)
	if li != lj {
		return li < lj
	}
	return steps[i].Address < steps[j].Address
}

// stepQueue is a heap of step indices, lowest layer and address first.
type stepQueue struct {
	steps []plan.Step
	idx   []int
}

func (q *stepQueue) Len() int           { return len(q.idx) }
func (q *stepQueue) Less(a, b int) bool { return less(q.steps, q.idx[a], q.idx[b]) }
func (q *stepQueue) Swap(a, b int)      { q.idx[a], q.idx[b] = q.idx[b], q.idx[a] }
func (q *stepQueue) Push(x any)         { q.idx = append(q.idx, x.(int)) }
func (q *stepQueue) Pop() any {
	n := len(q.idx) - 1
	x := q.idx[n]
	q.idx = q.idx[:n]
	return x
}
