package apply_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/apply"
	"github.com/gpuenv/gpuenv/apply/applytest"
)

// dashDashCalls lists the commands of a calls log (applytest.EnvCalls)
// whose subcommand, found by sub, takes package arguments but lacks the
// "--" that ends the options before them.
func dashDashCalls(t *testing.T, log string, sub func(args []string) (string, bool)) (checked int, bad []string) {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		args := strings.Fields(line)
		if len(args) == 0 {
			continue
		}
		if _, ok := sub(args); !ok {
			continue
		}
		checked++
		if !slices.Contains(args, "--") {
			bad = append(bad, line)
		}
	}
	return checked, bad
}

// TestDnfPackageArgumentsAfterDoubleDash: every dnf command of an apply
// and its rollback that names packages or package files has "--" before
// them, so that no name is read as an option.
func TestDnfPackageArgumentsAfterDoubleDash(t *testing.T) {
	fx := newRPMFixture(t)
	calls := filepath.Join(t.TempDir(), "calls")
	fx.runner.Env = append(fx.runner.Env, applytest.EnvCalls+"="+calls)
	fx.applies(applytest.DnfPlan())
	if rb := fx.rollback(-1); rb.Status != apply.StatusDone {
		t.Fatalf("rollback status %s\n%s", rb.Status, fx.out.String())
	}
	checked, bad := dashDashCalls(t, calls, func(args []string) (string, bool) {
		if args[0] != "dnf" {
			return "", false
		}
		for i, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			switch a {
			case "install", "reinstall", "remove", "download":
				return a, true
			case "versionlock":
				rest := args[i+2:]
				return a, len(rest) > 0 && (rest[0] == "add" || rest[0] == "delete")
			}
			return a, false
		}
		return "", false
	})
	if checked == 0 {
		t.Fatalf("no dnf command with package arguments in the calls:\n%s", calls)
	}
	if len(bad) > 0 {
		t.Errorf("dnf commands without -- before their packages:\n%s", strings.Join(bad, "\n"))
	}
}

// TestPipPackageArgumentsAfterDoubleDash: the same for pip and venv, over
// the standard plan's pip upgrade and new venv, and their rollback.
func TestPipPackageArgumentsAfterDoubleDash(t *testing.T) {
	fx := newFixture(t)
	calls := filepath.Join(t.TempDir(), "calls")
	fx.runner.Env = append(fx.runner.Env, applytest.EnvCalls+"="+calls)
	fx.applies(applytest.StandardPlan(fx.Index))
	fx.rollback(-1)
	checked, bad := dashDashCalls(t, calls, func(args []string) (string, bool) {
		if !strings.HasPrefix(args[0], "python") || len(args) < 3 || args[1] != "-m" {
			return "", false
		}
		if args[2] == "venv" {
			return "venv", true
		}
		if args[2] == "pip" && len(args) > 3 {
			switch args[3] {
			case "install", "uninstall", "download":
				return args[3], true
			}
		}
		return "", false
	})
	if checked < 3 {
		t.Fatalf("%d pip and venv commands with package arguments in the calls", checked)
	}
	if len(bad) > 0 {
		t.Errorf("pip commands without -- before their packages:\n%s", strings.Join(bad, "\n"))
	}
}
