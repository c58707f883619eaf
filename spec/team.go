package spec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Team is a team block: the CUDA_VISIBLE_DEVICES that the members of one
// Unix group get in their login shells on a host several teams share.
// The label is the group, as a group block's is: one team per group.
type Team struct {
	Block
	Group      string
	GroupRange hcl.Range
	// CUDAVisibleDevices are the team's devices as the environment
	// block's are written: indices, GPU-<uuid> or MIG devices, in the
	// order CUDA numbers them. DeviceRanges point at each entry.
	CUDAVisibleDevices Attr[[]string]
	DeviceRanges       []hcl.Range
}

// Team returns the team block of group, or nil.
func (s *Spec) Team(group string) *Team {
	for _, t := range s.Teams {
		if t.Group == group {
			return t
		}
	}
	return nil
}

// visibleDevices reads a cuda_visible_devices list: each entry a device
// identifier, each device once.
func (b *body) visibleDevices() (Attr[[]string], []hcl.Range) {
	devices, ranges := b.list("cuda_visible_devices", "Invalid device identifier", func(s string) string {
		if deviceID(s, true) == "" {
			return fmt.Sprintf("%q is not a device index (such as \"0\"), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx) or a MIG device (MIG-<uuid>, or MIG-GPU-<uuid>/<gi>/<ci> before driver R470), as nvidia-smi -L lists them.", s)
		}
		return ""
	})
	if devices.Set {
		seen := map[string]int{}
		for i, d := range devices.Value {
			key := deviceID(d, true)
			if j, dup := seen[key]; dup {
				b.l.errorf(ranges[i].Ptr(), "Duplicate device identifier",
					"%q names the same device as %q at %s. List each device once.", d, devices.Value[j], ranges[j])
				return Attr[[]string]{}, ranges
			}
			seen[key] = i
		}
	}
	return devices, ranges
}

func (l *loader) decodeTeam(blk *hcl.Block) *Team {
	b := l.openBlock(blk, "cuda_visible_devices")
	t := &Team{
		Block:      Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Group:      blk.Labels[0],
		GroupRange: blk.LabelRanges[0],
	}
	valid := true
	if p := checkAccountName("group", t.Group); p != "" {
		l.errorf(blk.LabelRanges[0].Ptr(), "Invalid group name", "%s A team block is labelled with the Unix group whose members are the team.", p)
		valid = false
	}
	t.CUDAVisibleDevices, t.DeviceRanges = b.visibleDevices()
	b.checkAbsent(t.Absent, "the team's file")
	if _, written := b.attrs["cuda_visible_devices"]; !written && !t.Absent.Value {
		l.errorf(blk.DefRange.Ptr(), "Missing required argument",
			"The argument \"cuda_visible_devices\" is required: it is what the team's members get. To remove a team's file, write absent = true.")
	}
	if t.CUDAVisibleDevices.Set && len(t.CUDAVisibleDevices.Value) == 0 {
		l.errorf(t.CUDAVisibleDevices.Range.Ptr(), "No devices for the team",
			"An empty cuda_visible_devices hides every GPU from the team's members. Name the team's GPUs or MIG devices, or leave the members out of the group %q.", t.Group)
		t.CUDAVisibleDevices = Attr[[]string]{}
	}
	if !valid {
		return nil
	}
	return t
}

// checkTeams warns of a device that two teams list: CUDA_VISIBLE_DEVICES
// chooses what a program sees, not what it may use, so two teams that
// list one GPU compete for its memory. Devices are compared as written
// (an index and the same GPU's UUID are not matched here; plan knows the
// host).
func (l *loader) checkTeams() {
	type owner struct {
		team  *Team
		entry int
	}
	seen := map[string]owner{}
	for _, t := range l.spec.Teams {
		if t.IsAbsent() || !t.CUDAVisibleDevices.Set {
			continue
		}
		for i, d := range t.CUDAVisibleDevices.Value {
			key := deviceID(d, true)
			if prev, ok := seen[key]; ok && prev.team != t {
				l.warnf(t.DeviceRanges[i].Ptr(), "Device shared by two teams",
					"%q is also listed for the team %q, at %s. CUDA_VISIBLE_DEVICES chooses which devices a program sees, not which it may use: both teams' programs would run on it and share its memory. List it for one team only, unless they mean to share it.",
					d, prev.team.Group, prev.team.DeviceRanges[prev.entry])
				continue
			}
			seen[key] = owner{t, i}
		}
	}
}
