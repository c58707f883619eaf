// Package system observes what the rest of the observation builds on: the
// distribution (/etc/os-release, and from it the package family), the
// running kernel's release and architecture, and the Secure Boot state,
// which decides whether an unsigned nvidia module may load at all.
//
// Everything is read through a *host.Host, each file once, and no process
// is started.
package system
