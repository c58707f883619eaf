package apply_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

const envNonRoot = "GPUENV_TEST_NONROOT"

// TestNonRootHelper is not a test: run by TestNonRootRefused as an
// unprivileged user, it expects apply and rollback of the live root to
// refuse at once.
func TestNonRootHelper(t *testing.T) {
	if os.Getenv(envNonRoot) == "" {
		t.Skip("helper process for TestNonRootRefused")
	}
	h, err := host.New("/")
	if err != nil {
		t.Fatal(err)
	}
	p := oneStep("group.video", plan.Update, plan.Operation{Kind: plan.OpGroup, Group: &plan.GroupOp{Group: "video", Add: []string{"nobody"}}})
	if _, err := apply.Apply(context.Background(), h, p, apply.Options{StateDir: "/nonexistent/gpuenv"}); err != apply.ErrNotRoot {
		t.Fatalf("apply as uid %d: %v", os.Getuid(), err)
	}
	if _, err := apply.Rollback(context.Background(), h, apply.RollbackOptions{StateDir: "/nonexistent/gpuenv", To: -1}); err != apply.ErrNotRoot {
		t.Fatalf("rollback as uid %d: %v", os.Getuid(), err)
	}
	if _, _, err := apply.ForceUnlock(h, "/nonexistent/gpuenv"); err == nil || !strings.Contains(err.Error(), "needs root: run gpuenv force-unlock as root") {
		t.Errorf("force-unlock as uid %d: %v", os.Getuid(), err)
	}
	// An image root of the user's own: its state directory is theirs,
	// and trusted.
	img, err := os.MkdirTemp("", "gpuenv-image-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(img)
	ih, err := host.New(img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply.OpenStore(ih, stateDir); err != nil {
		t.Errorf("a state directory in uid %d's own image root: %v", os.Getuid(), err)
	}
	// A state directory made by root: status.json is readable, what the
	// generations hold is not.
	if root := os.Getenv(envNonRoot); root != "1" {
		fh, err := host.New(root)
		if err != nil {
			t.Fatal(err)
		}
		st, err := apply.ReadStatus(fh, stateDir)
		if err != nil || st.Generation != 1 {
			t.Errorf("status.json as uid %d: %+v %v", os.Getuid(), st, err)
		}
		if _, err := os.ReadFile(filepath.Join(root, stateDir, "generations/1/meta.json")); !os.IsPermission(err) {
			t.Errorf("a generation's meta.json is readable by uid %d: %v", os.Getuid(), err)
		}
		if _, err := os.ReadDir(filepath.Join(root, stateDir)); !os.IsPermission(err) {
			t.Errorf("the state directory is listable by uid %d: %v", os.Getuid(), err)
		}
		// history and force-unlock say that the state is root's, not
		// a bare "open …: permission denied".
		if _, err := apply.History(fh, stateDir); err == nil || strings.HasPrefix(err.Error(), "open ") || !strings.Contains(err.Error(), "run gpuenv as root (sudo)") {
			t.Errorf("history as uid %d: %v", os.Getuid(), err)
		}
		if _, _, err := apply.ForceUnlock(fh, stateDir); err == nil || strings.HasPrefix(err.Error(), "chmod ") || !strings.Contains(err.Error(), "run gpuenv as root (sudo)") {
			t.Errorf("force-unlock as uid %d: %v", os.Getuid(), err)
		}
	}
}

func TestNonRootRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		// Already unprivileged: run the checks here.
		t.Setenv(envNonRoot, "1")
		TestNonRootHelper(t)
		return
	}
	// A copy of this test binary that the unprivileged user may run.
	dir, err := os.MkdirTemp("", "gpuenv-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "apply.test")
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(dst, src)
	src.Close()
	dst.Close()
	// A fixture root with one generation, on a path the user can reach.
	fx := newFixture(t)
	for d := fx.Root; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	p := oneStep("environment", plan.Update, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{Path: "/etc/profile.d/gpuenv-test.sh", Content: "x\n"}})
	fx.apply(p, fx.opts(nil))

	cmd := exec.Command(bin, "-test.run=^TestNonRootHelper$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envNonRoot+"="+fx.Root, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNonRootHelper") {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
