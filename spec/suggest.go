package spec

import (
	"fmt"
	"strings"
)

// suggest returns the candidate closest to given, if one is close enough to
// be a likely typo, in the way hcl suggests names for unknown attributes.
func suggest(given string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		// A value cut short, such as "exclusive" for "exclusive_process",
		// is far in edit distance but an obvious match.
		if len(given) >= 3 && strings.HasPrefix(c, given) {
			return c
		}
	}
	for _, c := range candidates {
		if d := levenshtein(given, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// didYouMean is the sentence appended to a Detail when there is a suggestion.
func didYouMean(given string, candidates []string) string {
	if s := suggest(given, candidates); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
