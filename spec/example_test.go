package spec_test

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/spec"
)

func ExampleLoad() {
	s, diags := spec.Load("../examples/variables", spec.LoadOptions{
		Vars: map[string]string{"cuda": "12.6"},
	})
	if diags.HasErrors() {
		hcl.NewDiagnosticTextWriter(os.Stderr, s.Files, 78, false).WriteDiagnostics(diags)
		return
	}
	fmt.Println("cuda:", s.CUDA.Version.Value)
	fmt.Println("cudnn:", s.CuDNN.Version.Value)
	for _, f := range s.Frameworks {
		fmt.Printf("%s %s in %s from %s\n", f.Name, f.Version.Value, f.Venv.Value, f.EffectiveIndexURL())
	}
	// The spec does not set persistence mode, so gpuenv leaves it alone.
	fmt.Println("persistence mode managed:", s.Driver.PersistenceMode.Set)
	// Output:
	// cuda: 12.6
	// cudnn: 9.5.1.17
	// pytorch 2.7.* in /opt/pytorch-cu126 from https://download.pytorch.org/whl/cu126
	// persistence mode managed: false
}

func ExampleFormat() {
	out, _ := spec.Format([]byte("cuda {\nversion=\"12.4\"\n  set_environment = true\n}\n"), "gpuenv.hcl")
	fmt.Print(string(out))
	// Output:
	// cuda {
	//   version         = "12.4"
	//   set_environment = true
	// }
}
