package host

import (
	"fmt"
	"strings"
)

// ParseProcVersion reads /proc/driver/nvidia/version. Its first line names
// the flavour and version, in one of two shapes:
//
//	NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.76  Mon Sep 12 19:21:56 UTC 2022
//	NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  (…)  <date>
//
// The version is the first whitespace-separated token shaped like one
// (a fixed column fails on the open flavour, where "for x86_64" sits
// between), and the word "Open" tells the flavour.
func ParseProcVersion(data []byte) (version, flavor string, err error) {
	first, _, _ := strings.Cut(string(data), "\n")
	rest, ok := strings.CutPrefix(first, "NVRM version:")
	if !ok {
		return "", "", fmt.Errorf("first line does not start with %q: %q", "NVRM version:", clipLine(first))
	}
	for _, tok := range strings.Fields(rest) {
		if IsDriverVersion(tok) {
			version = tok
			break
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("no driver version on the NVRM line: %q", clipLine(first))
	}
	switch {
	case strings.Contains(rest, "Open Kernel Module"):
		flavor = "open"
	case strings.Contains(rest, "Kernel Module"):
		flavor = "proprietary"
	}
	return version, flavor, nil
}

// IsDriverVersion reports whether s is shaped like an NVIDIA driver
// version: two or three dot-separated decimal fields ("515.76",
// "550.54.15").
func IsDriverVersion(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 6 {
			return false
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// clipLine shortens a line quoted in an error.
func clipLine(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
