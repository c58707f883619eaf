package export

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gpuenv/gpuenv/planner/doctor"
)

// Slurm's node health check. slurmd runs HealthCheckProgram (slurm.conf)
// every HealthCheckInterval seconds, and Prolog before a job's first step,
// as root with no arguments, and gives each 60 seconds. Draining is
// `scontrol update NodeName=N State=DRAIN Reason=…`: the node runs the jobs
// it has and takes no new ones; `State=RESUME` takes the drain away. The
// rule, as LBNL's NHC keeps it: a node is drained with a reason that says
// who drained it, and resumed only when that reason is its own, so that a
// node an administrator drained stays drained whatever gpuenv finds.
//
// When a Prolog fails, slurmctld drains the node with the reason "Prolog
// error" only if it is not drained already (validate_node_specs in
// src/slurmctld/node_mgr.c), so a node gpuenv drained first keeps gpuenv's
// reason, and gpuenv resumes it once it is healthy again.

// SlurmReasonPrefix begins the reason of every drain gpuenv makes.
const SlurmReasonPrefix = "gpuenv:"

// slurmReasonMax bounds the reason: sinfo and scontrol show it on one
// line, and the details are one `gpuenv doctor` away.
const slurmReasonMax = 200

// SlurmNode is a node as scontrol shows it.
type SlurmNode struct {
	Name string
	// State is scontrol's State field: the base state and its flags
	// joined by "+" ("IDLE+DRAIN", "MIXED+DRAIN", "DOWN+NOT_RESPONDING").
	State string
	// Reason is why the node is drained or down, without the
	// "[user@time]" scontrol appends; "" when none.
	Reason string
}

// Drained reports whether the node is drained or draining.
func (n SlurmNode) Drained() bool {
	for _, f := range strings.Split(n.State, "+") {
		if f == "DRAIN" || f == "DRAINED" || f == "DRAINING" {
			return true
		}
	}
	return false
}

// DrainedByGpuenv reports whether the drain is gpuenv's own.
func (n SlurmNode) DrainedByGpuenv() bool {
	return n.Drained() && strings.HasPrefix(n.Reason, SlurmReasonPrefix)
}

// reasonStamp is what scontrol appends to a reason: who set it and when.
var reasonStamp = regexp.MustCompile(`\s*\[[^\[\]]*@[^\[\]]*\]$`)

// ParseSlurmNode reads `scontrol show node NAME` (its default, multi-line
// form, where Reason is a line of its own and may hold spaces).
func ParseSlurmNode(out string) (SlurmNode, error) {
	var n SlurmNode
	state := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "NodeName="):
			n.Name, _, _ = strings.Cut(strings.TrimPrefix(line, "NodeName="), " ")
		case strings.HasPrefix(line, "State="):
			n.State, _, _ = strings.Cut(strings.TrimPrefix(line, "State="), " ")
			state = true
		case strings.HasPrefix(line, "Reason="):
			n.Reason = reasonStamp.ReplaceAllString(strings.TrimPrefix(line, "Reason="), "")
		}
	}
	if n.Name == "" || !state {
		return SlurmNode{}, fmt.Errorf("scontrol show node printed no NodeName and State: %q", firstLine(out))
	}
	return n, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// SlurmAction is what the health check does to the node.
type SlurmAction string

const (
	// SlurmNone leaves the node as it is.
	SlurmNone SlurmAction = "none"
	// SlurmDrain drains it (or rewrites gpuenv's reason on a node it
	// drained before, when the problem changed).
	SlurmDrain SlurmAction = "drain"
	// SlurmResume resumes a node gpuenv drained.
	SlurmResume SlurmAction = "resume"
)

// SlurmDecision is the health check's verdict on one node.
type SlurmDecision struct {
	Action SlurmAction `json:"action"`
	// Reason is the drain reason, for SlurmDrain.
	Reason string `json:"reason,omitempty"`
	// Why says, for a person, why this action.
	Why string `json:"why"`
}

// DecideSlurm decides what to do with node given doctor's verdict:
// healthy, or not with reason (from SlurmReason).
func DecideSlurm(node SlurmNode, healthy bool, reason string) SlurmDecision {
	switch {
	case healthy && node.DrainedByGpuenv():
		return SlurmDecision{Action: SlurmResume, Why: "healthy again; gpuenv drained it (" + node.Reason + ")"}
	case healthy && node.Drained():
		return SlurmDecision{Action: SlurmNone, Why: "healthy, but drained by someone else (" + orNone(node.Reason) + "): left drained"}
	case healthy:
		return SlurmDecision{Action: SlurmNone, Why: "healthy"}
	case node.DrainedByGpuenv() && node.Reason == reason:
		return SlurmDecision{Action: SlurmNone, Why: "still unhealthy; already drained by gpuenv"}
	case node.DrainedByGpuenv():
		return SlurmDecision{Action: SlurmDrain, Reason: reason, Why: "still unhealthy, for another reason than when gpuenv drained it"}
	case node.Drained():
		return SlurmDecision{Action: SlurmNone, Why: "unhealthy, but already drained by someone else (" + orNone(node.Reason) + "): left as it is"}
	}
	return SlurmDecision{Action: SlurmDrain, Reason: reason, Why: "unhealthy"}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// SlurmReason is the drain reason for an unhealthy report: the first
// problem of a GPU's health when there is one (a failing GPU is what
// whoever reads the reason must act on: a software problem is mended on
// the node, a GPU's is sent for repair), else the first problem; and how
// many more there are.
func SlurmReason(r *doctor.Report) string {
	first := ""
	for _, c := range r.Checks {
		if c.Status == doctor.Problem && slices.Contains(doctor.HealthChecks, c.ID) {
			first = c.Summary
			break
		}
	}
	for _, c := range r.Checks {
		if first != "" {
			break
		}
		if c.Status == doctor.Problem {
			first = c.Summary
		}
	}
	s := SlurmReasonPrefix + " " + first
	if more := r.Counts.Problems - 1; more == 1 {
		s += " (and 1 more problem)"
	} else if more > 1 {
		s += fmt.Sprintf(" (and %d more problems)", more)
	}
	return CleanReason(s)
}

// CleanReason makes s one line of at most slurmReasonMax bytes, cut at a
// character boundary: scontrol takes the reason as one argument, but
// sinfo and the accounting database show it on one line.
func CleanReason(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= slurmReasonMax {
		return s
	}
	cut := slurmReasonMax - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ScontrolShow, ScontrolDrain and ScontrolResume are scontrol's arguments
// for reading the node and changing its state.
func ScontrolShow(node string) []string { return []string{"show", "node", node} }

func ScontrolDrain(node, reason string) []string {
	return []string{"update", "NodeName=" + node, "State=DRAIN", "Reason=" + reason}
}

func ScontrolResume(node string) []string {
	return []string{"update", "NodeName=" + node, "State=RESUME"}
}
