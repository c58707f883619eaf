package verify

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/groups"
)

// Holder is a process that holds memory on a GPU.
type Holder struct {
	PID       uint32 `json:"pid"`
	User      string `json:"user,omitempty"`
	Command   string `json:"command,omitempty"`
	UsedBytes uint64 `json:"used_bytes"`
}

// OutOfMemory is what verify says when a GPU ran out of memory: how much
// was free, who holds the rest, and what to try.
type OutOfMemory struct {
	FreeBytes  uint64   `json:"free_bytes"`
	TotalBytes uint64   `json:"total_bytes"`
	Holders    []Holder `json:"holders"`
	Advice     []string `json:"advice"`
}

// FileReader reads a file of the host, a path inside its root.
type FileReader interface {
	ReadFile(path string) ([]byte, error)
}

// outOfMemory explains r's out-of-memory failure with the observation:
// the processes NVML listed on r's GPU, each with its user and command
// line from /proc, and the GPU with the most free memory.
func outOfMemory(r Result, obs *facts.Observation, fs FileReader) *OutOfMemory {
	om := &OutOfMemory{FreeBytes: r.MemoryFree, TotalBytes: r.MemoryTotal, Holders: []Holder{}}
	gpu := nvmlDevice(obs, r.Target)
	if gpu != nil {
		if om.TotalBytes == 0 {
			om.TotalBytes = gpu.MemoryTotal
		}
		if om.FreeBytes == 0 && gpu.MemoryTotal >= gpu.MemoryUsed {
			om.FreeBytes = gpu.MemoryTotal - gpu.MemoryUsed
		}
		users := map[uint32]string{}
		if data, err := fs.ReadFile(groups.PasswdPath); err == nil {
			pw, _ := groups.ParsePasswd(data)
			for _, u := range pw {
				users[u.UID] = u.Name
			}
		}
		for _, p := range gpu.Processes {
			om.Holders = append(om.Holders, holder(p, users, fs))
		}
	}
	om.Advice = append(om.Advice, fmt.Sprintf("a smaller batch (verify's is %d)", r.Config.Batch))
	om.Advice = append(om.Advice, "gradient checkpointing ("+checkpointing[r.Framework]+"), which recomputes activations instead of keeping them")
	if best := roomiest(obs, gpu); best != nil {
		om.Advice = append(om.Advice, fmt.Sprintf("GPU %d (%s), which has %s free: CUDA_VISIBLE_DEVICES=%s", best.Index, best.Name, Bytes(best.MemoryTotal-best.MemoryUsed), visibleID(best)))
	}
	if len(om.Holders) > 0 {
		om.Advice = append(om.Advice, "ending the processes above, or waiting for them")
	}
	return om
}

// checkpointing names each framework's gradient checkpointing.
var checkpointing = map[string]string{
	"pytorch":    "torch.utils.checkpoint",
	"tensorflow": "tf.recompute_grad",
	"jax":        "jax.checkpoint",
}

// nvmlDevice finds t's GPU among those NVML listed, by UUID, else by
// index.
func nvmlDevice(obs *facts.Observation, t *Target) *facts.GPUDevice {
	if obs == nil || t == nil {
		return nil
	}
	for i, d := range obs.NVML.Devices {
		if t.UUID != "" && d.UUID == t.UUID || t.UUID == "" && d.Index == t.Index {
			return &obs.NVML.Devices[i]
		}
	}
	return nil
}

// roomiest is the GPU other than not with the most free memory, if it has
// more than not.
func roomiest(obs *facts.Observation, not *facts.GPUDevice) *facts.GPUDevice {
	if obs == nil {
		return nil
	}
	free := func(d *facts.GPUDevice) uint64 {
		if d == nil || d.MemoryUsed > d.MemoryTotal {
			return 0
		}
		return d.MemoryTotal - d.MemoryUsed
	}
	var best *facts.GPUDevice
	for i := range obs.NVML.Devices {
		d := &obs.NVML.Devices[i]
		if not != nil && d.UUID == not.UUID || best != nil && free(d) <= free(best) {
			continue
		}
		best = d
	}
	if best == nil || free(best) <= free(not) {
		return nil
	}
	return best
}

func visibleID(d *facts.GPUDevice) string {
	if d.UUID != "" {
		return d.UUID
	}
	return strconv.Itoa(d.Index)
}

// holder describes p with its user and command line from /proc.
func holder(p facts.GPUProcess, users map[uint32]string, fs FileReader) Holder {
	h := Holder{PID: p.PID, UsedBytes: p.UsedMemory, Command: p.Name}
	dir := fmt.Sprintf("/proc/%d/", p.PID)
	if data, err := fs.ReadFile(dir + "status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				if uid, err := strconv.ParseUint(f[1], 10, 32); err == nil {
					h.User = users[uint32(uid)]
					if h.User == "" {
						h.User = "uid " + f[1]
					}
				}
			}
		}
	}
	if data, err := fs.ReadFile(dir + "cmdline"); err == nil && len(data) > 0 {
		h.Command = strings.TrimSpace(string(bytes.ReplaceAll(bytes.TrimRight(data, "\x00"), []byte{0}, []byte(" "))))
	}
	return h
}

// Bytes writes n in binary units, as nvidia-smi's MiB and GiB.
func Bytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
