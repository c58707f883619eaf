package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/fleet"
	"github.com/gpuenv/gpuenv/planner/plantest"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// fleetSpec is what an operator rolls out to a fleet of CUDA machines:
// the 550 driver, CUDA 12.4 and cuDNN 9, sources left to inference.
const fleetSpec = "driver { version = \"550.*\" }\ncuda { version = \"12.4\" }\ncudnn { version = \"9.*\" }\n"

// refusing fails the test on any process: observing a Debian-family
// fixture starts none, and planning from a document must start none.
type refusing struct{ tb testing.TB }

func (r refusing) Run(_ context.Context, c host.Command) error {
	r.tb.Errorf("a process was started: %q", c.Argv)
	return fmt.Errorf("refused %q", c.Argv)
}

// member is one kind of host of the test fleet: a fixture root observed,
// then varied as machines of one model drift apart.
type member struct {
	name string
	root string
	vary func(*facts.Observation)
}

// members are the kinds of host of the test fleet, from the fixture roots
// of testdata/roots: converged hosts, hosts with another driver, hosts
// whose CUDA was removed, a GPU gpuenv's tables do not know, a fresh
// image whose apt lists were never fetched, Debian's own driver.
var members = []member{
	{name: "converged", root: "ubuntu2204-cuda-lists"},
	{name: "older-driver", root: "ubuntu2204-cuda-lists", vary: func(o *facts.Observation) {
		// The 550.40.07 of an earlier rollout, which no index lists any
		// more but the spec still admits.
		setInstalled(o, "nvidia-driver-550", "550.40.07-0ubuntu1")
		o.NVML.DriverVersion = "550.40.07"
	}},
	{name: "other-branch", root: "ubuntu2204-cuda-lists", vary: func(o *facts.Observation) {
		renameInstalled(o, "nvidia-driver-550", "nvidia-driver-535", "535.183.01-0ubuntu0.22.04.1")
	}},
	{name: "no-cuda", root: "ubuntu2204-cuda-lists", vary: func(o *facts.Observation) {
		o.CUDA = facts.CUDA{Toolkits: []facts.Toolkit{}}
		removeInstalled(o, "cuda-toolkit-12-4")
	}},
	{name: "unknown-gpu", root: "ubuntu2204-cuda-lists", vary: func(o *facts.Observation) {
		for i := range o.PCI {
			o.PCI[i].DeviceID = 0x2fff
			o.PCI[i].Model, o.PCI[i].Architecture, o.PCI[i].ComputeCapability = "", "", ""
		}
	}},
	{name: "working", root: "ubuntu2204-working"},
	{name: "mismatch", root: "ubuntu2204-mismatch"},
	{name: "fresh-h100", root: "ubuntu2204-h100-fresh"},
	{name: "debian-lists", root: "debian12-lists"},
	{name: "no-lists", root: "apt-no-lists"},
}

// setInstalled makes version the installed one of package name, in the
// package database and in the indexes, as observe would find it.
func setInstalled(o *facts.Observation, name, version string) {
	for i := range o.Packages.Packages {
		if o.Packages.Packages[i].Name == name {
			o.Packages.Packages[i].Version = version
		}
	}
	for i := range o.PackageIndexes.Packages {
		p := &o.PackageIndexes.Packages[i]
		if p.Name != name {
			continue
		}
		p.Installed = version
		vs := []facts.IndexedVersion{{Version: version, Installed: true, Priority: 100, PriorityFrom: "installed", Origins: []string{}}}
		for _, v := range p.Versions {
			if !v.Installed {
				vs = append(vs, v)
			}
		}
		p.Versions = vs
	}
}

func renameInstalled(o *facts.Observation, from, to, version string) {
	for i := range o.Packages.Packages {
		if o.Packages.Packages[i].Name == from {
			o.Packages.Packages[i].Name, o.Packages.Packages[i].Version = to, version
		}
	}
}

func removeInstalled(o *facts.Observation, name string) {
	pkgs := o.Packages.Packages[:0]
	for _, p := range o.Packages.Packages {
		if p.Name != name {
			pkgs = append(pkgs, p)
		}
	}
	o.Packages.Packages = pkgs
}

var (
	corpusOnce sync.Once
	corpusDocs map[string]*facts.Observation
)

// corpus observes each member's fixture root once per test binary, as
// observe --json would on the host, and returns the observations by
// member name, varied.
func corpus(tb testing.TB) map[string]*facts.Observation {
	tb.Helper()
	corpusOnce.Do(func() {
		observed := map[string][]byte{}
		corpusDocs = map[string]*facts.Observation{}
		for _, m := range members {
			if observed[m.root] == nil {
				root := hosttest.Build(tb, m.root)
				h := hosttest.New(tb, root, host.WithRunner(refusing{tb}))
				data, err := json.Marshal(providers.Observe(context.Background(), h, providers.ObserveOptions{}))
				if err != nil {
					tb.Fatal(err)
				}
				observed[m.root] = data
			}
			// Each member decodes its own copy, so that varying one
			// leaves the others as observed.
			var o facts.Observation
			if err := json.Unmarshal(observed[m.root], &o); err != nil {
				tb.Fatal(err)
			}
			if m.vary != nil {
				m.vary(&o)
			}
			corpusDocs[m.name] = &o
		}
	})
	if len(corpusDocs) != len(members) {
		tb.Fatal("the corpus could not be built")
	}
	return corpusDocs
}

// document is the JSON line of a member's observation as host number i
// of the fleet.
func document(tb testing.TB, o *facts.Observation, hostname string) []byte {
	tb.Helper()
	c := *o
	c.Hostname = hostname
	data, err := json.Marshal(&c)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// kernels are the running kernels a kind of host is seen with: machines
// of one model drift apart by the kernel they last booted, and each is a
// configuration of its own (the driver's steps are decided from it).
var kernels = []string{"", "5.15.0-105-generic", "6.5.0-35-generic"}

// configurations are the documents of the test fleet's distinct
// configurations: each member with each kernel, a few dozen as in a real
// fleet, its hostname and root placeholders to fill.
func configurations(tb testing.TB) [][]byte {
	tb.Helper()
	docs := corpus(tb)
	var out [][]byte
	for _, m := range members {
		for _, k := range kernels {
			o := *docs[m.name]
			if k != "" {
				o.Kernel.Release = k
			}
			o.Root = "ROOT-PLACEHOLDER"
			out = append(out, document(tb, &o, "HOSTNAME-PLACEHOLDER"))
		}
	}
	return out
}

// fleetStream is a JSON-lines stream of n hosts cycling through the
// configurations, named gpu-00000 on; it makes each line as it is read,
// so a stream of any length costs the memory of one cycle. With distinct
// set each host's root differs too, a fact planning reads, so that no
// two documents plan alike.
type fleetStream struct {
	lines    [][]byte
	n, i     int
	cur      []byte
	distinct bool
}

func newFleetStream(tb testing.TB, n int) *fleetStream {
	tb.Helper()
	return &fleetStream{n: n, lines: configurations(tb)}
}

// newDistinctStream is a stream of n documents no two of which are alike
// in a fact planning reads.
func newDistinctStream(tb testing.TB, n int) *fleetStream {
	s := newFleetStream(tb, n)
	s.distinct = true
	return s
}

func (s *fleetStream) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		if s.i == s.n {
			return 0, io.EOF
		}
		line := s.lines[s.i%len(s.lines)]
		name := fmt.Sprintf("gpu-%05d", s.i)
		root := "/"
		if s.distinct {
			root = "/srv/hosts/" + name
		}
		line = bytes.Replace(line, []byte("ROOT-PLACEHOLDER"), []byte(root), 1)
		s.cur = append(bytes.Replace(line, []byte("HOSTNAME-PLACEHOLDER"), []byte(name), 1), '\n')
		s.i++
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

// newPlanner is the planner plan --facts gives each host: every provider,
// with versions from the document's indexes only.
func newPlanner() *planner.Planner {
	pl := planner.New(providers.Planners()...)
	pl.Candidates = providers.FactsCandidates()
	return pl
}

// planStream plans src against a stream of documents and returns the
// rows and the summary.
func planStream(tb testing.TB, src string, stream io.Reader, keep bool) ([]fleet.Host, *fleet.Summary) {
	tb.Helper()
	var rows []fleet.Host
	sum, err := fleet.Plan(context.Background(), fleet.Options{Spec: plantest.LoadSpec(tb, src), Planner: newPlanner},
		[]fleet.Input{{Stream: stream, Name: "-"}}, func(h *fleet.Host) error {
			if keep {
				rows = append(rows, *h)
			}
			return nil
		})
	if err != nil {
		tb.Fatal(err)
	}
	return rows, sum
}

// BenchmarkPlanFacts plans the fleet spec against b.N saved observations
// streamed as JSON lines, with one worker per GOMAXPROCS: "fleet" cycles
// through the test fleet's few dozen configurations, as a real fleet's
// hosts do; "distinct" makes every document unlike the others.
func BenchmarkPlanFacts(b *testing.B) {
	for _, bc := range []struct {
		name   string
		stream func(testing.TB, int) *fleetStream
	}{{"fleet", newFleetStream}, {"distinct", newDistinctStream}} {
		b.Run(bc.name, func(b *testing.B) {
			stream := bc.stream(b, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := hosttest.CPUTime(b)
			_, sum := planStream(b, fleetSpec, stream, false)
			b.StopTimer()
			// On a machine shared with other work the wall clock says more
			// of the machine than of the code; CPU time per host says what
			// the cores must give.
			cpu.Report(b)
			if sum.Hosts != b.N {
				b.Fatalf("%d hosts planned, want %d", sum.Hosts, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "hosts/s")
		})
	}
}
