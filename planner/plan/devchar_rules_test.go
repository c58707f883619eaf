package plan

import (
	"strings"
	"testing"
)

// A plan file may make symbolic links only in /dev/char, named
// MAJOR:MINOR, and only to an NVIDIA device node; nothing but links is
// made there.
func TestCheckFileSymlinks(t *testing.T) {
	ok := []FileOp{
		{Path: "/dev/char/195:0", Symlink: "/dev/nvidia0"},
		{Path: "/dev/char/195:255", Symlink: "/dev/nvidiactl"},
		{Path: "/dev/char/508:0", Symlink: "/dev/nvidia-uvm"},
		{Path: "/dev/char/237:1", Symlink: "/dev/nvidia-caps/nvidia-cap1"},
		{Path: "/dev/char/195:0", Remove: true},
		{Path: "/etc/udev/rules.d/71-nvidia-dev-char.rules", Content: "# rule\n", Mode: 0o644},
	}
	for _, f := range ok {
		if err := checkFile(&f); err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
	refused := map[string]FileOp{
		"is named MAJOR:MINOR":       {Path: "/dev/char/nvidia0", Symlink: "/dev/nvidia0"},
		"MAJOR:MINOR":                {Path: "/dev/char/195:0:1", Symlink: "/dev/nvidia0"},
		"only symbolic links in":     {Path: "/dev/char/195:0", Content: "x"},
		"symbolic links only in":     {Path: "/etc/profile.d/x.sh", Symlink: "/dev/nvidia0"},
		"points at an NVIDIA device": {Path: "/dev/char/195:0", Symlink: "/etc/shadow"},
		"not \"/dev/../etc/shadow\"": {Path: "/dev/char/195:0", Symlink: "/dev/../etc/shadow"},
		"with content, a mode":       {Path: "/dev/char/195:0", Symlink: "/dev/nvidia0", After: []string{"ldconfig"}},
		"not a file gpuenv manages":  {Path: "/etc/udev/rules.d/99-other.rules", Content: "x"},
		"owned by 1000:0":            {Path: "/dev/char/195:0", Symlink: "/dev/nvidia0", UID: 1000},
	}
	for want, f := range refused {
		err := checkFile(&f)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", f, err, want)
		}
	}
}
