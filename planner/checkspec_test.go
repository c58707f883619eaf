package planner

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// CheckSpec refuses only what every choice the constraints leave open
// would meet, and judges no host.
func TestCheckSpec(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // the one error's summary; "" for none
	}{
		{"a CUDA line below the driver's floor", "driver {\n  version = \"470.*\"\n}\ncuda {\n  version = \"12.6\"\n}\n", "Driver too old for CUDA 12.6"},
		{"one CUDA major below the driver's floor", "driver {\n  version = \"470.*\"\n}\ncuda {\n  version = \">= 12.0, < 13\"\n}\n", "Driver too old for CUDA 12"},
		{"CUDA majors that leave a choice", "driver {\n  version = \"535.*\"\n}\ncuda {\n  version = \">= 12.0\"\n}\n", ""},
		{"torch without a build for the CUDA line", "cuda {\n  version = \"12.6.2\"\n}\nframework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pt\"\n}\n", "No torch build for CUDA 12.6"},
		{"torch with several CUDA lines left open", "cuda {\n  version = \">= 12.4, < 12.7\"\n}\nframework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pt\"\n}\n", ""},
		{"torch too new for the driver", "driver {\n  version = \"418.*\"\n}\nframework \"pytorch\" {\n  version = \"2.7.*\"\n  venv    = \"/opt/pt\"\n}\n", "Driver too old for torch"},
		{"cuDNN without a build for the CUDA", "cuda {\n  version = \"13.0\"\n}\ncudnn {\n  version = \"8.9.*\"\n}\n", "No cuDNN build for this CUDA"},
		{"open modules before R515", "driver {\n  version        = \"470.*\"\n  kernel_modules = \"open\"\n}\n", "Kernel modules not available for this host"},
		{"a valid stack", "driver {\n  version = \"550.*\"\n}\ncuda {\n  version = \"12.4\"\n}\ncudnn {\n  version = \"9.*\"\n}\nframework \"pytorch\" {\n  version = \"2.5.*\"\n  venv    = \"/opt/pt\"\n}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errs []string
			for _, d := range CheckSpec(loadSpec(t, c.src)) {
				if d.Severity == hcl.DiagError {
					errs = append(errs, d.Summary)
				}
			}
			got := strings.Join(errs, "; ")
			if got != c.want {
				t.Errorf("errors %q, want %q", got, c.want)
			}
		})
	}
}
