package environment

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestObserve(t *testing.T) {
	h := hosttest.Host(t, `-- etc/environment --
PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"
LANG=en_US.UTF-8
export CUDA_DEVICE_ORDER=PCI_BUS_ID
this is not an assignment
-- etc/profile.d/cuda.sh --
# Set by the administrator
export PATH=/usr/local/cuda/bin${PATH:+:${PATH}}
if [ -d /usr/local/cuda/lib64 ]; then
    export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
fi
EDITOR=vim
-- etc/profile.d/gpuenv.sh --
export CUDA_VISIBLE_DEVICES='0,1'
-- etc/profile.d/notes.txt --
export CUDA_VISIBLE_DEVICES=9
-- etc/systemd/system.conf --
[Manager]
#DefaultEnvironment=CUDA_VISIBLE_DEVICES=7
DefaultEnvironment="CUDA_VISIBLE_DEVICES=0,1" NVIDIA_DRIVER_CAPABILITIES=compute,utility LANG=C
[Other]
DefaultEnvironment=CUDA_DEVICE_ORDER=FASTEST_FIRST
-- etc/systemd/system.conf.d/gpuenv.conf --
[Manager]
DefaultEnvironment=CUDA_DEVICE_ORDER=PCI_BUS_ID "PATH=/opt/a b:/usr/bin"
-- usr/lib/systemd/system.conf.d/gpuenv.conf --
[Manager]
DefaultEnvironment=CUDA_DEVICE_ORDER=SHADOWED
-- usr/lib/systemd/system.conf.d/10-vendor.conf --
[Manager]
DefaultEnvironment=CUDA_MODULE_LOADING=LAZY
-- etc/ld.so.conf --
include /etc/ld.so.conf.d/*.conf
/opt/legacy/lib # trailing comment

-- etc/ld.so.conf.d/libc.conf --
# libc default configuration
/usr/local/lib
-- etc/ld.so.conf.d/x86_64-linux-gnu.conf --
# Multiarch support
/usr/local/lib/x86_64-linux-gnu
/lib/x86_64-linux-gnu
/usr/lib/x86_64-linux-gnu
-- etc/ld.so.conf.d/gpuenv.conf --
/usr/local/cuda-12.4/lib64:/usr/local/cuda-12.4/extras/CUPTI/lib64
include loop.conf
-- etc/ld.so.conf.d/loop.conf --
include /etc/ld.so.conf
-- etc/modprobe.d/gpuenv-blacklist-nouveau.conf --
blacklist nouveau
`)
	got, warns := Observe(h)
	if len(warns) != 1 || warns[0].Path != EnvironmentPath || !strings.Contains(warns[0].Message, "line 4") {
		t.Errorf("warnings: %v", warns)
	}
	want := facts.Environment{
		Variables: []facts.Assignment{
			{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin", File: "/etc/environment", Line: 1},
			{Name: "CUDA_DEVICE_ORDER", Value: "PCI_BUS_ID", File: "/etc/environment", Line: 3},
			{Name: "PATH", Value: "/usr/local/cuda/bin${PATH:+:${PATH}}", File: "/etc/profile.d/cuda.sh", Line: 2},
			{Name: "LD_LIBRARY_PATH", Value: "/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}", File: "/etc/profile.d/cuda.sh", Line: 4},
			{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1", File: "/etc/profile.d/gpuenv.sh", Line: 1},
			{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1", File: "/etc/systemd/system.conf", Line: 3},
			{Name: "NVIDIA_DRIVER_CAPABILITIES", Value: "compute,utility", File: "/etc/systemd/system.conf", Line: 3},
			{Name: "CUDA_MODULE_LOADING", Value: "LAZY", File: "/usr/lib/systemd/system.conf.d/10-vendor.conf", Line: 2},
			{Name: "CUDA_DEVICE_ORDER", Value: "PCI_BUS_ID", File: "/etc/systemd/system.conf.d/gpuenv.conf", Line: 2},
			{Name: "PATH", Value: "/opt/a b:/usr/bin", File: "/etc/systemd/system.conf.d/gpuenv.conf", Line: 2},
		},
		LoaderPaths: []facts.LoaderPath{
			{Dir: "/usr/local/cuda-12.4/lib64", File: "/etc/ld.so.conf.d/gpuenv.conf"},
			{Dir: "/usr/local/cuda-12.4/extras/CUPTI/lib64", File: "/etc/ld.so.conf.d/gpuenv.conf"},
			{Dir: "/usr/local/lib", File: "/etc/ld.so.conf.d/libc.conf"},
			{Dir: "/usr/local/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
			{Dir: "/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
			{Dir: "/usr/lib/x86_64-linux-gnu", File: "/etc/ld.so.conf.d/x86_64-linux-gnu.conf"},
			{Dir: "/opt/legacy/lib", File: "/etc/ld.so.conf"},
		},
		Managed: []string{ManagedBlacklist, ManagedLdSoConf, ManagedProfile, ManagedSystemd},
		ManagedDigests: []facts.FileDigest{
			{Path: ManagedBlacklist, SHA256: "b3dbf277d507c2a3659775968d3e57bd211b58927a62787706e0e1952e959dac"}, // "blacklist nouveau\n"
			{Path: ManagedLdSoConf, SHA256: "3a4a738a01190e6e47e1e86ec3249829a8e7f9c14ca5240cc1f71fbf8b28e5bc"},
			{Path: ManagedProfile, SHA256: "3711aa20037aa794b7358f266d045463746671905aeae05bfb4b906bfa817e85"},
			{Path: ManagedSystemd, SHA256: "12a410c8010ba1500aada9307e8a3dc6ba1d5d286d83a023278c8ca94f97e2ab"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Observe (-want +got):\n%s", diff)
	}
}

func TestLdSoConfMissing(t *testing.T) {
	h := hosttest.Host(t, "-- etc/ld.so.conf.d/gpuenv.conf --\n/usr/local/cuda/lib64\n")
	got, warns := Observe(h)
	if len(got.LoaderPaths) != 0 || len(warns) != 1 || warns[0].Path != LdSoConf {
		t.Errorf("got %+v, %v", got, warns)
	}
	if got.Variables == nil || got.LoaderPaths == nil {
		t.Error("empty lists must encode as [], not null")
	}
}

func TestWords(t *testing.T) {
	cases := map[string][]string{
		`A=1 B=2`:                 {"A=1", "B=2"},
		` "A=1 2"  'B=3 4' `:      {"A=1 2", "B=3 4"},
		`A=a\ b C="x"y`:           {"A=a b", "C=xy"},
		`"unterminated`:           {"unterminated"},
		``:                        nil,
		`PATH=/a:/b "CUDA_X=" \\`: {"PATH=/a:/b", "CUDA_X=", `\`},
	}
	for in, want := range cases {
		if got := words(in); !cmp.Equal(got, want) {
			t.Errorf("words(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAssignment(t *testing.T) {
	cases := []struct {
		in, name, value string
		ok              bool
	}{
		{`export CUDA_HOME=/usr/local/cuda`, "CUDA_HOME", "/usr/local/cuda", true},
		{`CUDA_HOME="/usr/local/cuda"`, "CUDA_HOME", "/usr/local/cuda", true},
		{`X='a"b'`, "X", `a"b`, true},
		{`X="a"b"`, "X", `"a"b"`, true},
		{`1X=2`, "", "", false},
		{`export`, "", "", false},
		{`[ -d x ] && PATH=x`, "", "", false},
	}
	for _, c := range cases {
		n, v, ok := assignment(c.in)
		if n != c.name || v != c.value || ok != c.ok {
			t.Errorf("assignment(%q) = %q, %q, %v", c.in, n, v, ok)
		}
	}
}

// The line gpuenv's profile script writes to put a toolkit on PATH once
// (and the many scripts that write it alike) reads as the assignment it
// makes, so that doctor sees nvcc on PATH after apply; values of quoted
// parts read as the shell joins them.
func TestParseShellPathIdiom(t *testing.T) {
	script := "# Written by gpuenv\n" +
		"case \":$PATH:\" in *:/usr/local/cuda-12.4/bin:*) ;; *) export PATH='/usr/local/cuda-12.4'\"/bin:$PATH\" ;; esac\n" +
		"export CUDA_VISIBLE_DEVICES='it'\\''s'\n" +
		"case \"$x\" in y) export CUDA_HOME=/opt ;; esac\n" +
		"export CUDA_PATH=$(ls /opt)\n"
	got := ParseShell("/etc/profile.d/gpuenv.sh", []byte(script))
	want := []facts.Assignment{
		{Name: "PATH", Value: "/usr/local/cuda-12.4/bin:$PATH", File: "/etc/profile.d/gpuenv.sh", Line: 2},
		{Name: "CUDA_VISIBLE_DEVICES", Value: "it's", File: "/etc/profile.d/gpuenv.sh", Line: 3},
		// Not a word the parser can join: kept as written.
		{Name: "CUDA_PATH", Value: "$(ls /opt)", File: "/etc/profile.d/gpuenv.sh", Line: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseShell (-want +got):\n%s", diff)
	}
}
