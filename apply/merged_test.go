package apply_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// An engine configuration gpuenv merges into is written with the mode,
// owner and group the plan kept from the file — a containerd config.toml
// 0600 of another user stays so — and rollback restores the file as it
// was.
func TestApplyKeepsMergedFileModeAndOwner(t *testing.T) {
	fx := newFixture(t)
	const p = "/etc/containerd/config.toml"
	full := filepath.Join(fx.Root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte("version = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		uid, gid = 1000, 1001
		if err := os.Chown(full, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	before := fx.snapshot()
	merged := "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia]\n  runtime_type = \"io.containerd.runc.v2\"\n"
	fx.applies(oneStep("container_toolkit.engine.containerd", plan.Update, plan.Operation{Kind: plan.OpFile, File: &plan.FileOp{
		Path: p, Content: merged, Mode: 0o600, UID: uid, GID: gid,
	}}))
	if got := fx.read(p); got != merged {
		t.Errorf("%s holds %q", p, got)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(full, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o600 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s is mode %04o owner %d:%d, want 0600 %d:%d", p, st.Mode&0o7777, st.Uid, st.Gid, uid, gid)
	}
	fx.rollsBack(before, "after the merge")
}
