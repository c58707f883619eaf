package plan

import "slices"

// Mergeable reports whether b can join the transaction a: one package
// manager run that does both, in either order, with the same outcome.
func Mergeable(a, b *PackagesOp) bool {
	if a.Manager != b.Manager || a.Reinstall != b.Reinstall {
		return false
	}
	if Manager(a.Manager) == ManagerPip && (a.Python != b.Python || a.Venv != b.Venv || a.IndexURL != b.IndexURL) {
		return false
	}
	if len(a.Remove) > 0 && len(b.Remove) > 0 && a.Purge != b.Purge {
		return false
	}
	for _, p := range b.Install {
		if slices.Contains(a.Remove, p.Name) {
			return false
		}
		for _, q := range a.Install {
			if q.Name == p.Name && (q.Version != p.Version || !slices.Equal(q.Extras, p.Extras)) {
				return false
			}
		}
	}
	for _, name := range b.Remove {
		if slices.ContainsFunc(a.Install, func(p PackagePin) bool { return p.Name == name }) {
			return false
		}
	}
	for _, name := range b.Hold {
		if slices.Contains(a.Unhold, name) {
			return false
		}
	}
	for _, name := range b.Unhold {
		if slices.Contains(a.Hold, name) {
			return false
		}
	}
	return true
}

// Merge adds b's changes to a, which Mergeable allowed.
func Merge(a, b *PackagesOp) {
	if a.Manager == "" {
		a.Manager, a.Python, a.Venv, a.IndexURL, a.Reinstall = b.Manager, b.Python, b.Venv, b.IndexURL, b.Reinstall
	}
	for _, p := range b.Install {
		if !slices.ContainsFunc(a.Install, func(q PackagePin) bool { return q.Name == p.Name }) {
			p.Extras = slices.Clone(p.Extras)
			a.Install = append(a.Install, p)
		}
	}
	if len(b.Remove) > 0 {
		a.Purge = b.Purge
	}
	a.Remove = appendNew(a.Remove, b.Remove)
	a.Hold = appendNew(a.Hold, b.Hold)
	a.Unhold = appendNew(a.Unhold, b.Unhold)
	a.AllowDowngrade = a.AllowDowngrade || b.AllowDowngrade
}

func appendNew(dst, src []string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}
