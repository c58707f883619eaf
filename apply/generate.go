package apply

import (
	"context"
	"fmt"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// Generator makes the content of a file a plan leaves to apply
// (plan.FileOp.Generate says what makes it: plan.GenerateCDI) from
// the host as the operations before it left it. cmd hands one in, built on
// the observers; apply runs no observer of its own, so that what it
// writes is either in the plan or made by this one function, and
// journaled before it is written.
type Generator func(ctx context.Context, what string) (string, error)

// generates reports whether op's content is made at apply.
func generates(op plan.Operation) bool { return op.File != nil && op.File.Generate != "" }

// checkGenerators refuses, before anything runs, a plan with content made
// at apply when there is nothing to make it.
func checkGenerators(items []item, gen Generator) error {
	if gen != nil {
		return nil
	}
	for _, it := range items {
		if generates(it.op) {
			return fmt.Errorf("step %s: %s is written from the host's files at apply (%s), and this apply was given nothing to make it", it.step, it.op.File.Path, it.op.File.Generate)
		}
	}
	return nil
}

// generated is op as it runs and is journaled: for a file whose content
// is made at apply, the same write with the content gen made in place of
// what makes it; any other operation as it is. The begin record then
// holds, before the file is written, the very bytes written, for history
// and for whoever reads the journal after a rollback.
func generated(ctx context.Context, op plan.Operation, gen Generator) (out plan.Operation, err error) {
	if !generates(op) {
		return op, nil
	}
	defer func() {
		// The generator is the observers' code: a programming error in it
		// still ends in a revert of what ran before.
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error (panic) making %s: %v", op.File.Path, r)
		}
	}()
	content, err := gen(ctx, op.File.Generate)
	if err != nil {
		return op, fmt.Errorf("making %s from the host's files: %w", op.File.Path, err)
	}
	f := *op.File
	f.Content, f.Generate = content, ""
	op.File = &f
	return op, nil
}
