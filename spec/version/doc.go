// Package version parses, orders and constrains the versions gpuenv deals
// with: NVIDIA drivers ("535.261.03"), CUDA ("12.4.1"), cuDNN ("9.1.0.70"),
// Python packages ("2.5.1+cu124", "2.1.0.dev20230801+cu121") and, through
// CompareDebian and FromDebian, Debian packages ("535.309.01-0+deb12u1").
//
// # Versions
//
// A Version has any number of numeric release parts and keeps the text it
// was written with, so "535.261.03" prints with its leading zero. Parts
// compare numerically and a missing part counts as 0 ("12.4" equals
// "12.4.0"). Python versions may add, in canonical PEP 440 form, a
// pre-release (a, b, rc), ".postN", ".devN" and a "+local" label, ordered as
// PEP 440 says: 1.0.dev1 < 1.0a1 < 1.0rc1 < 1.0 < 1.0+cpu < 1.0+cu124 <
// 1.0.post1. Debian versions have their own order and are compared as
// strings with CompareDebian.
//
// # Constraints
//
// Constraints use the operator syntax of Masterminds/semver. Terms joined by
// "," or spaces must all hold; alternatives joined by "||" need one to hold.
// The package parses that syntax itself instead of calling Masterminds: its
// Constraint rejects four-part versions such as cuDNN's, evaluates only
// semver.Version, and hides the bounds that Satisfiable needs.
//
// A plain release version in a constraint stands for every version that
// starts with it, as if "*" followed it, so "550" and "550.*" mean the same
// and the operators read naturally on versions with different numbers of
// parts:
//
//	535.261.03, =535.261.03  535.261.03 (and 535.261.03.x, which drivers never have)
//	12.4, 12.4.*, 12.x       12.4 and every 12.4.x
//	!= 535.1                 anything outside 535.1.*
//	>= 535                   535 and above
//	> 535                    above every 535.x: 545 qualifies, 535.261.03 does not
//	< 560                    below 560, so no 560.x
//	<= 550                   550.x included
//	~12.4                    >= 12.4, < 12.5
//	~8.9.7                   >= 8.9.7, < 8.10 (as Masterminds: ~1.2.3 is < 1.3)
//	~12                      >= 12, < 13
//	^12, ^12.4               >= 12 (or 12.4), < 13
//	^0.2.3                   >= 0.2.3, < 0.3
//	535 - 550                >= 535, <= 550, so 550.54.15 qualifies
//	*                        anything
//
// Masterminds reads "1.2" as exactly 1.2.0; here it is a prefix, because
// users pinning CUDA "12.4" mean any 12.4 update, while a full driver
// version such as "535.261.03" stays as good as exact. "==", "=>", "=<" and
// "~>" are accepted as "=", ">=", "<=" and "~".
//
// A version with a pre-release, post, dev or local segment stands for
// itself only: "2.0.0rc1", "> 2.5.1+cu121". A constraint version without a
// local label ignores the local label of the version checked, so "2.5.1"
// and "<= 2.5.1" accept 2.5.1+cu124 while "> 2.5.1" does not (PEP 440).
//
// Pre-releases and development releases satisfy an alternative only when
// one of its terms names one, as in PEP 440 and semver: ">= 2.0" rejects
// 2.1.0rc1 and 2.1.0.dev20230801, ">= 2.1.0.dev0" accepts both. Once
// admitted they sit inside prefixes: "2.1.*, >= 2.1.0a0" accepts
// 2.1.0rc1, and "< 2.1" rejects every 2.1 pre-release.
//
// Satisfiable reports whether any version can match. It is exact for
// constraints whose versions are plain releases, with any number of parts
// (">= 560, < 550", "550.*, 560.*" and "> 5, < 5" are not satisfiable).
package version
