// Package pkgkit is what every provider that installs packages shares:
// the version lookup (which versions the root's package managers offer,
// from the indexes on disk or from apt and dnf themselves, and the pick
// among them a spec's constraint makes) and the step kit (the package
// step, its removal, its reason, and the steps it must run after).
// It decides nothing of its own about any resource kind.
package pkgkit
