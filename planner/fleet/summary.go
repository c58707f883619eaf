package fleet

import (
	"cmp"
	"slices"
	"strings"

	planpkg "github.com/gpuenv/gpuenv/planner/plan"
)

// Summary is what a fleet's plans come to: hosts by outcome, and the
// groups that say why. It is the one thing a run keeps that grows with
// the fleet, and it grows only with the number of distinct reasons (at
// most maxGroups per list) and not with the number of hosts.
type Summary struct {
	Hosts     int `json:"hosts"`
	Unchanged int `json:"unchanged"`
	// Change counts the hosts with steps, none of which needs a reboot;
	// Reboot those with a step that does. Together with Unchanged and
	// Refused they make Hosts.
	Change  int `json:"change"`
	Reboot  int `json:"reboot"`
	Refused int `json:"refused"`
	// Changes group the hosts with steps by step (symbol and address,
	// "~ driver"): a host is counted once in each of its steps' groups.
	Changes []Group `json:"changes"`
	// Reboots group the hosts needing a reboot by the steps that need it.
	Reboots []Group `json:"reboots"`
	// Refusals group refused hosts by reason.
	Refusals []Group `json:"refusals"`
	// Warnings group the planned hosts by the warnings of their plans.
	Warnings []Group `json:"warnings"`
	// Lacking groups the hosts whose documents are older than the schema
	// by each fact they lack, refused or not.
	Lacking []Group `json:"lacking"`

	// Plans are the hosts grouped by their plan: one group for each
	// distinct plan and each distinct refusal, largest first. plan
	// --facts --json writes them apart from the summary, before it.
	Plans []*PlanGroup `json:"-"`

	groups   map[*[]Group]map[string]*slot
	plans    map[string]*PlanGroup
	canaries int
}

// PlanGroup is the hosts that share one plan, or one refusal: what their
// rows share, shown once.
type PlanGroup struct {
	// ID numbers the groups in the order their first hosts came.
	ID          int             `json:"id"`
	Hosts       int             `json:"hosts"`
	Outcome     Outcome         `json:"outcome"`
	Summary     planpkg.Summary `json:"summary"`
	NeedsReboot bool            `json:"needs_reboot"`
	Steps       []StepRow       `json:"steps,omitempty"`
	Warnings    []string        `json:"warnings,omitempty"`
	Lacks       []string        `json:"lacks,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	// Error is the first host's error in full.
	Error string `json:"error,omitempty"`
	// First names the group's first hosts, in input order, at most
	// maxFirst.
	First []string `json:"first"`
	// Canaries name the hosts to try the spec on first, at most the
	// number --canaries asks for: those whose last apply succeeded
	// before the others, then in input order.
	Canaries []string `json:"canaries,omitempty"`

	canaries []canary
}

type canary struct {
	rank, seq int
	name      string
}

// maxPlans bounds the groups of plans, for a run whose hosts each plan
// differently; the rest are counted in one group, OtherPlans.
const maxPlans = 1000

// OtherPlans is the reason of the group past maxPlans.
const OtherPlans = "(more distinct plans than gpuenv lists)"

// Group is the hosts that share one reason.
type Group struct {
	Key   string `json:"key"`
	Hosts int    `json:"hosts"`
	// First names the first hosts of the group, in input order, at most
	// maxFirst: the rows of --json name them all.
	First []string `json:"first"`
	// Error is, for a group of refused hosts, the first one's error in
	// full: the others' differ only in what their hosts have.
	Error string `json:"error,omitempty"`
}

const (
	maxFirst = 5
	// maxGroups bounds a list of groups, for a run whose reasons differ
	// host by host; the rest count under Other.
	maxGroups = 100
	// Other is the key of the group past maxGroups.
	Other = "(other reasons)"
)

func newSummary(canaries int) *Summary {
	s := &Summary{Changes: []Group{}, Reboots: []Group{}, Refusals: []Group{}, Warnings: []Group{}, Lacking: []Group{}, Plans: []*PlanGroup{}}
	s.groups = map[*[]Group]map[string]*slot{}
	s.plans = map[string]*PlanGroup{}
	s.canaries = canaries
	return s
}

// unreadableKey is the plan key of a document that could not be read.
const unreadableKey = "unreadable"

// add counts one host's row, and numbers its group.
func (s *Summary) add(h *Host) {
	s.Hosts++
	s.plan(h)
	switch h.Outcome {
	case Unchanged:
		s.Unchanged++
	case Change:
		s.Change++
	case Reboot:
		s.Reboot++
	case Refused:
		s.Refused++
		s.count(&s.Refusals, h.Reason, h.Name, h.Error)
	}
	for _, st := range h.Steps {
		s.count(&s.Changes, st.Action.Symbol()+" "+st.Address, h.Name, "")
		if st.NeedsReboot {
			s.count(&s.Reboots, st.Address, h.Name, "")
		}
	}
	for _, w := range h.Warnings {
		s.count(&s.Warnings, w, h.Name, "")
	}
	for _, k := range h.Lacks {
		s.count(&s.Lacking, k, h.Name, "")
	}
}

// count counts the current host (number s.Hosts) in list's group key,
// once however many of its steps fall in it.
func (s *Summary) count(list *[]Group, key, host, err string) {
	idx := s.groups[list]
	if idx == nil {
		idx = map[string]*slot{}
		s.groups[list] = idx
	}
	sl, ok := idx[key]
	if !ok && len(*list) >= maxGroups {
		key = Other
		sl, ok = idx[key]
	}
	if !ok {
		sl = &slot{i: len(*list)}
		idx[key] = sl
		*list = append(*list, Group{Key: key, Error: err})
	}
	if sl.last == s.Hosts {
		return
	}
	sl.last = s.Hosts
	g := &(*list)[sl.i]
	g.Hosts++
	if len(g.First) < maxFirst {
		g.First = append(g.First, host)
	}
}

// plan counts h in the group of its plan.
func (s *Summary) plan(h *Host) {
	key := h.key
	if key == "" {
		// A row made without a verdict (a test's): its outcome and
		// reason are all that group it.
		key = h.Outcome.String() + "\x00" + h.Reason
	}
	g, ok := s.plans[key]
	if !ok && len(s.Plans) >= maxPlans {
		key = OtherPlans
		g, ok = s.plans[key]
		if !ok {
			g = &PlanGroup{ID: len(s.Plans) + 1, Outcome: h.Outcome, Reason: OtherPlans}
			s.plans[key] = g
			s.Plans = append(s.Plans, g)
		}
	}
	if !ok {
		g = &PlanGroup{ID: len(s.Plans) + 1, Outcome: h.Outcome, Summary: h.Summary, NeedsReboot: h.NeedsReboot,
			Steps: h.Steps, Warnings: h.Warnings, Lacks: h.Lacks, Reason: h.Reason, Error: h.Error}
		s.plans[key] = g
		s.Plans = append(s.Plans, g)
	}
	h.Group = g.ID
	g.Hosts++
	if len(g.First) < maxFirst {
		g.First = append(g.First, h.Name)
	}
	if s.canaries > 0 {
		g.offer(canary{rank: canaryRank(h.LastApply), seq: s.Hosts, name: h.Name}, s.canaries)
	}
}

// offer keeps c among the group's n best canaries: the least rank, then
// the earliest host.
func (g *PlanGroup) offer(c canary, n int) {
	if len(g.canaries) == n && g.canaries[n-1].rank <= c.rank {
		return
	}
	i, _ := slices.BinarySearchFunc(g.canaries, c, func(a, b canary) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.seq, b.seq))
	})
	g.canaries = slices.Insert(g.canaries, i, c)
	if len(g.canaries) > n {
		g.canaries = g.canaries[:n]
	}
}

// slot is where a group is in its list, and the last host counted in it.
type slot struct {
	i, last int
}

// finish orders every list: largest group first, then by key; changes
// by address before symbol, so that one resource's groups stand together.
func (s *Summary) finish() {
	byKey := func(g Group) string { return g.Key }
	byAddress := func(g Group) string {
		_, addr, _ := strings.Cut(g.Key, " ")
		return addr + "\x00" + g.Key
	}
	for _, l := range []struct {
		list []Group
		key  func(Group) string
	}{{s.Changes, byAddress}, {s.Reboots, byKey}, {s.Refusals, byKey}, {s.Warnings, byKey}, {s.Lacking, byKey}} {
		slices.SortStableFunc(l.list, func(a, b Group) int {
			return cmp.Or(cmp.Compare(b.Hosts, a.Hosts), cmp.Compare(l.key(a), l.key(b)))
		})
	}
	s.groups = nil
	for _, g := range s.Plans {
		for _, c := range g.canaries {
			g.Canaries = append(g.Canaries, c.name)
		}
		g.canaries = nil
	}
	slices.SortStableFunc(s.Plans, func(a, b *PlanGroup) int {
		return cmp.Or(cmp.Compare(b.Hosts, a.Hosts), cmp.Compare(a.ID, b.ID))
	})
	s.plans = nil
}
