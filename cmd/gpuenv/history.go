package main

import (
	"github.com/spf13/cobra"

	"github.com/gpuenv/gpuenv/apply"
)

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
			view := newHistoryView(g)
			h, err := openHost(g)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("keep") {
				pr, err := apply.Prune(h, g.stateDir(), keep)
				if err != nil {
					return err
				}
				if err := view.Pruned(pr); err != nil {
					return err
				}
			}
			// History only shows what it reads: a state directory others
			// could have written is said, not refused, and what is
			// shown from it is not to be trusted.
			var untrusted []error
			gens, err := apply.ReadHistory(h, g.stateDir(), func(err error) {
				untrusted = append(untrusted, err)
			})
			if werr := view.Untrusted(untrusted, err == nil); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			return view.Generations(gens)
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "remove the saved package files of all but the newest `N` generations")
	addJSONFlag(cmd, g)
	return cmd
}
