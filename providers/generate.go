package providers

import (
	"context"
	"fmt"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/containers"
	"github.com/gpuenv/gpuenv/providers/host"
)

// GeneratorOf returns what makes, for apply (apply.Options.Generate), the
// content of a file a plan leaves to apply, from h's files as the steps
// before it left them: the CDI spec of the driver or toolkit the plan
// installs, and the CDI management spec beside it. Apply runs no observer itself; this is where it is given one.
func GeneratorOf(h *host.Host) func(ctx context.Context, what string) (string, error) {
	return func(ctx context.Context, what string) (string, error) {
		switch what {
		case plan.GenerateCDI:
			return containers.RegenerateCDI(ctx, h)
		case plan.GenerateManagementCDI:
			return containers.RegenerateManagementCDI(ctx, h)
		}
		return "", fmt.Errorf("gpuenv makes no %q content", what)
	}
}
