package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
)

func init() {
	commands = append(commands, newHistoryCmd)
}

func newHistoryCmd(g *globalOptions) *cobra.Command {
	keep := -1
	cmd := &cobra.Command{
		Use:   "history [--keep N]",
		Short: "List the generations: applies and rollbacks",
		Long: `History lists the generations in the state directory, oldest first: id, start
time, kind (apply or rollback), status, the digest of the spec applied, and a
summary. An apply undone by a rollback says which. A generation whose meta.json
is missing or unreadable is listed as damaged: rollback stops there.

--keep N removes the package files saved for rollback from all but the newest
N generations. Those generations can still be rolled back as long as the
package archive or index still has the old versions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := openHost(g)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("keep") {
				pr, err := apply.Prune(h, g.stateDir(), keep)
				if err != nil {
					return err
				}
				if !g.JSON {
					fmt.Fprintf(g.Stdout, "Removed the saved package files of %d generations (%d bytes).\n\n", len(pr.Generations), pr.Bytes)
				}
			}
			// History only shows what it reads: a state directory others
			// could have written is said, not refused, and what is
			// shown from it is not to be trusted.
			insecure := false
			gens, err := apply.ReadHistory(h, g.stateDir(), func(err error) {
				insecure = true
				fmt.Fprintf(g.Stderr, "Warning: %v\n", err)
			})
			if err != nil {
				return err
			}
			if insecure {
				fmt.Fprintln(g.Stderr, "Warning: the history below comes from a state directory that others could have written; do not trust it, and fix the state directory before gpuenv rollback (which refuses it until then).")
			}
			if g.JSON {
				if gens == nil {
					gens = []apply.Meta{}
				}
				return writeJSON(g, struct {
					Generations []apply.Meta `json:"generations"`
				}{gens})
			}
			if len(gens) == 0 {
				fmt.Fprintln(g.Stdout, "No generations: nothing was applied on this root.")
				return nil
			}
			tw := tabwriter.NewWriter(g.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTARTED\tKIND\tSTATUS\tSPEC\tSUMMARY")
			for _, m := range gens {
				if m.Status == apply.StatusDamaged {
					// Nothing in it can be read but its number.
					fmt.Fprintf(tw, "%d\t-\t?\t%s\t-\t%s; gpuenv rollback stops here\n", m.ID, m.Status, m.Damaged)
					continue
				}
				status := string(m.Status)
				if m.UndoneBy != 0 {
					status += fmt.Sprintf(", undone by %d", m.UndoneBy)
				}
				if m.Pruned {
					status += ", pruned"
				}
				digest := m.SpecDigest
				if len(digest) > 19 {
					digest = digest[:19]
				}
				if digest == "" {
					digest = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Started.Local().Format("2006-01-02 15:04:05"), m.Kind, status, digest, m.Summary)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "remove the saved package files of all but the newest `N` generations")
	addJSONFlag(cmd, g)
	return cmd
}
