package apply

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/plan"
)

// groupExecutor adds and removes the members of groups.
type groupExecutor struct{ *HostExecutor }

var _ kindOps[plan.GroupOp, GroupInverse] = groupExecutor{}

func (groupExecutor) opField(op *plan.Operation) **plan.GroupOp { return &op.Group }

func (groupExecutor) invField(inv *Inverse) **GroupInverse { return &inv.Group }

func (groupExecutor) names(inv *GroupInverse) ([]string, error) {
	return append([]string{inv.Group}, inv.Members...), nil
}

type groupEntry struct {
	exists  bool
	gid     int
	members []string
}

// readGroup finds name in the root's /etc/group.
func (x groupExecutor) readGroup(name string) (groupEntry, error) {
	var g groupEntry
	data, err := x.Host.ReadFile("/etc/group")
	if errors.Is(err, fs.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return g, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) < 4 || f[0] != name {
			continue
		}
		g.exists = true
		g.gid, err = strconv.Atoi(f[2])
		if err != nil {
			return g, fmt.Errorf("/etc/group: group %s has GID %q", name, f[2])
		}
		if f[3] != "" {
			g.members = strings.Split(f[3], ",")
		}
		return g, nil
	}
	return g, sc.Err()
}

func (x groupExecutor) prepare(_ context.Context, _ *Workspace, _ int, op *plan.GroupOp) (*GroupInverse, error) {
	g, err := x.readGroup(op.Group)
	if err != nil {
		return nil, err
	}
	if !g.exists && !op.Create && !op.Delete && (len(op.Add) > 0 || len(op.Remove) > 0) {
		return nil, fmt.Errorf("group %s does not exist and the operation does not create it", op.Group)
	}
	return &GroupInverse{Group: op.Group, Existed: g.exists, GID: g.gid, Members: g.members}, nil
}

// Groups are changed with the shadow tools run inside the root, which lock
// /etc/group and /etc/gshadow and keep both in step as every other tool
// on the host expects.
func (x groupExecutor) run(ctx context.Context, ws *Workspace, op *plan.GroupOp) error {
	g, err := x.readGroup(op.Group)
	if err != nil {
		return err
	}
	if op.Delete {
		if g.exists {
			return x.command(ctx, ws, nil, "groupdel", op.Group)
		}
		return nil
	}
	if !g.exists && op.Create {
		argv := []string{"groupadd", op.Group}
		if op.System {
			argv = []string{"groupadd", "-r", op.Group}
		}
		if err := x.command(ctx, ws, nil, argv...); err != nil {
			return err
		}
	}
	for _, u := range op.Add {
		if !slices.Contains(g.members, u) {
			if err := x.command(ctx, ws, nil, "gpasswd", "-a", u, op.Group); err != nil {
				return err
			}
		}
	}
	for _, u := range op.Remove {
		if slices.Contains(g.members, u) {
			if err := x.command(ctx, ws, nil, "gpasswd", "-d", u, op.Group); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x groupExecutor) undo(ctx context.Context, ws *Workspace, inv *GroupInverse) error {
	g, err := x.readGroup(inv.Group)
	if err != nil {
		return err
	}
	if !inv.Existed {
		if g.exists {
			return x.command(ctx, ws, nil, "groupdel", inv.Group)
		}
		return nil
	}
	if !g.exists {
		if err := x.command(ctx, ws, nil, "groupadd", "-g", strconv.Itoa(inv.GID), inv.Group); err != nil {
			return err
		}
		g.members = nil
	}
	if !slices.Equal(g.members, inv.Members) {
		return x.command(ctx, ws, nil, "gpasswd", "-M", strings.Join(inv.Members, ","), inv.Group)
	}
	return nil
}
