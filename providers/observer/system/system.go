package system

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Files this package reads, inside the root.
const (
	OSReleasePath    = "/etc/os-release"
	OSReleaseDefault = "/usr/lib/os-release" // os-release(5): the fallback
	KernelRelease    = "/proc/sys/kernel/osrelease"
	KernelArch       = "/proc/sys/kernel/arch"
	SecureBootVar    = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	InitComm         = "/proc/1/comm" // process 1's command name
	KernelHostname   = "/proc/sys/kernel/hostname"
	HostnamePath     = "/etc/hostname"
)

// Observe fills obs.OS, obs.Kernel.Release, obs.Kernel.SecureBoot and
// obs.Init, and appends a warning for each file it could not use.
func Observe(ctx context.Context, h *host.Host, obs *facts.Observation) {
	obs.OS = observeOS(h, &obs.Warnings)
	obs.Kernel.Release = readLine(h, KernelRelease, &obs.Warnings)
	obs.OS.Arch = rootArch(h)
	obs.Kernel.SecureBoot = secureBoot(h, &obs.Warnings)
	obs.Init = observeInit(h, &obs.Warnings)
	obs.Hostname = hostname(h)
}

// hostname is the name the host goes by: the running kernel's, which is
// what fleet tools such as Ansible report, else the name the root is
// configured to take at boot. A root with neither has no name; that is
// no warning, since nothing gpuenv plans depends on it.
func hostname(h *host.Host) string {
	files := []string{HostnamePath}
	if h.Live() {
		files = []string{KernelHostname, HostnamePath}
	}
	for _, f := range files {
		data, err := h.ReadFile(f)
		if err != nil {
			continue
		}
		// hostname(5): one name; lines starting with "#" are comments.
		for line := range strings.Lines(string(data)) {
			if name := strings.TrimSpace(line); name != "" && !strings.HasPrefix(name, "#") {
				return name
			}
		}
	}
	return ""
}

// observeInit reads which program is process 1 of the root. systemd names
// itself "systemd" there, whatever path started it (/sbin/init is a link
// to it on most distributions).
func observeInit(h *host.Host, warns *[]facts.Warning) facts.Init {
	in := facts.Init{Live: h.Running()}
	data, err := h.ReadFile(InitComm)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A disk image, or a root without /proc: no process runs it.
	case err != nil:
		*warns = append(*warns, facts.Warning{Path: InitComm, Message: err.Error()})
	default:
		in.PID1 = strings.TrimSpace(string(data))
	}
	in.Systemd = in.Live && in.PID1 == "systemd"
	in.Chroot = inChroot(h)
	if !in.Live {
		// An image's /proc is the empty directory a system mounts its
		// proc on when it boots; a recorded machine's root holds what
		// its /proc showed.
		if ents, err := h.ReadDir("/proc"); err == nil && len(ents) == 0 {
			in.Chroot = "image"
		}
	}
	return in
}

func observeOS(h *host.Host, warns *[]facts.Warning) facts.OS {
	p := OSReleasePath
	data, err := h.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		p = OSReleaseDefault
		data, err = h.ReadFile(p)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			*warns = append(*warns, facts.Warning{Path: OSReleasePath, Message: "no os-release file: the distribution is unknown"})
		} else {
			*warns = append(*warns, facts.Warning{Path: p, Message: err.Error()})
		}
		return facts.OS{}
	}
	kv, errs := ParseOSRelease(data)
	for _, e := range errs {
		*warns = append(*warns, facts.Warning{Path: p, Message: e.Error()})
	}
	o := facts.OS{
		ID:        kv["ID"],
		VersionID: kv["VERSION_ID"],
		Codename:  kv["VERSION_CODENAME"],
		Name:      kv["PRETTY_NAME"],
	}
	if like := strings.Fields(kv["ID_LIKE"]); len(like) > 0 {
		o.IDLike = like
	}
	if o.ID == "" {
		*warns = append(*warns, facts.Warning{Path: p, Message: "no ID= line: the distribution is unknown"})
	}
	if o.Codename == "" {
		o.Codename = kv["UBUNTU_CODENAME"]
	}
	o.Family = Family(o.ID, o.IDLike)
	return o
}

// Family is the package family of a distribution: "deb", "rpm", or ""
// when neither its ID nor its ID_LIKE names one gpuenv knows.
func Family(id string, like []string) string {
	for _, w := range append([]string{id}, like...) {
		switch w {
		case "debian", "ubuntu":
			return "deb"
		case "rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn", "suse", "opensuse", "sles":
			return "rpm"
		}
	}
	return ""
}

// ParseOSRelease reads os-release(5) assignments: KEY=value, the value
// optionally quoted with shell quoting rules. Malformed lines are skipped
// and reported; the rest is still returned.
func ParseOSRelease(data []byte) (map[string]string, []error) {
	kv := make(map[string]string)
	var errs []error
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		key, raw, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t\"'") {
			errs = append(errs, fmt.Errorf("line %d: not a KEY=value assignment: %q", n+1, clip(line)))
			continue
		}
		val, err := unquote(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %v", n+1, key, err))
			continue
		}
		kv[key] = val
	}
	return kv, errs
}

// unquote undoes shell quoting as os-release(5) allows it: double quotes
// (with \ escaping $ " \ `), single quotes, or a bare word.
func unquote(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '"':
			end := -1
			for j := i + 1; j < len(s); j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("$\"\\`", s[j+1]) >= 0 {
					b.WriteByte(s[j+1])
					j++
					continue
				}
				if s[j] == '"' {
					end = j
					break
				}
				b.WriteByte(s[j])
			}
			if end < 0 {
				return "", errors.New("unterminated double quote")
			}
			i = end + 1
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", errors.New("unterminated single quote")
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case '\\':
			if i+1 < len(s) {
				b.WriteByte(s[i+1])
			}
			i += 2
		case ' ', '\t':
			return "", errors.New("unquoted space in value")
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}

func readLine(h *host.Host, p string, warns *[]facts.Warning) string {
	data, err := h.ReadFile(p)
	if err != nil {
		*warns = append(*warns, facts.Warning{Path: p, Message: err.Error()})
		return ""
	}
	s := strings.TrimSpace(string(data))
	if s == "" || strings.ContainsAny(s, " \t\n") {
		*warns = append(*warns, facts.Warning{Path: p, Message: fmt.Sprintf("not a kernel release: %q", clip(s))})
		return ""
	}
	return s
}

// SecureBoot reads the UEFI SecureBoot variable as efivarfs presents it:
// four attribute bytes, then the value (1 enabled, 0 disabled).
func SecureBoot(data []byte) (string, error) {
	if len(data) != 5 {
		return "unknown", fmt.Errorf("%d bytes, want 4 attribute bytes and 1 value byte", len(data))
	}
	switch data[4] {
	case 0:
		return "disabled", nil
	case 1:
		return "enabled", nil
	}
	return "unknown", fmt.Errorf("value %d, want 0 or 1", data[4])
}

func secureBoot(h *host.Host, warns *[]facts.Warning) string {
	data, err := h.ReadFile(SecureBootVar)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			*warns = append(*warns, facts.Warning{Path: SecureBootVar, Message: err.Error()})
		}
		// No variable: a BIOS boot, efivarfs not mounted, a container or
		// an image. Secure Boot cannot be told from here.
		return "unknown"
	}
	state, err := SecureBoot(data)
	if err != nil {
		*warns = append(*warns, facts.Warning{Path: SecureBootVar, Message: err.Error()})
	}
	return state
}

// rootArch is the root's architecture as uname -m names it: the kernel's
// kernel.arch sysctl, else (kernels before 6.1, or a root that is an
// image) the machine of the root's own shell, which is the architecture
// its wheels and libraries must be for whatever gpuenv was built for.
// Only on the live machine with neither is gpuenv's own the answer.
func rootArch(h *host.Host) string {
	if data, err := h.ReadFile(KernelArch); err == nil {
		return strings.TrimSpace(string(data))
	}
	for _, p := range RootShells {
		if a := elfArch(h, p); a != "" {
			return a
		}
	}
	if h.Live() {
		return unameArch(runtime.GOARCH)
	}
	return ""
}

// RootShells are the programs whose ELF machine names a root's
// architecture: every Linux root has one of them.
var RootShells = []string{"/bin/sh", "/usr/bin/sh", "/usr/bin/env"}

// elfArch is the uname -m name of an ELF file's machine; "" when the file
// is missing or not ELF.
func elfArch(h *host.Host, p string) string {
	f, err := h.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return ""
	}
	defer ef.Close()
	return MachineArch(ef.Machine)
}

// MachineArch names an ELF machine as uname -m does; "" for one gpuenv
// has no use for.
func MachineArch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86_64"
	case elf.EM_AARCH64:
		return "aarch64"
	case elf.EM_PPC64:
		return "ppc64le"
	case elf.EM_RISCV:
		return "riscv64"
	}
	return ""
}

// unameArch names a Go architecture as uname -m does.
func unameArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "ppc64le":
		return "ppc64le"
	}
	return goarch
}

// clip shortens text quoted in a warning, so that a binary file read by
// mistake does not flood the output.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// inChroot tells, of the live root, whether "/" is another directory
// than process 1's root, as systemd tells a chroot (facts.Init.Chroot),
// or no /proc is mounted at all, as in a chroot set up bare to build an
// image.
// It looks at this machine's own paths: the host handle follows no /proc
// magic link, which may lead anywhere, and this one must be followed. A
// root made to stand for the running system (host.AsRunningSystem) is
// not asked: the option says it is no chroot's.
func inChroot(h *host.Host) string {
	if !h.Live() || h.RunningByOption() {
		return ""
	}
	root, err := os.Stat("/")
	if err != nil {
		return ""
	}
	pid1, err := os.Stat("/proc/1/root")
	if err != nil {
		if os.Geteuid() == 0 && errors.Is(err, fs.ErrPermission) {
			return "unknown"
		}
		if _, err := os.Stat("/proc/self"); errors.Is(err, fs.ErrNotExist) {
			// No /proc at all: no running system's root lacks it, and a
			// chroot set up to build an image often does.
			return "yes"
		}
		return ""
	}
	a, ok1 := root.Sys().(*syscall.Stat_t)
	b, ok2 := pid1.Sys().(*syscall.Stat_t)
	if ok1 && ok2 && (a.Dev != b.Dev || a.Ino != b.Ino) {
		return "yes"
	}
	return ""
}
