package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The documentation's code blocks, by the first word of their info string:
//
//	sh, bash     commands, run in order; the block must exit 0
//	console      "$ command" lines, each followed by what it prints; run,
//	             and the output compared ("..." alone on a line stands for
//	             any lines, inside a line for any text)
//	text         output or layouts shown, not run
//	hcl, json, yaml, toml, ini
//	             file contents, not run
//
// A shell block that cannot run in a test says so with the word "notest"
// after its language, and must be listed in docNotRun with the reason.
// A block without an info string, or an indented code block, is an error:
// every block says what it is, so that no command escapes the test.
var docLanguages = map[string]bool{
	"sh": true, "bash": true, "console": true,
	"text": false, "hcl": false, "json": false, "yaml": false, "toml": false, "ini": false,
}

// docNotRun lists the shell blocks that no test can run, keyed by file and
// the block's first command, each with the reason. Keep it short: a block
// that can run against a fixture root (--root) or in the test's work
// directory belongs there instead.
var docNotRun = map[string]string{
	"README.md: go test ./...": "the test suite cannot run itself",
	"README.md: go run ./deploy/package -o dist && sudo dpkg -i dist/gpuenv_*.deb":                                                                                      "installs gpuenv on the machine and applies a spec to it; the same steps run on fixture roots in the blocks below, and deploy/package's tests build and read the package",
	"docs/applying.md: sudo gpuenv apply examples/pytorch-workstation":                                                                                                  "changes the machine it runs on; the CLI tests apply against fake package managers (apply_*.txtar) and the real-system tier against Debian 12 roots",
	"docs/development.md: apt-get install -y mmdebstrap dpkg-dev strace":                                                                                                "installs the real-system tier's tools on the machine and runs the whole tier (up to 30 minutes, with the network); .ci/run runs it",
	"docs/development.md: GPUENV_REALSYS_LARGE=1 GPUENV_REALSYS_CACHE=/var/cache/gpuenv-realsys \\":                                                                     "downloads 1.6 GB from Debian's archive; the opt-in test it runs is that check",
	"docs/fleets.md: sudo cp /usr/share/doc/gpuenv/examples/debian12-distro/gpuenv.hcl /etc/gpuenv/":                                                                    "puts a spec into the machine's /etc and reads its systemd journal; deploy/package's tests check the units, and the drift record runs on a fixture below",
	"docs/fleets.md: ansible-galaxy collection build deploy/ansible && ansible-galaxy collection install gpuenv-gpuenv-*.tar.gz":                                        "needs an inventory of hosts; go test ./deploy/ansible/ and the real-system tier's TestAnsibleRollingDriverUpgrade run the collection",
	"docs/fleets.md: go run ./deploy/package -o dist":                                                                                                                   "needs podman and a Kubernetes cluster; deploy/kubernetes's test checks the manifest",
	`docs/json.md: sudo gpuenv verify --json | jq -r '.results[] | select(.outcome != "on_gpu") | "\(.gpu.index) \(.framework): \(.narrowing.layer // "-") \(.error)"'`: "needs GPUs; verify's tests run the same document against a stand-in libcuda.so.1",
	"docs/installing.md: go run ./deploy/package -o dist && sudo dpkg -i dist/gpuenv_*.deb":                                                                             "installs the package on the machine; deploy/package's tests build both packages and read them with dpkg-deb and rpm",
}

// docSkipDirs are documentation folders whose blocks are not run yet:
// docs/incoming holds chapters being written, which the manual takes in
// (and this test then runs) when they are folded into it.
var docSkipDirs = []string{filepath.Join("docs", "incoming")}

type docBlock struct {
	file   string // relative to the repository
	line   int    // of the opening fence
	lang   string
	notRun bool
	body   []string
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// firstCommand is the block's first line that is not a comment, without a
// console prompt: the key of docNotRun.
func (b docBlock) firstCommand() string {
	for _, l := range b.body {
		l = strings.TrimSpace(strings.TrimPrefix(l, "$ "))
		if l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

var fenceRE = regexp.MustCompile("^( *)(```+)(.*)$")

// parseDocBlocks reads a markdown file's fenced code blocks, and reports
// indented code blocks and fences without an info string as problems.
func parseDocBlocks(root, rel string) ([]docBlock, []string, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, nil, err
	}
	var (
		blocks   []docBlock
		problems []string
		cur      *docBlock
		indent   int
		fence    string
		prev     string
	)
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		n := i + 1
		if cur != nil {
			if m := fenceRE.FindStringSubmatch(l); m != nil && m[2] == fence && strings.TrimSpace(m[3]) == "" {
				blocks = append(blocks, *cur)
				cur = nil
				prev = l
				continue
			}
			cur.body = append(cur.body, strings.TrimPrefix(l, strings.Repeat(" ", indent)))
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			fields := strings.Fields(m[3])
			b := docBlock{file: rel, line: n}
			switch {
			case len(fields) == 0:
				problems = append(problems, fmt.Sprintf("%s:%d: a code block without a language: say sh, console, text, hcl or json", rel, n))
			default:
				b.lang = fields[0]
				if _, ok := docLanguages[b.lang]; !ok {
					problems = append(problems, fmt.Sprintf("%s:%d: code block language %q is none of the known ones", rel, n, b.lang))
				}
				for _, f := range fields[1:] {
					if f == "notest" && docLanguages[b.lang] {
						b.notRun = true
					} else {
						problems = append(problems, fmt.Sprintf("%s:%d: unknown word %q in the info string", rel, n, f))
					}
				}
			}
			cur, indent, fence = &b, len(m[1]), m[2]
			continue
		}
		// An indented code block: four spaces after a blank line, where
		// the paragraph before is not a list item (whose continuation
		// lines are indented too).
		if strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" && strings.TrimSpace(prev) == "" && !inList(lines, i) {
			problems = append(problems, fmt.Sprintf("%s:%d: an indented code block: fence it and say its language", rel, n))
		}
		prev = l
	}
	if cur != nil {
		problems = append(problems, fmt.Sprintf("%s:%d: the code block is not closed", rel, cur.line))
	}
	return blocks, problems, nil
}

// inList says whether line i follows a list item of the same paragraph
// run: the nearest non-blank line above it is indented or is a list item.
func inList(lines []string, i int) bool {
	for j := i - 1; j >= 0; j-- {
		l := lines[j]
		if strings.TrimSpace(l) == "" {
			continue
		}
		t := strings.TrimLeft(l, " ")
		return len(l) != len(t) || strings.HasPrefix(t, "- ") || regexp.MustCompile(`^\d+\. `).MatchString(t)
	}
	return false
}

// docFiles are README.md and every markdown file under docs/, but those
// of docSkipDirs.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && slices.Contains(docSkipDirs, rel) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func repoRoot(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDocExamples runs every shell block of the README and the manual, in
// a work directory that looks like a checkout (the repository's entries
// linked in), with the gpuenv built from this tree first on PATH. Each
// file's blocks run in order, sharing the directory, which is emptied
// between files; a console block's output must match what it shows.
func TestDocExamples(t *testing.T) {
	root := repoRoot(t)
	var all []docBlock
	for _, f := range docFiles(t, root) {
		blocks, problems, err := parseDocBlocks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
		all = append(all, blocks...)
	}
	used := map[string]bool{}
	for _, b := range all {
		if !b.notRun {
			continue
		}
		key := b.file + ": " + b.firstCommand()
		if _, ok := docNotRun[key]; !ok {
			t.Errorf("%s: a notest block that docNotRun does not list with its reason (key %q)", b, key)
		}
		used[key] = true
	}
	for key := range docNotRun {
		if !used[key] {
			t.Errorf("docNotRun lists %q, which no notest block has: remove it", key)
		}
	}
	if t.Failed() {
		return
	}
	// The examples' fixture roots have device nodes and files owned by
	// others, which only root can make; as another user they would be
	// plain files of the user's, and doctor would say so.
	if os.Geteuid() != 0 {
		t.Skip("the examples run on fixture roots with device nodes and owners, which need root: run as root (CI does)")
	}

	work := docWorkDir(t, root)
	resetWorkDir(t, root, work)
	// What the last file's blocks made stays for a look when one failed.
	t.Cleanup(func() {
		if !t.Failed() {
			emptyWorkDir(t, work)
		}
	})
	bin := filepath.Join(work, ".docbin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "gpuenv"), "./cmd/gpuenv")
	build.Dir = work
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	env := docEnv(bin)
	for _, f := range docFiles(t, root) {
		t.Run(f, func(t *testing.T) {
			resetWorkDir(t, root, work)
			for _, b := range all {
				if b.file != f || !(docLanguages[b.lang] || b.lang == "hcl") || b.notRun {
					continue
				}
				switch b.lang {
				case "console":
					runConsoleBlock(t, b, work, env)
				case "hcl":
					checkHCLBlock(t, b, work, env)
				default:
					runShellBlock(t, b, work, env)
				}
			}
		})
	}
}

// docWorkDir is the same directory in every run for one checkout, so that
// the Go build cache, which keys compiled packages by their directory,
// serves the blocks' go build and go run from the second run on. A lock
// keeps two runs of one checkout apart.
func docWorkDir(t *testing.T, root string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(root))
	work := filepath.Join(os.TempDir(), "gpuenv-doc-examples-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(work+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	return work
}

// docLinked are the repository's top-level entries a block sees; build
// outputs (/gpuenv, /dist) are left out so that a block finds only what it
// made itself.
func docLinked(t *testing.T, root string) []string {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		switch e.Name() {
		case ".git", "gpuenv", "dist", "bin":
			continue
		}
		names = append(names, e.Name())
	}
	return names
}

func resetWorkDir(t *testing.T, root, work string) {
	t.Helper()
	emptyWorkDir(t, work)
	for _, name := range docLinked(t, root) {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// emptyWorkDir removes all but the gpuenv the test built; the directory
// itself stays, for the build cache's sake.
func emptyWorkDir(t *testing.T, work string) {
	t.Helper()
	ents, err := os.ReadDir(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ".docbin" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// docEnv is the test's environment with gpuenv first on PATH and nothing
// that would change what gpuenv prints: no sudo user, no spec variables,
// no colour.
func docEnv(bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "SUDO_USER", name == "SUDO_UID", name == "SUDO_GID",
			strings.HasPrefix(name, "GPUENV_"), name == "TERM", name == "NO_COLOR":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1")
}

const docBlockTimeout = 5 * time.Minute

func runShellBlock(t *testing.T, b docBlock, work string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), docBlockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", strings.Join(b.body, "\n"))
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: the block failed: %v\n%s\n--- output:\n%s", b, err, strings.Join(b.body, "\n"), out)
	}
}

// checkHCLBlock holds a spec shown in the manual to the layout gpuenv fmt
// writes, which also parses it: a reader may copy it as it is.
func checkHCLBlock(t *testing.T, b docBlock, work string, env []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(work, ".docbin", "gpuenv"), "fmt", "-")
	cmd.Dir, cmd.Env = work, env
	src := strings.Join(b.body, "\n") + "\n"
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: gpuenv fmt -: %v\n%s", b, err, out)
	} else if string(out) != src {
		t.Errorf("%s: the spec is not as gpuenv fmt writes it:\n%s", b, out)
	}
}

type consoleCommand struct {
	line int // in the file
	cmd  string
	want []string
}

func parseConsole(t *testing.T, b docBlock) []consoleCommand {
	t.Helper()
	var cmds []consoleCommand
	for i := 0; i < len(b.body); i++ {
		l := b.body[i]
		if strings.HasPrefix(l, "$ ") {
			c := consoleCommand{line: b.line + 1 + i, cmd: strings.TrimPrefix(l, "$ ")}
			for strings.HasSuffix(c.cmd, "\\") && i+1 < len(b.body) {
				i++
				c.cmd += "\n" + b.body[i]
			}
			// A here-document's lines are the command's, up to its word.
			if m := heredocRE.FindStringSubmatch(c.cmd); m != nil {
				for i+1 < len(b.body) {
					i++
					c.cmd += "\n" + b.body[i]
					if b.body[i] == m[1] {
						break
					}
				}
			}
			cmds = append(cmds, c)
			continue
		}
		if len(cmds) == 0 {
			if strings.TrimSpace(l) != "" {
				t.Errorf("%s: output before the first $ command", b)
			}
			continue
		}
		cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, l)
	}
	return cmds
}

var heredocRE = regexp.MustCompile(`<<-?\s*['"]?(\w+)['"]?`)

var markerRE = regexp.MustCompile(`(?m)^@@gpuenv-doc-command (\d+)@@$`)

// runConsoleBlock runs the block's commands in one shell, so that one can
// use what another did ($? included), and splits what they print at a
// marker written between them.
func runConsoleBlock(t *testing.T, b docBlock, work string, env []string) {
	t.Helper()
	cmds := parseConsole(t, b)
	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for i, c := range cmds {
		fmt.Fprintf(&script, "__doc_status=$?\nprintf '\\n@@gpuenv-doc-command %d@@\\n'\n(exit $__doc_status)\n%s\n", i, c.cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), docBlockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.Output()
	if err != nil && ctx.Err() != nil {
		t.Errorf("%s: timed out after %s\n%s", b, docBlockTimeout, out)
		return
	}
	got := make([]string, len(cmds))
	locs := markerRE.FindAllSubmatchIndex(out, -1)
	for k, loc := range locs {
		i, _ := strconv.Atoi(string(out[loc[2]:loc[3]]))
		end := len(out)
		if k+1 < len(locs) {
			end = locs[k+1][0]
		}
		if i < len(got) {
			got[i] = string(out[loc[1]:end])
		}
	}
	for i, c := range cmds {
		if !outputMatches(c.want, got[i]) {
			t.Errorf("%s:%d: $ %s\nthe manual shows:\n%s\ngpuenv printed:\n%s", b.file, c.line, c.cmd, strings.Join(trimLines(c.want), "\n"), strings.Join(trimLines(splitLines(got[i])), "\n"))
		}
	}
}

func splitLines(s string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// trimLines drops trailing spaces and the blank lines at either end.
func trimLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.TrimRight(l, " \t"))
	}
	for len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// outputMatches compares lines: "..." alone on a line matches any number
// of lines, and within a line any text.
func outputMatches(want []string, got string) bool {
	w, g := trimLines(want), trimLines(splitLines(got))
	memo := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		key := [2]int{i, j}
		if v, ok := memo[key]; ok {
			return v
		}
		var ok bool
		switch {
		case i == len(w):
			ok = j == len(g)
		case w[i] == "...":
			for k := j; k <= len(g) && !ok; k++ {
				ok = match(i+1, k)
			}
		default:
			ok = j < len(g) && lineMatches(w[i], g[j]) && match(i+1, j+1)
		}
		memo[key] = ok
		return ok
	}
	return match(0, 0)
}

func lineMatches(want, got string) bool {
	parts := strings.Split(want, "...")
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	rest := got[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

func TestOutputMatches(t *testing.T) {
	for _, c := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{[]string{"a", "b"}, "a\nb\n", true},
		{[]string{"a", "b"}, "a\nc\n", false},
		{[]string{"a", "...", "d"}, "a\nb\nc\nd\n", true},
		{[]string{"a", "...", "d"}, "a\nd\n", true},
		{[]string{"a", "...", "d"}, "a\nb\n", false},
		{[]string{"Plan: ... to add, 0 to change"}, "Plan: 8 to add, 0 to change\n", true},
		{[]string{"Plan: ... to add, 0 to change"}, "Plan: 8 to add, 1 to change\n", false},
		{[]string{"x"}, "x\ny\n", false},
		{[]string{"", "x", ""}, "\nx   \n\n", true},
	} {
		if got := outputMatches(c.want, c.got); got != c.ok {
			t.Errorf("outputMatches(%q, %q) = %v, want %v", c.want, c.got, got, c.ok)
		}
	}
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`^#{1,6} +(.*?) *$`)
	slugDrop  = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// headingAnchors are the anchors a markdown file's headings get, as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens, a
// repeated heading numbered.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			fence = !fence
		}
		m := headingRE.FindStringSubmatch(l)
		if fence || m == nil {
			continue
		}
		slug := strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// TestDocLinks checks that every relative link of the README and the
// manual names a file of the repository and, with a #fragment, one of that
// file's headings: chapters moved or renamed leave no dead link behind.
func TestDocLinks(t *testing.T) {
	root := repoRoot(t)
	for _, f := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		fence := false
		for i, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				p, frag, _ := strings.Cut(target, "#")
				file := filepath.Join(root, f)
				if p != "" {
					file = filepath.Join(filepath.Dir(file), p)
				}
				st, err := os.Stat(file)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", f, i+1, target, err)
					continue
				}
				if frag == "" {
					continue
				}
				if st.IsDir() || !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: link %s: a fragment of something that is not a markdown file", f, i+1, target)
					continue
				}
				text, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				if !headingAnchors(string(text))[frag] {
					t.Errorf("%s:%d: link %s: no heading of %s has the anchor #%s", f, i+1, target, p, frag)
				}
			}
		}
	}
}

// The README's first screen holds the two commands a newcomer needs, in
// this order: one that builds gpuenv and runs its main job on this
// machine, and one that runs the tests, which .ci/run runs as written (with
// -json for its skip check). It stays short: the manual holds the rest.
func TestReadmeFirstCommands(t *testing.T) {
	root := repoRoot(t)
	blocks, _, err := parseDocBlocks(root, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; it keeps to 200, and the manual (docs/) holds the rest", n)
	}
	var shell []docBlock
	for _, b := range blocks {
		if b.lang == "sh" {
			shell = append(shell, b)
		}
	}
	if len(shell) < 2 || shell[0].line > 30 || shell[1].line > 30 {
		t.Fatalf("README.md's first screen (30 lines) must hold two sh blocks, build-and-run and test; it has %v", shell)
	}
	build, test := strings.Join(shell[0].body, "\n"), strings.Join(shell[1].body, "\n")
	if !strings.HasPrefix(build, "go build -o gpuenv ./cmd/gpuenv && ./gpuenv plan ") || shell[0].notRun {
		t.Errorf("README.md's first command is %q: it must build gpuenv and run its plan, and run in TestDocExamples", build)
	}
	if !strings.HasPrefix(test, "go test ") {
		t.Fatalf("README.md's second command is %q, not the test command", test)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(test, "go test ", "go test -json ", 1); !strings.Contains(string(ci), want+" | skipcheck") {
		t.Errorf(".ci/run does not run the README's test command as %q", want+" | skipcheck")
	}
}

// docCellLimit keeps tables tables: a cell longer than this is prose, and
// reads better as a section or a list item (a man page made from a
// chapter turns each row into a paragraph anyway).
const docCellLimit = 800

func TestDocTableCells(t *testing.T) {
	root := repoRoot(t)
	for _, f := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(l, "|") {
				continue
			}
			for _, c := range strings.Split(l, " | ") {
				if n := len([]rune(c)); n > docCellLimit {
					t.Errorf("%s:%d: a table cell of %d characters (at most %d): %.60s…", f, i+1, n, docCellLimit, strings.TrimSpace(strings.TrimPrefix(c, "|")))
				}
			}
		}
	}
}

// The manual's command table (docs/README.md) names every command of the
// binary, and every flag it shows for a command is one the command takes:
// a command or flag renamed or added shows here first.
func TestDocCommandTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCmd(&globalOptions{Stdout: io.Discard, Stderr: io.Discard})
	// cobra adds completion when the command runs; the binary has it.
	root.InitDefaultCompletionCmd()
	documented := map[string]bool{}
	cmdRE := regexp.MustCompile("`gpuenv ([a-z-]+)([^`]*)`")
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "| `gpuenv ") {
			continue
		}
		first := cells(l)[0]
		for _, m := range cmdRE.FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
			c, _, err := root.Find([]string{m[1]})
			if err != nil || c == root {
				t.Errorf("docs/README.md documents gpuenv %s, which is no command", m[1])
				continue
			}
			for _, f := range flagRE.FindAllString(m[2], -1) {
				if c.Flags().Lookup(f[2:]) == nil && c.InheritedFlags().Lookup(f[2:]) == nil {
					t.Errorf("docs/README.md shows gpuenv %s %s, a flag the command does not take", m[1], f)
				}
			}
		}
	}
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !documented[c.Name()] {
			t.Errorf("docs/README.md's command table does not list gpuenv %s", c.Name())
		}
	}
}

// cells splits a table row into its cells, trimmed.
func cells(row string) []string {
	var out []string
	for _, c := range strings.Split(strings.Trim(strings.TrimSpace(row), "|"), " | ") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}
