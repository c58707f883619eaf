package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// ReplaceReason is what a step planned only because of -replace says.
const ReplaceReason = "requested with -replace"

// replaceable are the kinds -replace reinstalls: those whose resource is
// a set of packages at a version the host has installed.
var replaceable = []string{"driver", "cuda", "cudnn", "framework"}

// CheckReplace refuses a -replace address that names no resource gpuenv
// can reinstall, with those it can.
func CheckReplace(addrs []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range addrs {
		kind, rest, dotted := strings.Cut(a, ".")
		ok := false
		for _, k := range replaceable {
			ok = ok || kind == k
		}
		switch {
		case !ok:
		case kind == "framework":
			ok = !dotted || (rest != "" && !strings.HasPrefix(rest, "["))
		default:
			// driver.hold or cuda.x is no package set of its own.
			ok = !dotted
		}
		if !ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid replace address",
				Detail: fmt.Sprintf("-replace %q names nothing gpuenv can reinstall. -replace reinstalls packages at the version installed now: "+
					"driver (its packages and kernel module), cuda, cudnn, framework.NAME (framework alone: every framework of the spec).", a),
			})
		}
	}
	return diags
}

// replaces reports whether the step at address reinstalls what the
// -replace address names: the address itself, or for a framework kind
// or name each of its environments (framework.pytorch[/opt/venv]).
func replaces(address, replace string) bool {
	if replace == "framework" || strings.HasPrefix(replace, "framework.") {
		return targeted(address, replace)
	}
	return address == replace
}

// Replacing reports whether -replace asks for the resource at address to
// be reinstalled. A provider whose resource matches the spec plans a
// reinstall of it at the installed versions when it does.
func (r *Request) Replacing(address string) bool {
	for _, a := range r.Replace {
		if replaces(address, a) {
			return true
		}
	}
	return false
}

// checkReplaced holds the providers' steps to the -replace addresses:
// each must name a resource of the spec that is installed, which then
// has a step. A resource the host lacks is created, not replaced, and one
// the spec does not declare (or declares absent) has nothing to
// reinstall: both are errors naming the address.
func checkReplaced(steps []plan.Step, addrs []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, a := range addrs {
		found := false
		for i := range steps {
			s := &steps[i]
			if !replaces(s.Address, a) {
				continue
			}
			found = true
			switch s.Action {
			case plan.Create:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Nothing to replace",
					Detail: fmt.Sprintf("-replace %s: %s is not installed on the host, so there is nothing to reinstall. "+
						"Plan without -replace %s to install it.", a, s.Address, a),
				})
			case plan.Delete:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Nothing to replace",
					Detail:   fmt.Sprintf("-replace %s: the spec removes %s (absent = true), so it is not reinstalled.", a, s.Address),
				})
			}
		}
		if !found {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Nothing to replace",
				Detail: fmt.Sprintf("-replace %s names no resource of the spec that is installed on the host: "+
					"the spec declares no %s block for it, or declares it absent, or it is the host's (a container's driver).", a, strings.SplitN(a, ".", 2)[0]),
			})
		}
	}
	return diags
}
