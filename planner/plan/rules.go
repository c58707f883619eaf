package plan

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/gpuenv/gpuenv/planner/compat/nvidiarepo"
	"github.com/gpuenv/gpuenv/spec"
	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// The rules below are what an operation may ask of apply, which runs it as
// root. They are the planner's: its providers' output meets them by
// construction (Plan checks it), and a plan read back from a file, which
// anyone may have edited, is held to them before anything runs (Validate,
// and apply once more per operation). Names and versions are checked by the
// validators the spec uses for the same values; everything else (where
// files go, what runs after them, units, modules, device settings) comes
// from the closed sets the providers draw from.

// Package names as each manager's own rules allow them: Debian Policy
// 5.6.7 for apt, what rpm allows for dnf, PEP 508 for pip.
var (
	debianName = lazyregexp.New(`^[a-z0-9][a-z0-9+.-]+$`)
	rpmName    = lazyregexp.New(`^[A-Za-z0-9][A-Za-z0-9+._-]*$`)
	// driverVersion is an NVIDIA driver version: 535.261.03, 550.54.15.
	driverVersion = lazyregexp.New(`^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?$`)
	pipName       = lazyregexp.New(`^(?i:[a-z0-9]|[a-z0-9][a-z0-9._-]*[a-z0-9])$`)
	// devCharName is a /dev/char link's name, MAJOR:MINOR in decimal.
	devCharName = lazyregexp.New(`^[0-9]{1,4}:[0-9]{1,7}$`)
	// nvidiaNode is an NVIDIA device node a /dev/char link may point at.
	nvidiaNode = lazyregexp.New(`^/dev/(nvidia[a-z0-9-]*|nvidia-caps/nvidia-cap[0-9]+)$`)
)

// DevCharDir holds the links runc names character devices by,
// MAJOR:MINOR, when systemd rewrites a container's device rules; gpuenv
// makes them only for NVIDIA device nodes, and only as symbolic links.
const DevCharDir = "/dev/char"

// managedDir is a directory gpuenv writes its files into.
type managedDir struct {
	dir string
	// names, when set, are the only files gpuenv writes there.
	names []string
	// merged is set where the files are the administrator's, which
	// gpuenv merges into: a write keeps the existing file's mode, owner
	// and group, whatever they are.
	merged bool
}

// managedDirs are the directories the providers write files into (a file
// operation writes or removes one file directly inside one of them):
//
//	repository   sources.list.d, preferences.d, yum.repos.d
//	environment  profile.d, ld.so.conf.d, systemd's system.conf.d, and
//	             gpuenv's own directory of team files
//	kernel       modprobe.d (the nouveau blacklist)
//	devices      systemd's unit directory, for its own unit only
//	containers   the engines' configuration files and the CDI spec
var managedDirs = []managedDir{
	{dir: "/etc/apt/sources.list.d"},
	{dir: "/etc/apt/preferences.d"},
	{dir: "/etc/yum.repos.d"},
	{dir: "/etc/profile.d"},
	{dir: "/etc/ld.so.conf.d"},
	{dir: "/etc/systemd/system.conf.d"},
	{dir: "/etc/gpuenv/teams"},
	{dir: "/etc/modprobe.d"},
	{dir: "/etc/systemd/system", names: []string{"gpuenv-compute-mode.service", "gpuenv-mig.service"}},
	{dir: "/etc/docker", names: []string{"daemon.json"}, merged: true},
	{dir: "/etc/containerd", names: []string{"config.toml"}, merged: true},
	{dir: "/etc/crio/crio.conf.d", names: []string{"99-nvidia.toml"}, merged: true},
	{dir: "/etc/cdi", names: []string{"nvidia.yaml", "management.nvidia.com-gpu.yaml"}},
	// The rule that makes the /dev/char links when the driver binds.
	{dir: "/etc/udev/rules.d", names: []string{"71-nvidia-dev-char.rules"}},
	// The keyrings of the NVIDIA repository gpuenv adds itself.
	{dir: "/etc/apt/keyrings", names: []string{path.Base(nvidiarepo.CUDAFiles.AptKeyring), path.Base(nvidiarepo.ToolkitFiles.AptKeyring)}},
	{dir: "/etc/pki/rpm-gpg", names: []string{path.Base(nvidiarepo.CUDAFiles.DnfKey), path.Base(nvidiarepo.ToolkitFiles.DnfKey)}},
}

// followUps are the commands a file operation may run after the file
// changed (FileOp.After): each re-reads the files of one kind.
var followUps = [][]string{
	{"ldconfig"},
	{"systemctl", "daemon-reload"},
	{"systemctl", "daemon-reexec"},
	{"apt-get", "update"},
	{"dnf", "makecache"},
	{"update-initramfs", "-u"},
	// The container engines read their runtimes when they start.
	{"systemctl", "restart", "docker"},
	{"systemctl", "restart", "containerd"},
	{"systemctl", "restart", "crio"},
}

// units are the systemd units a service operation may enable or disable:
// the driver's nvidia-persistenced and the devices' compute-mode unit.
var units = []string{"nvidia-persistenced.service", "gpuenv-compute-mode.service", "gpuenv-mig.service",
	"nvidia-fabricmanager.service", "nvidia-dcgm.service", "dcgm-exporter.service"}

// modules are the kernel modules a kernel operation may load or unload, as
// the kernel spells them ("-" and "_" are alike to modprobe).
var modules = []string{"nvidia", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nouveau",
	// Debian's build of the same modules.
	"nvidia_current", "nvidia_current_uvm", "nvidia_current_drm", "nvidia_current_modeset", "nvidia_current_peermem"}

// deviceSettings are the NVML settings a device operation may change, with
// the values each takes.
var deviceSettings = map[DeviceSetting][]string{
	SettingComputeMode:     {string(spec.ComputeModeDefault), string(spec.ComputeModeExclusiveProcess), string(spec.ComputeModeProhibited)},
	SettingPersistenceMode: {PersistenceEnabled, PersistenceDisabled},
	SettingMIGMode:         {string(spec.MIGEnabled), string(spec.MIGDisabled)},
	SettingGPUInstance:     {GPUInstancePresent, GPUInstanceAbsent},
}

// migProfileName is a GPU instance profile as NVIDIA writes it.
var migProfileName = lazyregexp.New(`^[1-8]g\.[0-9]{1,3}gb(\+me)?$`)

// checkMIGInstance checks a GPU instance: a profile name, NVML's profile
// and compute-slice numbers, and a placement inside the eight memory
// slices of the largest GPUs.
func checkMIGInstance(in *MIGInstance) error {
	if !migProfileName.MatchString(in.Profile) {
		return fmt.Errorf("device operation: %q is not a MIG profile", in.Profile)
	}
	if in.ProfileID < 0 || in.ProfileID > 14 {
		return fmt.Errorf("device operation: MIG profile id %d", in.ProfileID)
	}
	if in.Start < 0 || in.Size < 1 || in.Start+in.Size > 8 {
		return fmt.Errorf("device operation: MIG placement %d+%d is outside memory slices 0-7", in.Start, in.Size)
	}
	if len(in.Compute) == 0 || len(in.Compute) > 8 {
		return fmt.Errorf("device operation: %d compute instances", len(in.Compute))
	}
	for _, n := range in.Compute {
		if !slices.Contains([]int{1, 2, 3, 4, 6, 7, 8}, n) {
			return fmt.Errorf("device operation: a compute instance of %d slices", n)
		}
	}
	return nil
}

// CheckOperation checks one operation as strictly as the planner's own
// output: exactly the field its kind names is set, and every value in it
// is one the planner could have produced.
func CheckOperation(op Operation) error {
	if err := op.validate(); err != nil {
		return err
	}
	switch op.Kind {
	case OpPackages:
		return checkPackages(op.Packages)
	case OpFile:
		return checkFile(op.File)
	case OpGroup:
		return checkGroup(op.Group)
	case OpKernel:
		return checkKernel(op.Kernel)
	case OpService:
		if !slices.Contains(units, op.Service.Unit) {
			return fmt.Errorf("unit %q is not one gpuenv manages (%s)", op.Service.Unit, strings.Join(units, ", "))
		}
		if r := op.Service.Run; r != "" && r != ServiceStop && r != ServiceStart {
			return fmt.Errorf("service operation: unknown run %q (stop or start)", r)
		}
	case OpDevice:
		return checkDevice(op.Device)
	case OpRefresh:
		if RefreshCommand(op.Refresh.Manager) == nil {
			return fmt.Errorf("refresh of package manager %q: only apt's and dnf's indexes are refreshed", op.Refresh.Manager)
		}
	}
	return nil
}

// checkPackages checks a package transaction: names and versions by the
// manager's rules, and for pip the interpreter, environment, index and
// extras as the spec checks them.
func checkPackages(op *PackagesOp) error {
	m := Manager(op.Manager)
	switch m {
	case ManagerApt, ManagerDnf, ManagerPip:
	default:
		return fmt.Errorf("package manager %q: plans use apt, dnf and pip only", m)
	}
	if len(op.Install)+len(op.Remove)+len(op.Hold)+len(op.Unhold) == 0 {
		return fmt.Errorf("%s operation changes nothing", m)
	}
	installs := map[string]bool{}
	for _, p := range op.Install {
		if err := checkPackageName(m, p.Name); err != nil {
			return err
		}
		if installs[p.Name] {
			return fmt.Errorf("%s operation pins %s twice", m, p.Name)
		}
		installs[p.Name] = true
		if err := checkPin(m, p); err != nil {
			return err
		}
	}
	for _, list := range [][]string{op.Remove, op.Hold, op.Unhold} {
		seen := map[string]bool{}
		for _, n := range list {
			if err := checkPackageName(m, n); err != nil {
				return err
			}
			if seen[n] {
				return fmt.Errorf("%s operation names %s twice", m, n)
			}
			seen[n] = true
		}
	}
	for _, n := range op.Remove {
		if installs[n] {
			return fmt.Errorf("%s operation both installs and removes %s", m, n)
		}
	}
	if op.Reinstall {
		// A reinstall puts back what is there: anything else in the
		// same transaction would change the package set under it.
		if len(op.Install) == 0 || len(op.Remove)+len(op.Hold)+len(op.Unhold) > 0 || op.Purge || op.AllowDowngrade {
			return fmt.Errorf("%s reinstall must pin packages and do nothing else", m)
		}
		for _, p := range op.Install {
			if p.KnownAfterApply() {
				return fmt.Errorf("%s reinstall of %s has no version: it reinstalls the installed one", m, p.Name)
			}
		}
	}
	if m != ManagerPip {
		if op.Python != "" || op.Venv != "" || op.IndexURL != "" {
			return fmt.Errorf("%s operation names a Python environment or index, which only pip uses", m)
		}
		return nil
	}
	if len(op.Hold)+len(op.Unhold) > 0 || op.Purge {
		return errors.New("pip cannot hold, release or purge packages")
	}
	for _, p := range []struct{ what, value string }{{"interpreter", op.Python}, {"virtual environment", op.Venv}} {
		if p.value == "" {
			continue
		}
		if err := checkPlanPath(p.value); err != nil {
			return fmt.Errorf("pip %s: %w", p.what, err)
		}
	}
	if op.Venv == "/" {
		return errors.New("pip virtual environment: the root directory is not one")
	}
	if op.IndexURL != "" {
		if msg := spec.CheckURL(op.IndexURL, spec.IndexURLSchemes...); msg != "" {
			return fmt.Errorf("pip index: %s", sentenceErr(msg))
		}
	}
	return nil
}

// checkPackageName checks a package name for manager m. No name may start
// with "-", which the package manager would read as an option.
func checkPackageName(m Manager, name string) error {
	var ok bool
	switch m {
	case ManagerApt:
		ok = debianName.MatchString(name)
	case ManagerDnf:
		ok = rpmName.MatchString(name)
	case ManagerPip:
		ok = pipName.MatchString(name)
	}
	if !ok {
		return fmt.Errorf("%q is not a package name %s accepts", name, m)
	}
	return nil
}

// checkPin checks a pin's version (Debian's, RPM's or PEP 440 for pip),
// its constraint and extras. Only an apt or dnf pin may leave its version
// to apply, which picks the newest its constraint admits.
func checkPin(m Manager, p PackagePin) error {
	if p.Version == "" {
		if m == ManagerPip {
			return fmt.Errorf("pip pin of %s has no version", p.Name)
		}
	} else {
		var err error
		switch m {
		case ManagerApt:
			err = version.CheckDebian(p.Version)
		case ManagerDnf:
			err = version.CheckRPM(p.Version)
		case ManagerPip:
			_, err = version.Parse(p.Version)
		}
		if err != nil {
			return fmt.Errorf("%s pin of %s: %w", m, p.Name, err)
		}
	}
	if p.Constraint != "" {
		if _, err := version.ParseConstraint(p.Constraint); err != nil {
			return fmt.Errorf("%s pin of %s: %w", m, p.Name, err)
		}
	}
	if len(p.Extras) > 0 && m != ManagerPip {
		return fmt.Errorf("%s pin of %s has extras, which only pip installs", m, p.Name)
	}
	for _, e := range p.Extras {
		if msg := spec.CheckExtra(e); msg != "" {
			return fmt.Errorf("pip pin of %s: %s", p.Name, sentenceErr(msg))
		}
	}
	return nil
}

// checkPlanPath checks a path a plan names: clean, absolute, inside the
// root, in the characters the spec allows.
func checkPlanPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("path %q is not an absolute, clean path", p)
	}
	if msg := spec.CheckPath(p); msg != "" {
		return errors.New(sentenceErr(msg))
	}
	return nil
}

// CheckManagedFile checks the path of a file gpuenv writes or removes: a
// clean absolute path inside the root, directly inside a directory gpuenv
// manages.
func CheckManagedFile(p string) error {
	if dir, name := path.Split(p); dir == DevCharDir+"/" {
		// The name has a colon, which no path of a spec may have.
		if !devCharName.MatchString(name) {
			return fmt.Errorf("%s is not a file gpuenv manages: a link in %s is named MAJOR:MINOR", p, DevCharDir)
		}
		return nil
	}
	if err := checkPlanPath(p); err != nil {
		return err
	}
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	i := slices.IndexFunc(managedDirs, func(d managedDir) bool { return d.dir == dir })
	if i < 0 || len(managedDirs[i].names) > 0 && !slices.Contains(managedDirs[i].names, name) {
		return fmt.Errorf("%s is not a file gpuenv manages; gpuenv writes only into %s", p, managedList())
	}
	return nil
}

// mergedFile reports whether p is a file gpuenv merges into but does not
// own (managedDir.merged).
func mergedFile(p string) bool {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	return slices.ContainsFunc(managedDirs, func(d managedDir) bool {
		return d.merged && d.dir == dir && slices.Contains(d.names, name)
	})
}

// CheckFollowUp checks the command run after a file changed or was
// restored (FileOp.After): none, or one of the closed set.
func CheckFollowUp(argv []string) error {
	if len(argv) > 0 && !slices.ContainsFunc(followUps, func(c []string) bool { return slices.Equal(c, argv) }) {
		return fmt.Errorf("follow-up command %q is not one gpuenv runs (%s)", argv, followUpList())
	}
	return nil
}

// checkFile checks a file operation: a file gpuenv manages, written owned
// by root and writable by root only, with a follow-up from the closed set.
func checkFile(f *FileOp) error {
	if err := CheckManagedFile(f.Path); err != nil {
		return fmt.Errorf("file operation: %w", err)
	}
	if f.Remove && (f.Content != "" || f.Mode != 0) {
		return fmt.Errorf("file operation: removing %s with content or a mode", f.Path)
	}
	if err := checkGenerate(f); err != nil {
		return fmt.Errorf("file operation: %w", err)
	}
	if err := checkKeyFetch(f); err != nil {
		return fmt.Errorf("file operation: %w", err)
	}
	if err := checkSymlink(f); err != nil {
		return fmt.Errorf("file operation: %w", err)
	}
	if mergedFile(f.Path) {
		// The file's own mode and owner, kept as they are.
		if f.Mode&^0o777 != 0 || f.UID < 0 || f.GID < 0 {
			return fmt.Errorf("file operation: mode %#o, owner %d:%d of %s: a merged file keeps its permission bits and owner, without setuid, setgid or sticky bits", f.Mode, f.UID, f.GID, f.Path)
		}
	} else {
		if f.Mode&^0o755 != 0 {
			return fmt.Errorf("file operation: mode %#o of %s: gpuenv writes files only root may change, without setuid, setgid or sticky bits", f.Mode, f.Path)
		}
		if f.UID != 0 || f.GID != 0 {
			return fmt.Errorf("file operation: %s owned by %d:%d; gpuenv's files are root's", f.Path, f.UID, f.GID)
		}
	}
	if err := CheckFollowUp(f.After); err != nil {
		return fmt.Errorf("file operation: %w", err)
	}
	return nil
}

// generated are the files whose content apply makes (FileOp.Generate),
// by what makes it.
var generated = map[string]string{GenerateCDI: "/etc/cdi/nvidia.yaml", GenerateManagementCDI: "/etc/cdi/management.nvidia.com-gpu.yaml"}

func checkGenerate(f *FileOp) error {
	if f.Generate == "" {
		return nil
	}
	want, ok := generated[f.Generate]
	switch {
	case !ok:
		return fmt.Errorf("%s: apply generates no %q content", f.Path, f.Generate)
	case f.Path != want:
		return fmt.Errorf("%s: %s content is written only to %s", f.Path, f.Generate, want)
	case f.Remove || f.Content != "":
		return fmt.Errorf("%s: generated content with content of its own, or a removal", f.Path)
	}
	return nil
}

// checkKeyFetch checks a key to fetch (FileOp.Key): written only to a
// keyring gpuenv owns, from an http, https or file URL, checked against a
// full fingerprint.
func checkKeyFetch(f *FileOp) error {
	k := f.Key
	if k == nil {
		return nil
	}
	if !slices.Contains(nvidiarepo.Keyrings(), f.Path) {
		return fmt.Errorf("%s: a fetched key is written only to %s", f.Path, strings.Join(nvidiarepo.Keyrings(), ", "))
	}
	if f.Remove || f.Content != "" || f.Generate != "" {
		return fmt.Errorf("%s: a fetched key with content of its own, or a removal", f.Path)
	}
	u, err := url.Parse(k.URL)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "file" || u.Scheme == "file" && u.Host != "" || strings.ContainsAny(k.URL, " \t\n") {
		return fmt.Errorf("%s: key URL %q is not an https, http or file URL", f.Path, k.URL)
	}
	if err := nvidiarepo.CheckFingerprint(k.Fingerprint); err != nil {
		return fmt.Errorf("%s: %w", f.Path, err)
	}
	return nil
}

// checkSymlink checks a link to make (FileOp.Symlink): only in
// /dev/char, only to an NVIDIA device node, and nothing else is made
// there.
func checkSymlink(f *FileOp) error {
	inDevChar := path.Dir(f.Path) == DevCharDir
	switch {
	case f.Symlink == "" && inDevChar && !f.Remove:
		return fmt.Errorf("%s: gpuenv makes only symbolic links in %s", f.Path, DevCharDir)
	case f.Symlink == "":
		return nil
	case !inDevChar:
		return fmt.Errorf("%s: gpuenv makes symbolic links only in %s", f.Path, DevCharDir)
	case f.Remove || f.Content != "" || f.Generate != "" || f.Key != nil || f.Mode != 0 || len(f.After) > 0:
		return fmt.Errorf("%s: a symbolic link with content, a mode, a follow-up or a removal", f.Path)
	case !nvidiaNode.MatchString(f.Symlink):
		return fmt.Errorf("%s: a link in %s points at an NVIDIA device node (/dev/nvidia*), not %q", f.Path, DevCharDir, f.Symlink)
	}
	return nil
}

func managedList() string {
	var out []string
	for _, d := range managedDirs {
		if len(d.names) > 0 {
			for _, n := range d.names {
				out = append(out, path.Join(d.dir, n))
			}
			continue
		}
		out = append(out, d.dir+"/")
	}
	return strings.Join(out, ", ")
}

func followUpList() string {
	out := make([]string, len(followUps))
	for i, c := range followUps {
		out[i] = strings.Join(c, " ")
	}
	return strings.Join(out, "; ")
}

// checkGroup checks a group operation: names as the spec checks them, and
// one coherent change.
func checkGroup(g *GroupOp) error {
	if msg := spec.CheckAccountName("group", g.Group); msg != "" {
		return fmt.Errorf("group operation: %s", sentenceErr(msg))
	}
	for _, u := range slices.Concat(g.Add, g.Remove) {
		if msg := spec.CheckAccountName("user", u); msg != "" {
			return fmt.Errorf("group operation on %s: %s", g.Group, sentenceErr(msg))
		}
	}
	for _, u := range g.Add {
		if slices.Contains(g.Remove, u) {
			return fmt.Errorf("group operation on %s both adds and removes %s", g.Group, u)
		}
	}
	switch {
	case g.Create && g.Delete:
		return fmt.Errorf("group operation both creates and deletes %s", g.Group)
	case g.Delete && len(g.Add)+len(g.Remove) > 0:
		return fmt.Errorf("group operation deletes %s and changes its members", g.Group)
	case g.System && !g.Create:
		return fmt.Errorf("group operation makes %s a system group without creating it", g.Group)
	case !g.Create && !g.Delete && len(g.Add)+len(g.Remove) == 0:
		return fmt.Errorf("group operation on %s changes nothing", g.Group)
	}
	return nil
}

func checkKernel(k *KernelOp) error {
	switch KernelAction(k.Action) {
	case KernelRebuildInitramfs:
		if k.Module != "" {
			return fmt.Errorf("kernel operation rebuild_initramfs names module %q", k.Module)
		}
	case KernelLoadModule, KernelUnloadModule:
		if k.Module == "" {
			return fmt.Errorf("kernel operation %s names no module", k.Action)
		}
		if !slices.Contains(modules, strings.ReplaceAll(k.Module, "-", "_")) {
			return fmt.Errorf("kernel operation %s: module %q is not one gpuenv manages (%s)", k.Action, k.Module, strings.Join(modules, ", "))
		}
	case KernelCheckVersion:
		if !driverVersion.MatchString(k.Version) {
			return fmt.Errorf("kernel operation check_version: %q is not a driver version", k.Version)
		}
	case KernelStopProcess:
		if k.PID <= 1 {
			return fmt.Errorf("kernel operation stop_process: pid %d", k.PID)
		}
		if k.Process == "" || strings.ContainsAny(k.Process, "/\x00\n") {
			return fmt.Errorf("kernel operation stop_process: %q is not a command name", k.Process)
		}
	default:
		return fmt.Errorf("unknown kernel action %q", k.Action)
	}
	return nil
}

func checkDevice(d *DeviceOp) error {
	if !spec.IsGPUUUID(d.UUID) {
		return fmt.Errorf("device operation: %q is not a GPU identifier (GPU-<uuid>)", d.UUID)
	}
	if d.Index < 0 {
		return fmt.Errorf("device operation: GPU index %d", d.Index)
	}
	values, ok := deviceSettings[DeviceSetting(d.Setting)]
	if !ok {
		return fmt.Errorf("device operation: unknown setting %q", d.Setting)
	}
	if !slices.Contains(values, d.Value) {
		return fmt.Errorf("device operation: %s %q is not one of %s", d.Setting, d.Value, strings.Join(values, ", "))
	}
	if (d.Setting == SettingGPUInstance) != (d.Instance != nil) {
		return fmt.Errorf("device operation: %s with an instance is not one gpuenv plans", d.Setting)
	}
	if d.Instance != nil {
		return checkMIGInstance(d.Instance)
	}
	return nil
}

// sentenceErr turns one of the spec's sentences into the tail of an error:
// no capital, no closing period.
func sentenceErr(s string) string {
	s = strings.TrimSuffix(s, ".")
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' && (len(s) < 2 || s[1] < 'A' || s[1] > 'Z') {
		s = strings.ToLower(s[:1]) + s[1:]
	}
	return s
}
