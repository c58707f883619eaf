package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// singleDashLongFlags rewrites the long flags given with one dash, as
// Terraform's users type them (-out FILE, -target=driver, -lock-timeout
// 30s), to pflag's two: pflag reads "-out" as the shorthands -o -u -t.
// Only the names of flags the command tree has are rewritten, and never
// a flag's value (--var -x) or anything after "--", so that an argument
// that only looks like a flag keeps its meaning.
func singleDashLongFlags(root *cobra.Command, args []string) []string {
	takesValue := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) { takesValue[f.Name] = f.NoOptDefVal == "" }
		c.LocalFlags().VisitAll(visit)
		c.PersistentFlags().VisitAll(visit)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// cobra adds these when it runs; they take no value.
	takesValue["help"], takesValue["version"] = false, false

	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		dashes := len(a) - len(strings.TrimLeft(a, "-"))
		value, known := takesValue[name]
		if known && dashes == 1 && len(name) > 1 {
			a = "-" + a
			dashes = 2
		}
		out = append(out, a)
		if known && dashes == 2 && value && !hasValue && i+1 < len(args) {
			// The next argument is this flag's value, whatever it
			// looks like.
			i++
			out = append(out, args[i])
		}
	}
	return out
}
