package spec

import (
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	good := []string{"/", "/opt/venv", "/usr/local/cuda-12.4/", "/opt/./venv", "/srv/py3.12+cu124", "/home/a_b/x@1,2=3"}
	bad := []string{"", "opt/venv", "./venv", "../venv", "/opt/../etc", "/opt/..", "/opt/my venv", "/opt/$HOME", "/opt/a;b", "/opt/a:b", "/opt/`x`", "/opt/ü", "/opt/\nx", "~/venv", "/opt/'x'"}
	for _, p := range good {
		if msg := checkPath(p); msg != "" {
			t.Errorf("checkPath(%q) = %q, want ok", p, msg)
		}
	}
	for _, p := range bad {
		if msg := checkPath(p); msg == "" {
			t.Errorf("checkPath(%q) accepted it", p)
		}
	}
	if got := cleanPath("/opt/./venv/"); got != "/opt/venv" {
		t.Errorf("cleanPath = %q", got)
	}
}

func TestCheckURL(t *testing.T) {
	all := []string{"https", "http", "file"}
	good := []string{
		"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/",
		"http://deb.debian.org/debian",
		"https://mirror.example.com:8443/debian?x=1",
		"file:///srv/mirror",
		"file://localhost/srv/mirror",
	}
	bad := []string{
		"", "ftp://example.com/", "example.com/debian", "https:///x", "https://u:p@example.com/",
		"file://host/srv", "file:relative", "file:///srv/../etc", "file:///srv/a b",
		"https://example.com/a b", "https://example.com/\x00", "-https://x", "mailto:a@b",
	}
	for _, u := range good {
		if msg := checkURL(u, all...); msg != "" {
			t.Errorf("checkURL(%q) = %q, want ok", u, msg)
		}
	}
	for _, u := range bad {
		if msg := checkURL(u, all...); msg == "" {
			t.Errorf("checkURL(%q) accepted it", u)
		}
	}
	if msg := checkURL("http://example.com/key.gpg", "https", "file"); !strings.Contains(msg, "https:// or file://") {
		t.Errorf("keyring over http: %q", msg)
	}
}

func TestCheckAccountName(t *testing.T) {
	good := []string{"video", "render", "_apt", "ml-users", "build$", "a", strings.Repeat("a", 32), "user_01"}
	bad := []string{"", "Video", "-rf", "9lives", "a b", "a.b", "a$b", strings.Repeat("a", 33), "ünicode", "a\n"}
	for _, n := range good {
		if msg := checkAccountName("user", n); msg != "" {
			t.Errorf("checkAccountName(%q) = %q, want ok", n, msg)
		}
	}
	for _, n := range bad {
		if msg := checkAccountName("user", n); msg == "" {
			t.Errorf("checkAccountName(%q) accepted it", n)
		}
	}
}

func TestDeviceID(t *testing.T) {
	const u = "5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d"
	cases := []struct {
		in       string
		allowMIG bool
		want     string
	}{
		{"0", false, "0"},
		{"007", false, "7"},
		{"15", true, "15"},
		{"GPU-" + u, false, "gpu-" + u},
		{"GPU-" + strings.ToUpper(u), false, "gpu-" + u},
		{"MIG-" + u, true, "mig-" + u},
		{"MIG-GPU-" + u + "/1/0", true, "mig-gpu-" + u + "/1/0"},
		{"MIG-" + u, false, ""},
		{"MIG-GPU-" + u + "/1", true, ""},
		{"GPU-" + u[:10], false, ""},
		{"gpu-" + u, false, ""},
		{"-1", false, ""},
		{"1,2", false, ""},
		{"99999999999999999999", false, ""},
		{"all", false, ""},
	}
	for _, c := range cases {
		if got := deviceID(c.in, c.allowMIG); got != c.want {
			t.Errorf("deviceID(%q, %v) = %q, want %q", c.in, c.allowMIG, got, c.want)
		}
	}
}

func TestCheckSuiteComponentExtraEnv(t *testing.T) {
	for _, s := range []string{"bookworm", "bookworm-security", "jammy-updates", "/", "./", "cuda/", "stable"} {
		if msg := checkSuite(s); msg != "" {
			t.Errorf("checkSuite(%q) = %q", s, msg)
		}
	}
	for _, s := range []string{"", "-o", "book worm", "../", "a/../", "//", "bookworm;x"} {
		if checkSuite(s) == "" {
			t.Errorf("checkSuite(%q) accepted it", s)
		}
	}
	for _, s := range []string{"main", "contrib", "non-free", "non-free-firmware", "restricted"} {
		if msg := checkComponent(s); msg != "" {
			t.Errorf("checkComponent(%q) = %q", s, msg)
		}
	}
	for _, s := range []string{"", "-main", "non free", "main/"} {
		if checkComponent(s) == "" {
			t.Errorf("checkComponent(%q) accepted it", s)
		}
	}
	for _, s := range []string{"and-cuda", "cuda12", "cuda12-local", "with_cuda", "a.b"} {
		if msg := checkExtra(s); msg != "" {
			t.Errorf("checkExtra(%q) = %q", s, msg)
		}
	}
	for _, s := range []string{"", "-x", "--pre", "a b", "cuda12]", "x-"} {
		if checkExtra(s) == "" {
			t.Errorf("checkExtra(%q) accepted it", s)
		}
	}
	for _, s := range []string{"HF_HOME", "_X", "a1"} {
		if msg := checkEnvName(s); msg != "" {
			t.Errorf("checkEnvName(%q) = %q", s, msg)
		}
	}
	for _, s := range []string{"", "1X", "A-B", "A B", "A=B"} {
		if checkEnvName(s) == "" {
			t.Errorf("checkEnvName(%q) accepted it", s)
		}
	}
	if checkEnvValue("X", "a b 'c'") != "" || checkEnvValue("X", "a\nb") == "" || checkEnvValue("X", "a\x00") == "" {
		t.Error("checkEnvValue accepts control characters or refuses plain text")
	}
}

func TestCheckWordAndVersionText(t *testing.T) {
	if checkWord("package", "nvidia-driver") != "" {
		t.Error("checkWord refuses a package name")
	}
	for _, s := range []string{"", "-y", "a b", "a\tb", "a\x7f"} {
		if checkWord("package", s) == "" {
			t.Errorf("checkWord(%q) accepted it", s)
		}
	}
	for _, s := range []string{"535.261.03", ">= 535, < 560", "~12.4", "2.5.1+cu124"} {
		if msg := checkVersionText(s); msg != "" {
			t.Errorf("checkVersionText(%q) = %q", s, msg)
		}
	}
	for _, s := range []string{"", "  ", "-1", " -1", "12.4\n"} {
		if checkVersionText(s) == "" {
			t.Errorf("checkVersionText(%q) accepted it", s)
		}
	}
}

func TestSuggest(t *testing.T) {
	cases := []struct{ given, want string }{
		{"opne", "open"},
		{"exclusive", "exclusive_process"},
		{"torch", "pytorch"},
		{"mxnet", ""},
		{"tensor", ""},
	}
	candidates := []string{"open", "proprietary", "exclusive_process", "pytorch", "jax"}
	for _, c := range cases {
		if got := suggest(c.given, candidates); got != c.want {
			t.Errorf("suggest(%q) = %q, want %q", c.given, got, c.want)
		}
	}
	if d := levenshtein("kitten", "sitting"); d != 3 {
		t.Errorf("levenshtein = %d", d)
	}
}

func TestCheckFormatWidths(t *testing.T) {
	for _, f := range []string{"%s", "%05d", "%-10s", "%.2f", "%%", "%[1]s", "100%"} {
		if err := checkFormatWidths(f); err != nil {
			t.Errorf("checkFormatWidths(%q) = %v", f, err)
		}
	}
	for _, f := range []string{"%1001d", "%.99999f", "%-5000s"} {
		if checkFormatWidths(f) == nil {
			t.Errorf("checkFormatWidths(%q) accepted it", f)
		}
	}
}
