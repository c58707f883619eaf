package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpuenv/gpuenv/internal/childproc"
	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/groups"
	"github.com/gpuenv/gpuenv/providers/host"
)

// Command is one process verify starts.
type Command struct {
	// Path is the program to run when it is not Argv[0] found on PATH:
	// the check's child is gpuenv itself, /proc/self/exe, with Argv[0]
	// as gpuenv was called.
	Path string
	Argv []string
	// Env is the whole environment of the process.
	Env []string
	// User is whom it runs as; nil runs it as gpuenv runs.
	User   *User
	Stdout io.Writer
	Stderr io.Writer
}

// Runner runs commands. Implementations must not interpret Argv through a
// shell, and must end the whole process group when the context ends.
type Runner interface {
	Run(ctx context.Context, c Command) error
}

// User is the person whose programs must reach the GPU: verify runs the
// workloads with their uid, gid, supplementary groups and HOME, so that a
// missing group membership or a package in their ~/.local behaves as it
// does for them.
type User struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups"`
	// GroupNames are the names of GID and Groups, in the same order,
	// GID's first.
	GroupNames []string `json:"group_names"`
	Home       string   `json:"home"`
	// Shell is their login shell, SHELL in the workloads' environment.
	Shell string `json:"-"`
}

// LookupUser finds name in the root's /etc/passwd, and the groups it
// belongs to in the observed /etc/group (its primary group and every group
// that lists it).
func LookupUser(h *host.Host, obs *facts.Observation, name string) (*User, error) {
	data, err := h.ReadFile(groups.PasswdPath)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", groups.PasswdPath, err)
	}
	users, _ := groups.ParsePasswd(data)
	i := slices.IndexFunc(users, func(u groups.User) bool { return u.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no user %s in %s", name, groups.PasswdPath)
	}
	pu := users[i]
	u := &User{Name: pu.Name, UID: pu.UID, GID: pu.GID, Home: pu.Home, Shell: pu.Shell, Groups: []uint32{}}
	primary := strconv.FormatUint(uint64(pu.GID), 10)
	var named []string
	for _, g := range obs.Groups {
		switch {
		case g.GID == pu.GID:
			primary = g.Name
		case slices.Contains(g.Members, name) && !slices.Contains(u.Groups, g.GID):
			u.Groups = append(u.Groups, g.GID)
			named = append(named, g.Name)
		}
	}
	u.GroupNames = append([]string{primary}, named...)
	return u, nil
}

// SafePath is the PATH verify's processes get unless --env or the spec
// sets one: Debian's sudo secure_path, not the caller's, whose directories
// may be root's own or writable by someone else.
const SafePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// kept reports whether the variable name passes from gpuenv's own
// environment to verify's processes, as sudo's env_reset keeps a few:
// the locale and terminal, which change no program's behaviour beyond its
// messages, and CUDA's and NVIDIA's own, which choose the GPUs
// (CUDA_VISIBLE_DEVICES) and the driver's behaviour the user asked for.
func kept(name string) bool {
	switch name {
	case "LANG", "LANGUAGE", "TERM", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "CUDA_") || strings.HasPrefix(name, "NVIDIA_")
}

// Environment is the whole environment of verify's processes, built from
// an allow-list rather than passed through: gpuenv often runs as root
// (under sudo, cron, an agent), and root's variables (credentials,
// LD_PRELOAD, a PATH of root's directories) are not the user's to get.
// From parent, gpuenv's own environment, it keeps the locale, TERM, TZ and
// the CUDA_* and NVIDIA_* variables; PATH is SafePath; HOME, USER,
// LOGNAME and SHELL are u's (parent's own when u is nil: gpuenv's user);
// then set, in order (the spec's environment, then --env), sets or
// replaces variables.
func Environment(parent []string, u *User, set [][2]string) []string {
	out := []string{"PATH=" + SafePath}
	for _, kv := range parent {
		if k, _, ok := strings.Cut(kv, "="); ok && kept(k) {
			out = SetEnv(out, k, kv[len(k)+1:])
		}
	}
	if u != nil {
		out = append(out, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
		if u.Shell != "" {
			out = append(out, "SHELL="+u.Shell)
		}
	} else {
		for _, k := range []string{"HOME", "USER", "LOGNAME", "SHELL"} {
			if v, ok := Getenv(parent, k); ok {
				out = append(out, k+"="+v)
			}
		}
	}
	for _, kv := range set {
		out = SetEnv(out, kv[0], kv[1])
	}
	return out
}

// CheckEnvName refuses a name no program could read back as a variable
// of its environment, or that would change what the entry means.
func CheckEnvName(name string) error {
	if name == "" {
		return errors.New("empty variable name")
	}
	for i, r := range name {
		if r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return fmt.Errorf("variable name %q: want letters, digits and underscores, not starting with a digit", name)
	}
	return nil
}

// chrootArgs are chroot(8)'s options that run the command as u: inside a
// root the credentials must change after chroot(2), which needs root.
func (u *User) chrootArgs() []string {
	args := []string{fmt.Sprintf("--userspec=%d:%d", u.UID, u.GID)}
	ids := make([]string, 0, len(u.Groups)+1)
	for _, g := range append([]uint32{u.GID}, u.Groups...) {
		ids = append(ids, strconv.FormatUint(uint64(g), 10))
	}
	return append(args, "--groups="+strings.Join(ids, ","))
}

// SetEnv returns env with name set to value, replacing any earlier value.
func SetEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// Getenv reads name from env, the last value winning as in the process.
func Getenv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// Launcher starts verify's processes on a host: directly on a live root,
// under chroot(8) in another; as User when one is set; each killed with
// its helpers after Timeout.
type Launcher struct {
	// Root is the host's root directory, "/" for the running system.
	Root   string
	Runner Runner
	User   *User
	// Env is the environment every process starts with.
	Env     []string
	Timeout time.Duration
}

// Live reports whether the processes run on the running system.
func (l *Launcher) Live() bool { return l.Root == "/" }

// command builds c as the launcher runs it: the user's credentials are
// the runner's to set on a live root, chroot's inside another.
func (l *Launcher) command(argv, env []string, stdout, stderr io.Writer) Command {
	c := Command{Argv: argv, Env: env, Stdout: stdout, Stderr: stderr}
	switch {
	case l.Live():
		c.User = l.User
	case l.User != nil:
		c.Argv = append(append(append([]string{"chroot"}, l.User.chrootArgs()...), l.Root), argv...)
	default:
		c.Argv = append([]string{"chroot", l.Root}, argv...)
	}
	return c
}

// ProcessGroupRunner runs each command as the leader of its own process
// group and, when the context ends, kills the whole group: a framework's
// helper processes (compilers, data loaders) must not outlive a timed-out
// workload, nor keep its output pipes open.
type ProcessGroupRunner struct{}

var _ Runner = ProcessGroupRunner{}

// waitDelay is how long Run waits for the pipes to close after the
// process ended or was killed.
const waitDelay = 2 * time.Second

// Run starts c and waits for it. With c.User it runs with the user's
// credentials, in their home directory when it exists: gpuenv's own
// working directory may be one they cannot read. It gets descriptors 0-2
// and nothing else gpuenv has open.
func (ProcessGroupRunner) Run(ctx context.Context, c Command) error {
	if len(c.Argv) == 0 {
		return errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	if c.Path != "" {
		cmd.Path, cmd.Err = c.Path, nil
	}
	cmd.Env = c.Env
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	childproc.Group(cmd, waitDelay)
	if u := c.User; u != nil {
		// A login's supplementary groups include the primary one.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: append([]uint32{u.GID}, u.Groups...)}
		cmd.Dir = "/"
		if fi, err := os.Stat(u.Home); err == nil && fi.IsDir() {
			cmd.Dir = u.Home
		}
	}
	// Just before the start, so that what a library opened since the
	// last run is covered too.
	if err := childproc.CloseOnExec(); err != nil {
		return fmt.Errorf("%s not started: %w", c.Argv[0], err)
	}
	err := cmd.Run()
	// Whatever the leader left behind goes with it.
	childproc.KillGroup(cmd)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Argv[0], err)
	}
	return nil
}
