// Package lazyregexp is a regexp.Regexp that compiles its expression the
// first time it is used rather than when its package is initialised. Like
// spec/version it imports nothing of gpuenv's, so every package may use it.
//
// Every gpuenv command links every package, and a package-level
// regexp.MustCompile runs at start-up whether or not the command ever
// matches anything: compiling the few dozen expressions of the providers
// and the spec checks made up a large part of the start-up of even
// "gpuenv version". An expression declared with New costs nothing until
// a command needs it.
package lazyregexp

import (
	"regexp"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use. It is safe for
// concurrent use, as regexp.Regexp is.
type Regexp struct {
	expr string
	once sync.Once
	rx   *regexp.Regexp
}

// New returns expr as a Regexp to be compiled on first use. Compilation
// panics then, as regexp.MustCompile would at initialisation, if expr is
// not a valid expression; tests that exercise the expression catch that.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// Regexp returns the compiled expression.
func (r *Regexp) Regexp() *regexp.Regexp {
	r.once.Do(func() { r.rx = regexp.MustCompile(r.expr) })
	return r.rx
}

// String returns the source text of the expression.
func (r *Regexp) String() string { return r.expr }

// Match is regexp.Regexp.Match.
func (r *Regexp) Match(b []byte) bool { return r.Regexp().Match(b) }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.Regexp().MatchString(s) }

// FindString is regexp.Regexp.FindString.
func (r *Regexp) FindString(s string) string { return r.Regexp().FindString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.Regexp().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Regexp().FindAllStringSubmatch(s, n)
}

// FindSubmatch is regexp.Regexp.FindSubmatch.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.Regexp().FindSubmatch(b) }

// FindAllSubmatch is regexp.Regexp.FindAllSubmatch.
func (r *Regexp) FindAllSubmatch(b []byte, n int) [][][]byte { return r.Regexp().FindAllSubmatch(b, n) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Regexp().ReplaceAllString(src, repl)
}
