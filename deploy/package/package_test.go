package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpuenv/gpuenv/internal/release"
)

// built is the one pair of packages the tests read: building gpuenv takes
// most of a minute on a small machine.
var built struct {
	once sync.Once
	res  *Result
	err  error
}

func packages(t *testing.T) *Result {
	t.Helper()
	// git stamps the version with the commit; each test needs its own
	// format's readers besides, so a machine without the RPM tools still
	// checks the .deb.
	need(t, "git")
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "gpuenv-package-test-")
		if err != nil {
			built.err = err
			return
		}
		mod, err := moduleDir(context.Background())
		if err != nil {
			built.err = err
			return
		}
		built.res, built.err = Build(context.Background(), mod, dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.res
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.res != nil {
		os.RemoveAll(filepath.Dir(built.res.Deb))
	}
	os.Exit(code)
}

// need skips where a reader of packages is missing, except in CI, which
// installs them (.ci/run): there a missing one fails.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed; .ci/run installs it", tool)
			}
			t.Skipf("%s is not installed (apt-get install dpkg rpm cpio git groff-base)", tool)
		}
	}
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// entry is one path of a package, as its own tools list it.
type entry struct{ mode, owner string }

// Both packages hold the same things, where each distribution keeps them.
var common = map[string]entry{
	"/usr/bin/gpuenv": {"-rwxr-xr-x", "root/root"},
	"/usr/share/bash-completion/completions/gpuenv":             {"-rw-r--r--", "root/root"},
	"/usr/share/fish/vendor_completions.d/gpuenv.fish":          {"-rw-r--r--", "root/root"},
	"/usr/share/man/man1/gpuenv.1.gz":                           {"-rw-r--r--", "root/root"},
	"/usr/share/man/man5/gpuenv-spec.5.gz":                      {"-rw-r--r--", "root/root"},
	"/usr/share/doc/gpuenv/README":                              {"-rw-r--r--", "root/root"},
	"/usr/share/doc/gpuenv/examples/debian12-distro/gpuenv.hcl": {"-rw-r--r--", "root/root"},
	"/usr/share/doc/gpuenv/examples/variables/cuda-12.6.vars":   {"-rw-r--r--", "root/root"},
	"/etc/gpuenv":     {"drwxr-xr-x", "root/root"},
	"/var/lib/gpuenv": {"drwx--x--x", "root/root"},
	// The name slurm.conf gives HealthCheckProgram and Prolog.
	"/usr/sbin/gpuenv-slurm-health": {"lrwxrwxrwx", "root/root"},
}

func withPaths(m map[string]entry, extra map[string]entry) map[string]entry {
	out := map[string]entry{}
	for k, v := range m {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

var versionRE = regexp.MustCompile(`^` + regexp.QuoteMeta(release.Version) + `(\+g[0-9a-f]{12}(\.dirty)?)?$`)

func TestDeb(t *testing.T) {
	need(t, "dpkg-deb")
	res := packages(t)
	if !versionRE.MatchString(res.Version) {
		t.Fatalf("version %q is not %s stamped with a commit", res.Version, release.Version)
	}
	if got, want := filepath.Base(res.Deb), "gpuenv_"+res.Version+"_amd64.deb"; got != want {
		t.Errorf("the .deb is %s, want %s", got, want)
	}
	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Depends", "Section"} {
		fields[f] = strings.TrimSpace(output(t, "dpkg-deb", "--field", res.Deb, f))
	}
	for f, want := range map[string]string{"Package": "gpuenv", "Version": res.Version, "Architecture": "amd64", "Section": "admin"} {
		if fields[f] != want {
			t.Errorf("%s: %q, want %q", f, fields[f], want)
		}
	}
	if !regexp.MustCompile(`^libc6 \(>= 2\.\d+\)$`).MatchString(fields["Depends"]) {
		t.Errorf("Depends: %q, want the C library the binary links against", fields["Depends"])
	}

	// dpkg-deb -c: "drwxr-xr-x root/root 0 2026-01-01 00:00 ./etc/gpuenv/"
	got := map[string]entry{}
	sc := bufio.NewScanner(strings.NewReader(output(t, "dpkg-deb", "--contents", res.Deb)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", sc.Text())
		}
		p := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		got[p] = entry{f[0], f[1]}
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s", p, f[1])
		}
		if strings.HasPrefix(p, "/etc/gpuenv/") {
			t.Errorf("%s: the package ships no spec; /etc/gpuenv is the administrator's", p)
		}
	}
	checkEntries(t, "deb", got, withPaths(common, map[string]entry{
		"/lib/systemd/system/gpuenv-drift.service":  {"-rw-r--r--", "root/root"},
		"/lib/systemd/system/gpuenv-drift.timer":    {"-rw-r--r--", "root/root"},
		"/usr/share/zsh/vendor-completions/_gpuenv": {"-rw-r--r--", "root/root"},
	}))

	ctrl := t.TempDir()
	output(t, "dpkg-deb", "--control", res.Deb, ctrl)
	if _, err := os.Stat(filepath.Join(ctrl, "conffiles")); err == nil {
		t.Errorf("the .deb has conffiles:\n%s", readFile(t, filepath.Join(ctrl, "conffiles")))
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		output(t, "sh", "-n", filepath.Join(ctrl, s))
	}
	// Purging must not take the generations with it.
	if postrm := readFile(t, filepath.Join(ctrl, "postrm")); strings.Contains(postrm, "rm ") {
		t.Errorf("postrm removes files:\n%s", postrm)
	}

	root := t.TempDir()
	output(t, "dpkg-deb", "--extract", res.Deb, root)
	checkBinaryVersion(t, filepath.Join(root, "usr/bin/gpuenv"), res.Version)
	checkSlurmLink(t, root)
	checkUnits(t, filepath.Join(root, "lib/systemd/system"))
	checkManPage(t, filepath.Join(root, "usr/share/man/man1/gpuenv.1.gz"))
	checkSpecPage(t, filepath.Join(root, "usr/share/man/man5/gpuenv-spec.5.gz"), res.Version)
	checkCompletions(t, root, "usr/share/zsh/vendor-completions/_gpuenv")
}

func TestRPM(t *testing.T) {
	need(t, "rpm", "rpm2cpio", "cpio")
	res := packages(t)
	if got, want := filepath.Base(res.RPM), "gpuenv-"+res.Version+"-1.x86_64.rpm"; got != want {
		t.Errorf("the .rpm is %s, want %s", got, want)
	}
	if got, want := output(t, "rpm", "-qp", "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}", res.RPM), "gpuenv "+res.Version+" 1 x86_64"; got != want {
		t.Errorf("rpm -qp: %q, want %q", got, want)
	}
	if reqs := output(t, "rpm", "-qpR", res.RPM); !regexp.MustCompile(`(?m)^glibc >= 2\.\d+$`).MatchString(reqs) {
		t.Errorf("requires:\n%s", reqs)
	}
	scripts := output(t, "rpm", "-qp", "--scripts", res.RPM)
	for _, s := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "systemctl --no-reload preset gpuenv-drift.timer"} {
		if !strings.Contains(scripts, s) {
			t.Errorf("the .rpm's scripts lack %q:\n%s", s, scripts)
		}
	}
	// rpm -qlvp: "-rwxr-xr-x 1 root root 123 Dec  1 23:11 /usr/bin/gpuenv"
	got := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(output(t, "rpm", "-qlvp", res.RPM)), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			t.Fatalf("rpm -qlvp line %q", line)
		}
		got[f[8]] = entry{f[0], f[2] + "/" + f[3]}
	}
	checkEntries(t, "rpm", got, withPaths(common, map[string]entry{
		"/usr/lib/systemd/system/gpuenv-drift.service": {"-rw-r--r--", "root/root"},
		"/usr/lib/systemd/system/gpuenv-drift.timer":   {"-rw-r--r--", "root/root"},
		"/usr/share/zsh/site-functions/_gpuenv":        {"-rw-r--r--", "root/root"},
	}))
	if cfg := strings.TrimSpace(output(t, "rpm", "-qpc", res.RPM)); cfg != "(contains no files)" && cfg != "" {
		t.Errorf("the .rpm has config files: %s", cfg)
	}

	root := t.TempDir()
	// The archive's names are absolute: without --no-absolute-filenames cpio
	// would unpack onto this machine.
	cpio := exec.Command("sh", "-c", `rpm2cpio "$1" | cpio -idm --quiet --no-absolute-filenames`, "sh", res.RPM)
	cpio.Dir = root
	if out, err := cpio.CombinedOutput(); err != nil {
		t.Fatalf("rpm2cpio: %v\n%s", err, out)
	}
	checkBinaryVersion(t, filepath.Join(root, "usr/bin/gpuenv"), res.Version)
	checkSlurmLink(t, root)
	checkUnits(t, filepath.Join(root, "usr/lib/systemd/system"))
}

func checkEntries(t *testing.T, format string, got, want map[string]entry) {
	t.Helper()
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: %s is missing", format, p)
		case strings.HasPrefix(w.mode, "l") && strings.HasPrefix(g.mode, "l") && g.owner == w.owner:
			// A link's permission bits mean nothing to the kernel, and
			// nfpm's rpm writes them as zero; the type and owner matter.
		case g != w:
			t.Errorf("%s: %s is %s %s, want %s %s", format, p, g.mode, g.owner, w.mode, w.owner)
		}
	}
}

// checkSlurmLink: the link slurm.conf names points at the packaged binary.
func checkSlurmLink(t *testing.T, root string) {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, "usr/sbin/gpuenv-slurm-health"))
	if err != nil {
		t.Fatal(err)
	}
	if target != "/usr/bin/gpuenv" {
		t.Errorf("/usr/sbin/gpuenv-slurm-health points at %s, want /usr/bin/gpuenv", target)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The packaged binary prints the package's version.
func checkBinaryVersion(t *testing.T, bin, want string) {
	t.Helper()
	var v struct{ Version string }
	if err := json.Unmarshal([]byte(output(t, bin, "version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != want {
		t.Errorf("%s version: %q, the package is %q", bin, v.Version, want)
	}
}

// The timer plans and records, never applies, and drift is no failure.
func checkUnits(t *testing.T, dir string) {
	t.Helper()
	service := readFile(t, filepath.Join(dir, "gpuenv-drift.service"))
	for _, line := range []string{
		"Type=oneshot",
		"ExecStart=/usr/bin/gpuenv plan --detailed-exitcode --record-drift /etc/gpuenv",
		"SuccessExitStatus=2",
		"ReadWritePaths=/var/lib/gpuenv",
	} {
		if !hasLine(service, line) {
			t.Errorf("gpuenv-drift.service lacks %q", line)
		}
	}
	if strings.Contains(service, " apply") {
		t.Errorf("gpuenv-drift.service applies:\n%s", service)
	}
	timer := readFile(t, filepath.Join(dir, "gpuenv-drift.timer"))
	for _, line := range []string{"OnCalendar=hourly", "Persistent=true", "WantedBy=timers.target"} {
		if !hasLine(timer, line) {
			t.Errorf("gpuenv-drift.timer lacks %q", line)
		}
	}
	if !regexp.MustCompile(`(?m)^RandomizedDelaySec=\d+`).MatchString(timer) {
		t.Errorf("gpuenv-drift.timer has no RandomizedDelaySec:\n%s", timer)
	}
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// The manual page formats without a warning and has a section for every
// command.
func checkManPage(t *testing.T, page string) {
	t.Helper()
	need(t, "groff")
	out, err := exec.Command("sh", "-c", `zcat "$1" | groff -man -Tutf8 -ww -z`, "sh", page).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("groff -man -Tutf8 -ww: %v\n%s", err, out)
	}
	text := output(t, "zcat", page)
	for _, cmd := range []string{"apply", "plan", "rollback", "doctor", "observe", "version", "history"} {
		if !strings.Contains(text, ".SS \"gpuenv "+cmd) {
			t.Errorf("the manual page has no section for gpuenv %s", cmd)
		}
	}
	if strings.Contains(text, "gpuenv man") {
		t.Error("the manual page documents the hidden man command")
	}
}

// checkSpecPage checks gpuenv-spec(5): it formats without a warning, and it
// is the spec reference chapter of this tree, section by section.
func checkSpecPage(t *testing.T, page, version string) {
	t.Helper()
	need(t, "groff")
	out, err := exec.Command("sh", "-c", `zcat "$1" | groff -man -Tutf8 -ww -z`, "sh", page).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("gpuenv-spec.5: groff -man -Tutf8 -ww: %v\n%s", err, out)
	}
	text := output(t, "zcat", page)
	if !strings.HasPrefix(text, ".TH GPUENV-SPEC 5 ") {
		t.Errorf("gpuenv-spec.5 does not open as section 5's page: %.60q", text)
	}
	if !strings.Contains(text, version) {
		t.Errorf("gpuenv-spec.5 does not name the version %s", version)
	}
	// Formatted, each section of the chapter is a heading of the page.
	formatted, err := exec.Command("sh", "-c", `zcat "$1" | groff -man -Tutf8 -P-cbou`, "sh", page).Output()
	if err != nil {
		t.Fatalf("groff: %v", err)
	}
	md := readFile(t, filepath.Join("..", "..", "docs", "spec-reference.md"))
	for _, m := range regexp.MustCompile(`(?m)^## (.*)$`).FindAllStringSubmatch(md, -1) {
		h := strings.ToUpper(strings.ReplaceAll(m[1], "`", ""))
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(h) + `$`).Match(formatted) {
			t.Errorf("gpuenv-spec.5 has no section %q, a section of docs/spec-reference.md", h)
		}
	}
}

func checkCompletions(t *testing.T, root, zsh string) {
	t.Helper()
	bash := filepath.Join(root, "usr/share/bash-completion/completions/gpuenv")
	output(t, "bash", "-n", bash)
	if !strings.Contains(readFile(t, bash), "complete -o default -F __start_gpuenv gpuenv") {
		t.Error("the bash completion does not register for gpuenv")
	}
	if !strings.HasPrefix(readFile(t, filepath.Join(root, zsh)), "#compdef gpuenv") {
		t.Error("the zsh completion does not start with #compdef gpuenv")
	}
	if !strings.Contains(readFile(t, filepath.Join(root, "usr/share/fish/vendor_completions.d/gpuenv.fish")), "complete -c gpuenv") {
		t.Error("the fish completion does not complete gpuenv")
	}
}

// maxDriftExposure is the most systemd-analyze security may rate the drift
// unit: "OK" ends at 5.0 on its scale of 0 (confined) to 10 (unsafe).
const maxDriftExposure = 5.0

// The drift unit runs as root every hour: systemd confines it to what plan
// needs, and systemd-analyze's exposure score says how well.
func TestDriftUnitExposure(t *testing.T) {
	need(t, "systemd-analyze")
	unit, err := filepath.Abs("files/gpuenv-drift.service")
	if err != nil {
		t.Fatal(err)
	}
	// --offline (systemd 252) reads the file alone, without a running
	// systemd or the unit installed.
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "--no-pager", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for gpuenv-drift\.service: (\d+\.\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure:\n%s", out)
	}
	score, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	if score > maxDriftExposure {
		t.Errorf("gpuenv-drift.service's exposure is %.1f, more than %.1f:\n%s", score, maxDriftExposure, out)
	}
	t.Logf("exposure %.1f", score)
}

// The confinement leaves plan what it reads and writes: the GPUs' device
// nodes, home directories (a spec's venv), the state directory for the
// record, and its own program's memory as Go and NVML map it.
func TestDriftUnitLeavesPlanItsFiles(t *testing.T) {
	service := readFile(t, "files/gpuenv-drift.service")
	for _, line := range []string{"ProtectHome=read-only", "ReadWritePaths=/var/lib/gpuenv", "ReadWritePaths=-/var/cache/gpuenv"} {
		if !hasLine(service, line) {
			t.Errorf("gpuenv-drift.service lacks %q", line)
		}
	}
	for _, line := range []string{"PrivateDevices=yes", "ProtectHome=yes", "ProtectHome=tmpfs", "DevicePolicy=closed", "DevicePolicy=strict", "ProtectProc=invisible", "DynamicUser=yes"} {
		if hasLine(service, line) {
			t.Errorf("gpuenv-drift.service has %q, which hides from plan what it reads", line)
		}
	}
}
