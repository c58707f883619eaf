// Package system observes what the rest of the observation builds on: the
// distribution (/etc/os-release, and from it the package family), the
// running kernel's release and architecture, the Secure Boot state,
// which decides whether an unsigned nvidia module may load at all, and
// process 1, which decides whether systemd can take a changed setting now
// or only at the next boot.
//
// Everything is read through a *host.Host, each file once, and no process
// is started.
package system
