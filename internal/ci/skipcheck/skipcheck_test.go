package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goTest runs the real go test on the module in testdata/mod: package a
// passes and skips, b fails in a subtest, c has no tests.
func goTest(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"test", "-count=1"}, args...)...)
	cmd.Dir = filepath.Join("testdata", "mod")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("go test %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

var durations = regexp.MustCompile(`\d+\.\d+s`)

func allowing(t *testing.T, text string) *allowList {
	t.Helper()
	a, err := readAllowList(strings.NewReader(text), "allowed-skips")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The output is go test's own, line for line but the durations, and the
// skips not allowed are named, with their reasons.
func TestOutputAndSkips(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a module's tests twice")
	}
	plain := goTest(t, "./...")
	stream := goTest(t, "-json", "./...")

	allow := allowing(t, `
# helper processes skip in the parent by design
example.com/skipcheck/a TestHelperProcess  # run by TestPasses in a child
`)
	var out, errw bytes.Buffer
	if code := run(bytes.NewReader(stream), &out, &errw, allow, false); code != 1 {
		t.Errorf("exit %d with a failing package and skips not allowed, want 1", code)
	}
	if got, want := durations.ReplaceAllString(out.String(), "T"), durations.ReplaceAllString(string(plain), "T"); got != want {
		t.Errorf("output differs from go test's:\n--- skipcheck\n%s--- go test\n%s", got, want)
	}
	for _, want := range []string{
		"FAIL: 2 tests skipped that are not on allowed-skips",
		"example.com/skipcheck/a TestSkipsWithoutATool: a_test.go:7: frobnicate is not installed\n",
		"example.com/skipcheck/a TestSubtests/skips: a_test.go:13: only on a Tuesday\n",
		"1 skips allowed by allowed-skips",
	} {
		if !strings.Contains(errw.String(), want) {
			t.Errorf("the verdict lacks %q:\n%s", want, errw.String())
		}
	}
	if strings.Contains(errw.String(), "TestHelperProcess:") {
		t.Errorf("an allowed skip is reported:\n%s", errw.String())
	}
}

// A run that passes with only allowed skips passes; one skip more fails
// it, though every test passed.
func TestOnlyAllowedSkipsPass(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a module's tests")
	}
	stream := goTest(t, "-json", "./a")
	all := `example.com/skipcheck/a TestHelperProcess  # a helper
example.com/skipcheck/a TestSkipsWithoutATool  # frobnicate is optional
example.com/skipcheck/a TestSubtests/skips  # on Tuesdays only
`
	var out, errw bytes.Buffer
	if code := run(bytes.NewReader(stream), &out, &errw, allowing(t, all), false); code != 0 {
		t.Errorf("exit %d with every skip allowed, want 0:\n%s%s", code, out.String(), errw.String())
	}
	if !regexp.MustCompile(`^ok  \texample.com/skipcheck/a\t\S+\n$`).MatchString(out.String()) {
		t.Errorf("output %q, want go test's one ok line", out.String())
	}
	out.Reset()
	errw.Reset()
	short := strings.Join(strings.Split(all, "\n")[1:], "\n")
	if code := run(bytes.NewReader(stream), &out, &errw, allowing(t, short), false); code != 1 {
		t.Errorf("exit %d with a skip not allowed, want 1", code)
	}
	if !strings.Contains(errw.String(), "TestHelperProcess: a_test.go:9: helper process for TestPasses") {
		t.Errorf("verdict:\n%s", errw.String())
	}
}

// -v prints the stream's output whole, as go test -v does.
func TestVerbose(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs a module's tests twice")
	}
	plain := goTest(t, "-v", "./a")
	stream := goTest(t, "-json", "-v", "./a")
	var out, errw bytes.Buffer
	run(bytes.NewReader(stream), &out, &errw, allowing(t, ""), true)
	if got, want := durations.ReplaceAllString(out.String(), "T"), durations.ReplaceAllString(string(plain), "T"); got != want {
		t.Errorf("output differs from go test -v's:\n--- skipcheck\n%s--- go test -v\n%s", got, want)
	}
}

func TestNothingRead(t *testing.T) {
	var out, errw bytes.Buffer
	if code := run(strings.NewReader(""), &out, &errw, allowing(t, ""), false); code != 1 || !strings.Contains(errw.String(), "no package") {
		t.Errorf("exit %d on an empty stream: %s", code, errw.String())
	}
}

func TestAllowListNeedsReasons(t *testing.T) {
	for _, bad := range []string{
		"example.com/a TestX\n",
		"example.com/a TestX  #   \n",
		"TestX  # no package\n",
		"example.com/a TestX TestY  # two\n",
	} {
		if _, err := readAllowList(strings.NewReader(bad), "allowed-skips"); err == nil || !strings.Contains(err.Error(), "allowed-skips:1:") {
			t.Errorf("%q: %v, want an error at line 1", bad, err)
		}
	}
}
