package main

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the golden sections of testscript files")

// TestMain lets testscript run the gpuenv binary built into this test: the
// map's commands are put on PATH for the scripts, with the very code users
// run.
func TestMain(m *testing.M) {
	testscript.Main(m, testCommands())
}

// testCommands are the programs scripts can exec. Test-only entry points
// (fake package managers, gpuenv with a mock NVML) are added by other
// files of this package's tests.
func testCommands() map[string]func() {
	cmds := map[string]func(){
		"gpuenv": func() {
			os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ()))
		},
	}
	for name, fn := range extraTestCommands {
		cmds[name] = fn
	}
	return cmds
}

// extraTestCommands is filled by init functions in other _test.go files.
var extraTestCommands = map[string]func(){}

func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		UpdateScripts:       *update,
	})
}
