// Package plan is the plan as data: the plan document, its steps and
// their operations, the warnings and inferences that come with it, the
// reason codes, the rules every operation must meet (CheckOperation,
// Plan.Validate, CheckFormatVersion), which apply checks again on a plan
// read from a file, and the status file apply leaves for the next plan
// (ApplyStatus). It plans nothing: the planner (resolve, order, batch,
// checks) makes plans, apply runs them, and both read them through this
// package, so apply never reaches the planner.
package plan
