package apply

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Where Debian's packages say that the system must restart (their
// postinst scripts, through /usr/share/update-notifier/notify-reboot-
// required): reboot coordinators such as kured and unattended-upgrades'
// Automatic-Reboot read these.
const (
	RebootRequired     = "/var/run/reboot-required"
	RebootRequiredPkgs = "/var/run/reboot-required.pkgs"
	// rebootRequiredText is the first file's content, as Debian writes it.
	rebootRequiredText = "*** System restart required ***\n"
)

// rebootPackages are the packages of the steps that need a reboot: the
// ones they install or remove, in plan order.
func rebootPackages(plan *plan.Plan) []string {
	var out []string
	for _, s := range plan.Steps {
		if !s.Flags.NeedsReboot {
			continue
		}
		for _, op := range s.Operations {
			if op.Packages == nil {
				continue
			}
			for _, p := range op.Packages.Install {
				out = append(out, p.Name)
			}
			out = append(out, op.Packages.Remove...)
		}
	}
	return out
}

// markRebootRequired writes the reboot-required flag of the running
// system, and appends to its list the packages not yet listed, as
// Debian's packages do. The flag lives in /run, which the reboot clears;
// a rollback leaves it, as a package downgrade does. A root that is not
// the running system has no restart to ask for: it starts afresh when
// it boots.
func markRebootRequired(h *host.Host, pkgs []string) error {
	if !h.Running() {
		return nil
	}
	flag, err := (&HostExecutor{Host: h}).real(RebootRequired)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(flag), 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(flag, []byte(rebootRequiredText), 0o644); err != nil {
		return err
	}
	list, err := (&HostExecutor{Host: h}).real(RebootRequiredPkgs)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(list)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	have := strings.Fields(string(old))
	var add bytes.Buffer
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		add.WriteByte('\n')
	}
	for _, p := range pkgs {
		if !slices.Contains(have, p) {
			have = append(have, p)
			add.WriteString(p + "\n")
		}
	}
	if add.Len() == 0 {
		return nil
	}
	f, err := os.OpenFile(list, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(add.Bytes()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
