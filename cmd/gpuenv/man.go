package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newManCmd writes gpuenv(1) from the command tree, so the manual the
// package installs says what this very binary accepts. Hidden: it serves
// packaging, not users, who read the page with man.
func newManCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:    "man",
		Short:  "Write the gpuenv(1) manual page, in roff, to stdout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeManPage(g.Stdout, cmd.Root(), buildVersion().Version)
		},
	}
}

// writeManPage writes one page for the whole tree: a section per command,
// as git's and systemctl's single pages do for tools used as one.
func writeManPage(out io.Writer, root *cobra.Command, version string) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, ".TH GPUENV 1 \"\" \"gpuenv %s\" \"User Commands\"\n", roffEscape(version))
	fmt.Fprintf(w, ".SH NAME\ngpuenv \\- %s\n", roffEscape(root.Short))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B gpuenv\n[\\fIoptions\\fR] \\fIcommand\\fR [\\fIarguments\\fR]\n")
	fmt.Fprintf(w, ".SH DESCRIPTION\n")
	roffText(w, root.Long)
	fmt.Fprintf(w, ".SH OPTIONS\nThese options apply to every command.\n")
	roffFlags(w, root.PersistentFlags())
	fmt.Fprintf(w, ".SH COMMANDS\n")
	for _, c := range manCommands(root) {
		fmt.Fprintf(w, ".SS \"%s\"\n", roffEscape(c.CommandPath()+strings.TrimPrefix(c.Use, c.Name())))
		text := c.Long
		if text == "" {
			text = c.Short
		}
		roffText(w, text)
		if c.LocalNonPersistentFlags().HasAvailableFlags() {
			fmt.Fprintf(w, ".PP\nOptions:\n")
			roffFlags(w, c.LocalNonPersistentFlags())
		}
		if c.Example != "" {
			fmt.Fprintf(w, ".PP\nExamples:\n.PP\n.RS\n.nf\n")
			for _, line := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
				fmt.Fprintf(w, "%s\n", roffLine(strings.TrimSpace(line)))
			}
			fmt.Fprintf(w, ".fi\n.RE\n")
		}
	}
	fmt.Fprintf(w, `.SH FILES
.TP
.I /etc/gpuenv
The spec that the drift timer plans against: a directory whose *.hcl files form one spec.
.TP
.I /var/lib/gpuenv
The state directory: every generation of apply and rollback, and the drift file.
.TP
.I gpuenv-drift.service\fR, \fIgpuenv-drift.timer
systemd units that plan /etc/gpuenv hourly and record the drift; they never apply.
.SH SEE ALSO
.BR gpuenv-spec (5),
the spec language;
.BR systemctl (1),
.BR systemd.timer (5)
`)
	return w.Flush()
}

// manCommands lists the commands a user can run, depth first, in the
// order help shows them.
func manCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.Name() == "help" {
			continue
		}
		out = append(out, sub)
		out = append(out, manCommands(sub)...)
	}
	return out
}

// roffFlags writes one tagged paragraph per visible flag.
func roffFlags(w io.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		tag := `\fB\-\-` + roffEscape(f.Name) + `\fR`
		if f.Shorthand != "" {
			tag = `\fB\-` + roffEscape(f.Shorthand) + `\fR, ` + tag
		}
		if name, _ := pflag.UnquoteUsage(f); name != "" {
			tag += ` \fI` + roffEscape(name) + `\fR`
		}
		_, usage := pflag.UnquoteUsage(f)
		fmt.Fprintf(w, ".TP\n%s\n%s\n", tag, roffLine(usage))
	})
}

// roffText writes help text as paragraphs: blank lines separate them, and
// indented lines (commands, tables) keep their layout.
func roffText(w io.Writer, text string) {
	fmt.Fprintf(w, ".PP\n")
	literal := false
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")
		switch {
		case strings.TrimSpace(line) == "":
			if literal {
				fmt.Fprintf(w, ".fi\n")
				literal = false
			}
			fmt.Fprintf(w, ".PP\n")
			continue
		case indented && !literal:
			fmt.Fprintf(w, ".nf\n")
			literal = true
		case !indented && literal:
			fmt.Fprintf(w, ".fi\n")
			literal = false
		}
		fmt.Fprintf(w, "%s\n", roffLine(line))
	}
	if literal {
		fmt.Fprintf(w, ".fi\n")
	}
}

// roffLine escapes one line of text, and keeps a line that starts with a
// dot or quote from being read as a request.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffEscape keeps backslashes and hyphens literal (a plain "-" may be set
// as a hyphen, which breaks copying options from the page), and names
// every character outside ASCII as a glyph, which troff reads whatever the
// page's encoding is taken to be.
func roffEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r > unicode.MaxASCII:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
