package plan

import (
	"strings"
	"testing"
)

// Apply makes generated content only of the kind it knows, only for the
// file that kind belongs to, and never beside content of the plan's own.
func TestCheckGeneratedFile(t *testing.T) {
	good := FileOp{Path: "/etc/cdi/nvidia.yaml", Mode: 0o644, Generate: GenerateCDI}
	if err := CheckOperation(Operation{Kind: OpFile, File: &good}); err != nil {
		t.Errorf("the CDI spec: %v", err)
	}
	for _, tc := range []struct {
		op   FileOp
		want string
	}{
		{FileOp{Path: "/etc/cdi/nvidia.yaml", Generate: "script"}, "generates no"},
		{FileOp{Path: "/etc/docker/daemon.json", Generate: GenerateCDI}, "written only to /etc/cdi/nvidia.yaml"},
		{FileOp{Path: "/etc/cdi/nvidia.yaml", Content: "x", Generate: GenerateCDI}, "content of its own"},
		{FileOp{Path: "/etc/cdi/other.yaml", Content: "x"}, "not a file gpuenv manages"},
	} {
		err := CheckOperation(Operation{Kind: OpFile, File: &tc.op})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.op, err, tc.want)
		}
	}
}
