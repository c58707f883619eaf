// Package pkgdb is gpuenv's one home of package knowledge, read through
// the host handle and shared by the providers (which observe) and apply
// (which checks what it changed): dpkg's status file with its journal
// folded in (ReadDpkg for the GPU-relevant packages, fast; ReadDpkgAll for
// every package), the RPM query and the dnf versionlock list, apt-cache
// policy's output, which packages belong to the GPU stack (Relevant),
// version ordering per package manager (Compare: Debian, RPM, PEP 440,
// whose orders spec/version implements), a package version's upstream
// part (Upstream, UpstreamVersion) and lookups by state (Installed with a
// StateFilter).
//
// Deb822 paragraphs are read with pault.ag/go/debian's control-file
// parser, after a byte-level scan that counts the thousands of unrelated
// paragraphs of a real status file without parsing them.
package pkgdb
