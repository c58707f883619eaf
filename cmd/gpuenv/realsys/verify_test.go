//go:build realsystem

package realsys

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// verifyDoc is the part of verify --json the user scenario looks at.
type verifyDoc struct {
	User *struct {
		Name       string   `json:"name"`
		UID        uint32   `json:"uid"`
		GroupNames []string `json:"group_names"`
	} `json:"user"`
	Verified  bool `json:"verified"`
	CUDACheck *struct {
		Failure *struct {
			Step string `json:"step"`
		} `json:"failure"`
	} `json:"cuda_check"`
	Results []verifyResult `json:"results"`
}

type verifyResult struct {
	Interpreter string `json:"interpreter"`
	Framework   string `json:"framework"`
	Outcome     string `json:"outcome"`
	Error       string `json:"error"`
	Steps       int    `json:"steps"`
	Identity    *struct {
		UID    uint32   `json:"uid"`
		GID    uint32   `json:"gid"`
		Groups []uint32 `json:"groups"`
		Home   string   `json:"home"`
	} `json:"identity"`
}

func (r *Root) verify(env []string, args ...string) (Result, verifyDoc) {
	r.t.Helper()
	res := r.Chroot(env, append([]string{"/usr/local/bin/gpuenv", "verify", "--json"}, args...)...)
	var doc verifyDoc
	if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil {
		r.t.Fatalf("verify --json %s: %v\n%s", strings.Join(args, " "), err, res)
	}
	return res, doc
}

// Scenario 11: verify runs as the user, for real: with a real user made by
// useradd, in video, with a broken torch of her own in ~/.local, Debian's
// torch trains on the CPU for root and fails for her exactly as it does
// when she runs Python, with her uid, gid, groups and HOME; under sudo,
// SUDO_USER chooses her without --user; and the framework-free check's
// child runs as her too.
func TestVerifyAsUser(t *testing.T) {
	r := h.NewRoot(t, Torch, Mounts{Proc: true, Sys: true})
	r.MustSh("useradd -m alice && gpasswd -a alice video")
	ids := strings.Fields(r.MustSh("id -u alice; id -g alice; getent group video | cut -d: -f3"))
	uid, _ := strconv.ParseUint(ids[0], 10, 32)
	gid, _ := strconv.ParseUint(ids[1], 10, 32)
	video, _ := strconv.ParseUint(ids[2], 10, 32)
	// Python puts the user's site-packages before the system's.
	r.WriteFile("/home/alice/.local/lib/python3.11/site-packages/torch/__init__.py", "raise ImportError(\"alice's own torch\")\n")
	r.MustSh("chown -R alice:alice /home/alice/.local")

	res, doc := r.verify(userEnv, "--device", "cpu")
	torch := func(doc verifyDoc) int {
		return slices.IndexFunc(doc.Results, func(x verifyResult) bool {
			return x.Interpreter == "/usr/bin/python3" && x.Framework == "pytorch"
		})
	}
	i := torch(doc)
	if res.Code != 0 || !doc.Verified || doc.User != nil || i < 0 {
		t.Fatalf("verify as root: want Debian's torch trained on the CPU; %s", res)
	}
	if w := doc.Results[i]; w.Outcome != "on_cpu" || w.Steps != 20 || w.Identity == nil || w.Identity.UID != 0 || w.Identity.Home != "/root" {
		t.Errorf("as root: %+v", w)
	}

	check := func(what string, res Result, doc verifyDoc) {
		t.Helper()
		i := torch(doc)
		if res.Code != 2 || doc.Verified || i < 0 {
			t.Fatalf("%s: want alice's torch to fail; %s", what, res)
		}
		if doc.User == nil || doc.User.Name != "alice" || doc.User.UID != uint32(uid) || !slices.Contains(doc.User.GroupNames, "video") {
			t.Errorf("%s: user %+v", what, doc.User)
		}
		w := doc.Results[i]
		if w.Outcome != "failed" || w.Error != "ImportError: alice's own torch" {
			t.Errorf("%s: %s: %s", what, w.Outcome, w.Error)
		}
		if id := w.Identity; id == nil || id.UID != uint32(uid) || id.GID != uint32(gid) || !slices.Contains(id.Groups, uint32(video)) || id.Home != "/home/alice" {
			t.Errorf("%s: the workload ran as %+v, want uid %d, gid %d, in group %d, HOME /home/alice", what, id, uid, gid, video)
		}
	}
	res, doc = r.verify(userEnv, "--device", "cpu", "--user", "alice")
	check("--user alice", res, doc)
	res, doc = r.verify(append(slices.Clone(userEnv), "SUDO_USER=alice"), "--device", "cpu")
	check("SUDO_USER=alice", res, doc)
	if !strings.Contains(r.Chroot(append(slices.Clone(userEnv), "SUDO_USER=alice"), "/usr/local/bin/gpuenv", "verify", "--device", "cpu").Stdout, " as alice (uid "+ids[0]+", groups alice, video)") {
		t.Errorf("the human view does not say whom verify ran as")
	}

	// The framework-free check's child, as alice: the root has no driver
	// library, and the child says so rather than crashing gpuenv.
	res, doc = r.verify(userEnv, "--cuda-only", "--user", "alice")
	if res.Code != 2 || doc.CUDACheck == nil || doc.CUDACheck.Failure == nil || doc.CUDACheck.Failure.Step != "load" || doc.User == nil || doc.User.Name != "alice" {
		t.Errorf("--cuda-only as alice: want the library missing; %s", res)
	}
	res = r.Gpuenv("verify", "--user", "nosuchuser")
	if res.Code != 1 || !strings.Contains(res.Stderr, "--user nosuchuser: no user nosuchuser in /etc/passwd") {
		t.Errorf("an unknown user: %s", res)
	}
}

// Verify hands the user nothing of root's: run from a root shell that
// holds a root-only file open on descriptor 9 (as cron jobs and agents
// leave descriptors open) and has a secret in its environment, verify
// --user alice runs her workload, whose torch reports what it can reach:
// descriptor 9 closed, the secret unset, the safe PATH.
func TestVerifyUserGetsNothingOfRoots(t *testing.T) {
	r := h.NewRoot(t, Venv, Mounts{Proc: true})
	r.MustSh("useradd -m alice && python3 -m venv --without-pip /opt/venv && install -m 0600 /dev/null /root/secret && echo hunter2 > /root/secret")
	site := "/opt/venv/lib/python3.11/site-packages/torch/"
	r.WriteFile(site+"version.py", "__version__ = '2.1.0'\ncuda = None\n")
	r.WriteFile(site+"__init__.py", `import os
try:
    fd9 = os.read(9, 100).decode().strip()
except OSError:
    fd9 = "closed"
raise ImportError("fd 9: %s, ROOT_SECRET: %s, PATH: %s" % (fd9, os.environ.get("ROOT_SECRET", "unset"), os.environ.get("PATH")))
`)
	env := append(slices.Clone(userEnv), "ROOT_SECRET=s3cr3t", "PATH=/root/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	res := r.Chroot(env, "/bin/sh", "-c", "exec 9</root/secret; exec /usr/local/bin/gpuenv verify --json --device cpu --user alice --python /opt/venv/bin/python")
	var doc verifyDoc
	if err := json.Unmarshal([]byte(res.Stdout), &doc); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, res)
	}
	i := slices.IndexFunc(doc.Results, func(x verifyResult) bool { return x.Interpreter == "/opt/venv/bin/python" && x.Framework == "pytorch" })
	if res.Code != 2 || i < 0 {
		t.Fatalf("want alice's workload to fail at its import; %s", res)
	}
	want := "ImportError: fd 9: closed, ROOT_SECRET: unset, PATH: /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if got := doc.Results[i].Error; got != want {
		t.Errorf("alice's workload saw %q, want %q", got, want)
	}
}
