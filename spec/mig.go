package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
)

// MIGMode is a mig block's mode.
type MIGMode string

// The MIG modes.
const (
	MIGEnabled  MIGMode = "enabled"
	MIGDisabled MIGMode = "disabled"
)

var migModes = []string{string(MIGEnabled), string(MIGDisabled)}

// MIG is a mig block: the MIG mode and the layout of GPU instances of the
// GPUs a selector picks, as device blocks select them.
type MIG struct {
	Block
	// Selector is "all", a device index or a GPU-<uuid> as written.
	Selector      string
	SelectorRange hcl.Range
	// Mode is the MIG mode; left out, it is enabled when Instances is
	// set (a layout needs MIG mode).
	Mode Attr[MIGMode]
	// Instances are the GPU instance profiles of the layout, by name
	// ("3g.40gb"), each with one compute instance of all its slices.
	// Which profiles exist depends on the GPU's model, which plan
	// checks; InstanceRanges point at each name.
	Instances      Attr[[]string]
	InstanceRanges []hcl.Range
	// ComputeInstances divides the GPU instances of a profile into
	// compute instances, each by its number of compute slices ("1c"):
	// by profile name, the slices of each compute instance. A profile
	// it leaves out gets one compute instance of all its slices.
	ComputeInstances Attr[map[string][]int]
}

// WantMode is the mode the block asks for: disabled for an absent block,
// enabled when a layout is given without a mode, "" when the block
// leaves the mode alone.
func (m *MIG) WantMode() MIGMode {
	switch {
	case m.IsAbsent():
		return MIGDisabled
	case m.Mode.Set:
		return m.Mode.Value
	case m.Instances.Set:
		return MIGEnabled
	}
	return ""
}

// migProfileName is how NVIDIA writes GPU instance profiles: compute
// slices, then memory ("1g.10gb"), and "+me" for the one with the media
// engines.
var migProfileName = lazyregexp.New(`^[1-8]g\.[0-9]{1,3}gb(\+me)?$`)

// migComputeName is a compute instance by its compute slices, as
// NVIDIA's compute instance profiles begin ("1c" of "1c.3g.40gb").
var migComputeName = lazyregexp.New(`^[1-8]c$`)

// computeInstances reads a map from GPU instance profile to its compute
// instances ("3g.40gb" = ["1c", "2c"]). Each profile must be one of
// instances, and its compute instances may not take more compute slices
// than it has.
func (b *body) computeInstances(name string, instances Attr[[]string]) Attr[map[string][]int] {
	val, attr, ok := b.value(name, cty.Map(cty.List(cty.String)))
	if !ok {
		return Attr[map[string][]int]{}
	}
	out := map[string][]int{}
	good := true
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		profile := k.AsString()
		if !slices.Contains(instances.Value, profile) {
			b.valueError(attr, attr.Expr.Range(), "Compute instances of no GPU instance",
				"compute_instances divides the GPU instances of profile %q, which instances does not list.", profile)
			good = false
			continue
		}
		gSlices, _ := strconv.Atoi(profile[:strings.Index(profile, "g")])
		total := 0
		for e := v.ElementIterator(); e.Next(); {
			_, c := e.Element()
			if c.IsNull() || !migComputeName.MatchString(c.AsString()) {
				b.valueError(attr, attr.Expr.Range(), "Invalid compute instance",
					"The compute instances of %q are written by their compute slices, such as \"1c\" or \"2c\".", profile)
				good = false
				break
			}
			n, _ := strconv.Atoi(strings.TrimSuffix(c.AsString(), "c"))
			total += n
			out[profile] = append(out[profile], n)
		}
		if total > gSlices {
			b.valueError(attr, attr.Expr.Range(), "Compute instances over their GPU instance",
				"The compute instances of %q take %d compute slices, and the GPU instance has %d.", profile, total, gSlices)
			good = false
		}
	}
	if !good {
		return Attr[map[string][]int]{}
	}
	return setAttr(out, attr.Expr.Range())
}

func (l *loader) decodeMIG(blk *hcl.Block) (*MIG, string) {
	b := l.openBlock(blk, "mode", "instances", "compute_instances")
	m := &MIG{
		Block:         Block{DefRange: blk.DefRange, Absent: b.boolean("absent")},
		Selector:      blk.Labels[0],
		SelectorRange: blk.LabelRanges[0],
	}
	key := m.Selector
	if key != AllDevices {
		key = deviceID(m.Selector, false)
	}
	m.Mode = enumAttr[MIGMode](b.enum("mode", migModes...))
	m.Instances, m.InstanceRanges = b.list("instances", "Invalid MIG profile", func(s string) string {
		if migProfileName.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("%q is not a MIG GPU instance profile: write it as nvidia-smi mig -lgip lists them, compute slices and memory, such as \"1g.10gb\" or \"3g.40gb\".", s)
	})
	m.ComputeInstances = b.computeInstances("compute_instances", m.Instances)
	b.checkAbsent(m.Absent, "the MIG layout of the GPUs")
	if m.Mode.Set && m.Mode.Value == MIGDisabled && m.Instances.Set {
		l.errorf(m.Instances.Range.Ptr(), "MIG instances without MIG mode",
			"mode = \"disabled\" leaves no room for GPU instances: remove instances, or set mode = \"enabled\".")
	}
	if key == "" {
		l.errorf(blk.LabelRanges[0].Ptr(), "Invalid device selector",
			"%q is not a device selector: write \"all\", a device index such as \"0\", or a GPU UUID such as \"GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d\", as nvidia-smi -L lists them.", m.Selector)
		return nil, ""
	}
	return m, key
}
