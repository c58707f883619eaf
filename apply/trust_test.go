package apply_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
)

// nobody owns what the tests give away.
const nobody = 65534

// TestInsecureStateDirRefused: a state directory, a directory above it,
// or a file of a generation that a user other than root owns or others
// can write is how that user becomes root (a forged generation's inverse
// runs as root on the next rollback). Everything that acts on the state
// refuses it, naming the path, its owner and mode, and the fix; the
// read-only history warns and still lists.
func TestInsecureStateDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		path  string // inside the root; "" is the root directory
		chown bool   // give it to nobody
		mode  os.FileMode
		want  string
	}{
		{name: "state dir owned by a user", path: stateDir, chown: true, want: "chown root:root"},
		{name: "state dir writable by others", path: stateDir, mode: 0o777, want: "chmod go-w"},
		{name: "state dir writable by its group", path: stateDir, mode: 0o771, want: "writable by its group"},
		{name: "directory above owned by a user", path: "/var/lib", chown: true, want: "directory above the state directory"},
		{name: "directory above writable by others", path: "/var", mode: 0o777, want: "chmod go-w"},
		{name: "root directory writable by others", path: "", mode: 0o777, want: "directory above the state directory"},
		{name: "sticky directory above owned by a user", path: "/var", chown: true, mode: 0o777 | os.ModeSticky, want: "chown root:root"},
		{name: "generations owned by a user", path: stateDir + "/generations", chown: true, want: "state directory"},
		{name: "status file writable by others", path: stateDir + "/status.json", mode: 0o666, want: "status.json"},
		{name: "meta.json owned by a user", path: stateDir + "/generations/1/meta.json", chown: true, want: "file of generation 1"},
		{name: "journal writable by others", path: stateDir + "/generations/1/journal", mode: 0o646, want: "file of generation 1"},
		{name: "plan.json owned by a user", path: stateDir + "/generations/1/plan.json", chown: true, want: "file of generation 1"},
		{name: "saved file writable by its group", path: stateDir + "/generations/1/files/2", mode: 0o620, want: "file of generation 1"},
		{name: "packages writable by others", path: stateDir + "/generations/1/packages", mode: 0o777, want: "file of generation 1"},
		{name: "saved package owned by a user", path: stateDir + "/generations/1/packages/1-nvidia-smi/nvidia-smi_535.261.03-1_amd64.deb", chown: true, want: "file of generation 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chown && os.Geteuid() != 0 {
				t.Skip("giving a file away needs root")
			}
			fx := newFixture(t)
			p1, p2 := twoPlans(fx.Index)
			fx.apply(p1, fx.opts(nil))
			p := filepath.Join(fx.Root, tc.path)
			if tc.chown {
				if err := os.Lchown(p, nobody, nobody); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mode != 0 {
				if err := os.Chmod(p, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			before := fx.snapshot()
			check := func(what string, err error) {
				t.Helper()
				var ie *apply.InsecureError
				if !errors.As(err, &ie) {
					t.Fatalf("%s: %v, want an insecure state directory", what, err)
				}
				msg := err.Error()
				for _, w := range []string{p, tc.want, fmt.Sprintf("mode %04o", ie.Mode), "uid ", "Fix it with: "} {
					if !strings.Contains(msg, w) {
						t.Errorf("%s: the message lacks %q:\n%s", what, w, msg)
					}
				}
			}
			_, err := apply.Apply(context.Background(), fx.h, p2, fx.opts(nil))
			check("apply", err)
			_, err = apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1, Hook: &fx.out})
			check("rollback", err)
			_, err = apply.Prune(fx.h, stateDir, 0)
			check("history --keep", err)
			_, _, err = apply.ForceUnlock(fx.h, stateDir)
			check("force-unlock", err)
			_, err = apply.History(fx.h, stateDir)
			check("history (for a caller that acts on it)", err)
			err = apply.CheckReady(fx.h, stateDir)
			check("apply's check before planning", err)

			var warnings []string
			gens, err := apply.ReadHistory(fx.h, stateDir, func(err error) { warnings = append(warnings, err.Error()) })
			if err != nil || len(gens) != 1 || len(warnings) == 0 || !strings.Contains(strings.Join(warnings, "\n"), p) {
				t.Errorf("history: %v %v, warnings %q", gens, err, warnings)
			}
			if strings.HasPrefix(tc.path, stateDir) && tc.path != stateDir+"/generations" && !strings.Contains(tc.path, "/generations/") {
				// The status file and the state directory: plan's
				// check says so too.
				check("plan's check of the status file", apply.CheckStateDir(fx.h, stateDir))
			}
			if tc.path == stateDir+"/generations/1/meta.json" {
				_, err := apply.ReadStatus(fx.h, stateDir)
				if err != nil {
					t.Errorf("status.json is fine, the meta is not: %v", err)
				}
			}
			fx.same(before, "after the refused runs")
		})
	}
}

// TestTrustedAncestors: a root-owned sticky directory above the state
// directory (a /tmp) is safe, since nobody else can rename or remove what
// is in it; the directories above a symlinked state directory's target
// are checked as well as those above the link.
func TestTrustedAncestors(t *testing.T) {
	fx := newFixture(t)
	p1, p2 := twoPlans(fx.Index)
	if err := os.Chmod(filepath.Join(fx.Root, "var"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	fx.apply(p1, fx.opts(nil))

	// /srv/data/gpuenv, reached through /var/lib/gpuenv-link.
	target := filepath.Join(fx.Root, "srv/data/gpuenv")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/srv/data/gpuenv", filepath.Join(fx.Root, "var/lib/gpuenv-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(fx.Root, "srv/data"), 0o777); err != nil {
		t.Fatal(err)
	}
	o := fx.opts(nil)
	o.StateDir = "/var/lib/gpuenv-link"
	_, err := apply.Apply(context.Background(), fx.h, p2, o)
	var ie *apply.InsecureError
	if !errors.As(err, &ie) || ie.Path != filepath.Join(fx.Root, "srv/data") {
		t.Fatalf("apply with the state directory's target under a directory others can write: %v", err)
	}
	if err := os.Chmod(filepath.Join(fx.Root, "srv/data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := fx.apply(p2, o); res.Status != apply.StatusApplied {
		t.Fatalf("apply through the symlink: %s", res.Status)
	}
	if _, err := os.Stat(filepath.Join(target, "generations/1/meta.json")); err != nil {
		t.Errorf("the generation is not in the symlink's target: %v", err)
	}
}

// TestStateDirNotTakenOver: --state-dir naming a directory that is not
// gpuenv's (a shared /tmp) is refused and its mode left alone; an empty
// one with a safe owner and mode is taken as it is; a missing one is
// created, 0711, with gpuenv's marker; one made by a gpuenv from before the
// marker is recognised.
func TestStateDirNotTakenOver(t *testing.T) {
	fx := newFixture(t)
	p1, p2 := twoPlans(fx.Index)
	mkdir := func(p string, mode os.FileMode) string {
		t.Helper()
		abs := filepath.Join(fx.Root, p)
		if err := os.MkdirAll(abs, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(abs, mode); err != nil {
			t.Fatal(err)
		}
		return abs
	}
	modeOf := func(abs string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(abs)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode() & (os.ModePerm | os.ModeSticky)
	}
	withState := func(dir string) apply.Options {
		o := fx.opts(nil)
		o.StateDir = dir
		return o
	}

	// A shared directory with someone's file in it.
	shared := mkdir("/srv/shared", 0o777|os.ModeSticky)
	if err := os.WriteFile(filepath.Join(shared, "x11-socket"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := fx.snapshot()
	_, err := apply.Apply(context.Background(), fx.h, p1, withState("/srv/shared"))
	var ne *apply.NotStateDirError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), "not gpuenv's") || !strings.Contains(err.Error(), "/srv/shared/gpuenv") {
		t.Fatalf("apply with --state-dir on a shared directory: %v", err)
	}
	for what, err := range map[string]error{
		"rollback": func() error {
			_, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: "/srv/shared", To: -1})
			return err
		}(),
		"prune":        func() error { _, err := apply.Prune(fx.h, "/srv/shared", 0); return err }(),
		"force-unlock": func() error { _, _, err := apply.ForceUnlock(fx.h, "/srv/shared"); return err }(),
		"history":      func() error { _, err := apply.History(fx.h, "/srv/shared"); return err }(),
	} {
		if !errors.As(err, &ne) {
			t.Errorf("%s with --state-dir on a shared directory: %v", what, err)
		}
	}
	if m := modeOf(shared); m != 0o777|os.ModeSticky {
		t.Errorf("the shared directory's mode became %v", m)
	}
	fx.same(before, "after refusing a shared directory")

	// Empty, but writable by all: refused as it is, not chmodded.
	empty := mkdir("/srv/empty-shared", 0o777|os.ModeSticky)
	_, err = apply.Apply(context.Background(), fx.h, p1, withState("/srv/empty-shared"))
	var ie *apply.InsecureError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "a state directory of its own") {
		t.Fatalf("apply with --state-dir on an empty shared directory: %v", err)
	}
	if m := modeOf(empty); m != 0o777|os.ModeSticky {
		t.Errorf("the empty shared directory's mode became %v", m)
	}

	// Empty, root's, not writable by others: taken, mode kept.
	own := mkdir("/srv/state", 0o750)
	if res := fx.apply(p1, withState("/srv/state")); res.Status != apply.StatusApplied {
		t.Fatalf("apply into an empty directory: %s", res.Status)
	}
	if m := modeOf(own); m != 0o750 {
		t.Errorf("an adopted directory's mode became %v", m)
	}
	if _, err := os.Stat(filepath.Join(own, ".gpuenv-state")); err != nil {
		t.Errorf("no marker in the adopted directory: %v", err)
	}
	fx.rollback(-1)

	// What a kill while marking an empty directory leaves is still
	// empty to gpuenv; a lock file alone is no gpuenv's.
	half := mkdir("/srv/half-marked", 0o755)
	if err := os.WriteFile(filepath.Join(half, "..gpuenv-state.gpuenv-123"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := apply.OpenStore(fx.h, "/srv/half-marked"); err != nil {
		t.Errorf("a directory holding only a half-written marker: %v", err)
	}
	lockOnly := mkdir("/srv/lock-only", 0o755)
	if err := os.WriteFile(filepath.Join(lockOnly, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := apply.OpenStore(fx.h, "/srv/lock-only"); !errors.As(err, &ne) {
		t.Errorf("a directory holding only a lock file: %v", err)
	}

	// Missing: made, with its missing parents, 0711 and marked.
	if res := fx.apply(p1, withState("/srv/new/gpuenv")); res.Status != apply.StatusApplied {
		t.Fatalf("apply into a new directory: %s", res.Status)
	}
	if m := modeOf(filepath.Join(fx.Root, "srv/new/gpuenv")); m != 0o711 {
		t.Errorf("a new state directory has mode %v", m)
	}
	if m := modeOf(filepath.Join(fx.Root, "srv/new")); m != 0o755 {
		t.Errorf("a new directory above it has mode %v", m)
	}
	if data, err := os.ReadFile(filepath.Join(fx.Root, "srv/new/gpuenv/.gpuenv-state")); err != nil || !strings.Contains(string(data), "gpuenv's state directory") {
		t.Errorf("marker: %q %v", data, err)
	}

	// Made by a gpuenv before the marker: generations, status.json and
	// nothing else of anyone's.
	legacy := filepath.Join(fx.Root, "srv/new/gpuenv")
	if err := os.Remove(filepath.Join(legacy, ".gpuenv-state")); err != nil {
		t.Fatal(err)
	}
	if gens, err := apply.History(fx.h, "/srv/new/gpuenv"); err != nil || len(gens) != 1 {
		t.Fatalf("history of a state directory from before the marker: %v %v", gens, err)
	}
	if res := fx.apply(p2, withState("/srv/new/gpuenv")); res.Status != apply.StatusApplied || res.Generation != 2 {
		t.Fatalf("apply into a state directory from before the marker: %d %s", res.Generation, res.Status)
	}
	if _, err := os.Stat(filepath.Join(legacy, ".gpuenv-state")); err != nil {
		t.Errorf("the state directory from before the marker was not marked: %v", err)
	}
	// … but not when something else lives there too.
	if err := os.Remove(filepath.Join(legacy, ".gpuenv-state")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(legacy, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: "/srv/new/gpuenv", To: -1}); !errors.As(err, &ne) {
		t.Errorf("rollback in a directory with generations and more: %v", err)
	}
}

// TestDamagedGeneration: a generation whose meta.json is missing or
// unreadable, while its journal is there, is listed as damaged, and
// rollback stops at it instead of undoing the generation before it.
func TestDamagedGeneration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(meta string) error
		want   string
	}{
		{"meta.json missing", os.Remove, "its meta.json is missing"},
		{"meta.json unreadable", func(meta string) error { return os.WriteFile(meta, []byte("{\"id\": 2, \"kin"), 0o600) }, "its meta.json cannot be read"},
		{"meta.json of another generation", func(meta string) error { return os.WriteFile(meta, []byte(`{"id": 1}`), 0o600) }, "names generation 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			p1, p2 := twoPlans(fx.Index)
			fx.apply(p1, fx.opts(nil))
			s1 := fx.snapshot()
			fx.apply(p2, fx.opts(nil))
			meta2 := filepath.Join(fx.Root, stateDir, "generations/2/meta.json")
			saved, err := os.ReadFile(meta2)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.damage(meta2); err != nil {
				t.Fatal(err)
			}
			s2 := fx.snapshot()

			gens, err := apply.History(fx.h, stateDir)
			if err != nil || len(gens) != 2 || gens[1].ID != 2 || gens[1].Status != apply.StatusDamaged || !strings.Contains(gens[1].Damaged, tc.want) {
				t.Fatalf("history: %+v %v", gens, err)
			}
			for _, to := range []int{-1, 0, 1} {
				_, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: to, Hook: &fx.out})
				var de *apply.DamagedError
				if !errors.As(err, &de) || de.Meta.ID != 2 || !strings.Contains(err.Error(), "generation 2 is damaged: ") || !strings.Contains(err.Error(), tc.want) ||
					!strings.Contains(err.Error(), filepath.Join(fx.Root, stateDir, "generations/2")+".damaged") {
					t.Errorf("rollback --to %d over a damaged generation: %v", to, err)
				}
				fx.same(s2, fmt.Sprintf("after rollback --to %d stopped", to))
			}
			if gens, _ := apply.History(fx.h, stateDir); len(gens) != 2 {
				t.Errorf("a refused rollback made a generation")
			}

			// Damaged further back: the newer apply is undone, and
			// rollback stops when it reaches the damaged one.
			if err := os.WriteFile(meta2, saved, 0o600); err != nil {
				t.Fatal(err)
			}
			meta1 := filepath.Join(fx.Root, stateDir, "generations/1/meta.json")
			if err := tc.damage(meta1); err != nil {
				t.Fatal(err)
			}
			if tc.name == "meta.json of another generation" {
				os.WriteFile(meta1, []byte(`{"id": 7}`), 0o600)
			}
			if res := fx.rollback(-1); res.Status != apply.StatusDone {
				t.Fatalf("rollback of the apply after the damaged one: %s", res.Status)
			}
			fx.same(s1, "after undoing the apply after the damaged one")
			var de *apply.DamagedError
			if _, err := apply.Rollback(context.Background(), fx.h, apply.RollbackOptions{StateDir: stateDir, To: -1}); !errors.As(err, &de) || de.Meta.ID != 1 {
				t.Errorf("rollback reaching the damaged generation: %v", err)
			}
			fx.same(s1, "after rollback stopped at generation 1")
		})
	}
}

// TestEmptyLockFile: the lock file a gpuenv killed between creating and
// writing it leaves is described as that, not as "pid 0, started
// 0001-01-01", and force-unlock removes it.
func TestEmptyLockFile(t *testing.T) {
	fx := newFixture(t)
	if _, err := apply.OpenStore(fx.h, stateDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.Root, stateDir, "lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p1, _ := twoPlans(fx.Index)
	_, err := apply.Apply(context.Background(), fx.h, p1, fx.opts(nil))
	var le *apply.LockedError
	if !errors.As(err, &le) || !le.Stale || !strings.Contains(err.Error(), "an empty file left by a gpuenv that died while taking it") ||
		!strings.Contains(err.Error(), "gpuenv force-unlock") || strings.Contains(err.Error(), "pid 0") || strings.Contains(err.Error(), "0001-01-01") {
		t.Fatalf("apply with an empty lock file: %v", err)
	}
	info, removed, err := apply.ForceUnlock(fx.h, stateDir)
	if err != nil || !removed || info.PID != 0 || !strings.Contains(info.String(), "died while taking the lock") {
		t.Fatalf("force-unlock of an empty lock file: %v %v %v", info, removed, err)
	}
	fx.apply(p1, fx.opts(nil))
}

// TestCheckReadyNamesLockHolder: asked while an apply runs (its generation
// says "running"), apply's check before planning says who holds the lock,
// not that a generation is unfinished and wants a rollback.
func TestCheckReadyNamesLockHolder(t *testing.T) {
	fx := newFixture(t)
	p1, _ := twoPlans(fx.Index)
	o := fx.opts(nil)
	var during error
	o.JournalPoint = func(n int) {
		if n == 2 {
			during = apply.CheckReady(fx.h, stateDir)
		}
	}
	fx.apply(p1, o)
	var le *apply.LockedError
	if !errors.As(during, &le) || le.Stale || le.Holder.PID != os.Getpid() || !strings.Contains(during.Error(), "another gpuenv is running on this root: gpuenv apply (pid ") {
		t.Fatalf("during an apply: %v", during)
	}
	if err := apply.CheckReady(fx.h, stateDir); err != nil {
		t.Errorf("after the apply: %v", err)
	}
	// A generation left running by a killed gpuenv, its lock left too:
	// the message says to clear the lock before the rollback.
	_, lock := fx.lock()
	st := filepath.Join(fx.Root, stateDir, "status.json")
	// Generation 2, whose journal is not there to say it ended (the
	// status file is read through the journal when it can be).
	if err := os.WriteFile(st, []byte(`{"unfinished": true, "generation": 2, "kind": "apply", "status": "running"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fx.Root, stateDir, "lock"), []byte(`{"pid":999999999,"command":"apply","started":"2026-01-02T03:04:05Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := apply.CheckReady(fx.h, stateDir)
	if err == nil || !strings.Contains(err.Error(), "generation 2 (apply) is unfinished") || !strings.Contains(err.Error(), "first run `gpuenv force-unlock`: the lock was left by gpuenv apply (pid 999999999") {
		t.Errorf("with an unfinished generation and a stale lock: %v", err)
	}
}
