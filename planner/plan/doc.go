// Package plan is the plan as data: the plan document, its steps and
// their operations, the warnings and inferences that come with it, the
// reason codes, and the rules every operation must meet (CheckOperation,
// Plan.Validate), which apply checks again on a plan read from a file.
// It plans nothing: the planner (resolve, order, batch, checks) makes
// plans, apply runs them, and both read them through this package.
package plan
