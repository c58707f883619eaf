package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A test-only entry point for the nesting scripts:
//
//	gpuenv-nested FILE N   writes a spec whose locals block holds a list
//	                       nested N levels deep (N "[" then N "]"), too
//	                       big to keep in a script
func init() {
	extraTestCommands["gpuenv-nested"] = func() {
		n, err := strconv.Atoi(os.Args[len(os.Args)-1])
		if len(os.Args) != 3 || err != nil {
			die(fmt.Errorf("usage: gpuenv-nested FILE N"))
		}
		spec := "locals {\n  deep = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n}\n"
		if err := os.WriteFile(os.Args[1], []byte(spec), 0o644); err != nil {
			die(err)
		}
	}
}
