// Package jsonformat is the one version of gpuenv's JSON documents and
// streams. Every document gpuenv writes carries it as "format_version";
// docs/json.md's table lists the documents.
//
// The scheme: "MAJOR.MINOR", one number for every document. A change that
// only adds members to any document raises MINOR; a change that renames,
// removes or changes the meaning of a member raises MAJOR. A reader
// accepts every minor of the majors it knows.
//
// Before 3.0 each document was numbered on its own (the plan 1.0-1.2, the
// verify report and the fleet plan 2.0, the others 1.x). 3.0 is the first
// shared version, above every number used before, so that no number means
// two things; readers of files that outlive a gpuenv (saved plans, the
// drift record) still read the 1.x their documents had.
package jsonformat

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is the format version of every JSON document and stream gpuenv
// writes.
const Version = "3.0"

// Major is Version's major.
const Major = 3

// LegacyMajor is the major of the per-document numbering before 3.0 that
// readers of long-lived files (saved plans, drift records) still accept:
// their 1.x documents differ from 3.0 in nothing but the number.
const LegacyMajor = 1

// Check accepts a document's format_version v when its major is Major or
// one of legacy, refusing pre-releases and text that is no version. what
// names the document in the error.
func Check(what, v string, legacy ...int) error {
	majorText, minorText, hasMinor := strings.Cut(v, ".")
	major, err := strconv.Atoi(majorText)
	if err != nil || major < 0 || majorText != strconv.Itoa(major) || (hasMinor && !digits(minorText)) {
		return fmt.Errorf("%s format version %q is not a version such as %s", what, v, Version)
	}
	if major == Major {
		return nil
	}
	for _, l := range legacy {
		if major == l {
			return nil
		}
	}
	reads := []string{strconv.Itoa(Major) + ".x"}
	for _, l := range legacy {
		reads = append(reads, strconv.Itoa(l)+".x")
	}
	return fmt.Errorf("%s format %s is not known to this gpuenv (it reads %s, writes %s)", what, v, strings.Join(reads, " and "), Version)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
