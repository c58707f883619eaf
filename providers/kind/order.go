package kind

import (
	"fmt"
	"slices"
	"strings"
)

// sections are the sections an observer may name.
var sections = []string{
	OS, Kernel, KernelLog, Init, PCI, NVML, Driver, DeviceNodes, Fabric, Packages, Repositories, RepositoryFiles,
	PackageIndexes, CUDA, CuDNN, Python, Groups, Environment, Session, Units, Containers, Context, DeviceAccess, Loader, Health,
}

// ObserveOrder returns the observers of ds in an order that runs every
// observer after each other writer of every section it reads: from what
// they read and write, not from where they are listed. Among observers
// free to run, the one listed first runs first, so that the order, and
// with it the order of the document's warnings, is the same every time.
// A section read and written by no other observer, a section of no name
// the observation has, two observers of one name, or observers that wait
// on each other are an error.
func ObserveOrder(ds []*Descriptor) ([]*Observer, error) {
	var obs []*Observer
	for _, d := range ds {
		for i := range d.Observers {
			obs = append(obs, &d.Observers[i])
		}
	}
	writers := map[string][]int{}
	names := map[string]bool{}
	for i, o := range obs {
		if o.Name == "" || names[o.Name] || o.Observe == nil {
			return nil, fmt.Errorf("observer %q: an observer has a name of its own and a function", o.Name)
		}
		names[o.Name] = true
		for _, sec := range o.Writes {
			if !slices.Contains(sections, sec) {
				return nil, fmt.Errorf("observer %s writes %q, which is no section of the observation", o.Name, sec)
			}
			writers[sec] = append(writers[sec], i)
		}
	}
	// waiting[i] counts the writers observer i waits for; next[j] lists
	// the observers waiting for j.
	waiting := make([]int, len(obs))
	next := make([][]int, len(obs))
	for i, o := range obs {
		for _, sec := range o.Reads {
			if !slices.Contains(sections, sec) {
				return nil, fmt.Errorf("observer %s reads %q, which is no section of the observation", o.Name, sec)
			}
			ws := slices.DeleteFunc(slices.Clone(writers[sec]), func(w int) bool { return w == i })
			if len(ws) == 0 {
				return nil, fmt.Errorf("observer %s reads %s, which no other observer writes", o.Name, sec)
			}
			for _, w := range ws {
				if !slices.Contains(next[w], i) {
					next[w] = append(next[w], i)
					waiting[i]++
				}
			}
		}
	}
	out := make([]*Observer, 0, len(obs))
	done := make([]bool, len(obs))
	for len(out) < len(obs) {
		// The first listed observer free to run; a few dozen observers
		// need no heap.
		i := -1
		for j := range obs {
			if !done[j] && waiting[j] == 0 {
				i = j
				break
			}
		}
		if i < 0 {
			var left []string
			for j, o := range obs {
				if !done[j] {
					left = append(left, o.Name)
				}
			}
			return nil, fmt.Errorf("observers wait on each other in a cycle: %s", strings.Join(left, ", "))
		}
		done[i] = true
		out = append(out, obs[i])
		for _, k := range next[i] {
			waiting[k]--
		}
	}
	return out, nil
}
