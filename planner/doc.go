// Package planner decides what must change on a host for it to match a
// spec, in what order, and why. Its result, a plan.Plan (package
// planner/plan), is plain data: steps, each a resource's change with the
// operations that carry it out, so that the same value is printed for a
// person, saved for a later apply, and executed and journaled by package
// apply.
//
// Providers (one per kind of resource, in package providers) turn the
// desired and observed state of their resource into steps; the planner owns
// the small interface it needs from them, orders the steps, batches package
// transactions, and adds the checks a user needs that no single resource
// asks for.
package planner
