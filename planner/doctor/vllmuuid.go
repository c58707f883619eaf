package doctor

import (
	"fmt"
	"strings"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/spec/version"
)

// lastIntOnlyVLLM is the newest vLLM release reported to take every
// CUDA_VISIBLE_DEVICES entry for an integer: its platform code maps a
// device to its physical ordinal with int() on the entry, so a GPU-… or
// MIG-… entry stops it at start-up with "invalid literal for int()"
// (vllm-project/vllm#13815, #20939 on 0.9.2, #41848 on 0.20.1; the fixes
// proposed in #32644, #41776 and #46132 were not merged when those were
// closed). Later code resolves a full UUID through NVML but not the
// short form NVIDIA documents, a UUID's first characters
// (vllm-project/vllm#51677, open).
var lastIntOnlyVLLM = version.MustParse("0.20.1")

// uuidBodyLen is the length of a UUID after its GPU- or MIG- prefix.
const uuidBodyLen = len("8932f937-d72c-4106-c12f-20bd9faed9f6")

// vllmVisibleUUIDs judges the UUID entries of CUDA_VISIBLE_DEVICES
// against each installed vLLM.
func (d *doctor) vllmVisibleUUIDs(withUUID []facts.Assignment) {
	for _, env := range d.obs.Python {
		for _, l := range env.Libraries {
			if l.Name != "vllm" {
				continue
			}
			v, err := version.Parse(l.Version)
			if err != nil {
				continue
			}
			old := v.Compare(lastIntOnlyVLLM) <= 0
			var bad []string
			for _, a := range withUUID {
				for _, e := range strings.Split(a.Value, ",") {
					e = strings.TrimSpace(e)
					body, isUUID := uuidBody(e)
					if isUUID && (old || len(body) < uuidBodyLen) {
						bad = append(bad, e)
					}
				}
			}
			if len(bad) == 0 {
				continue
			}
			c := Check{ID: "env.visible-devices-uuid:" + FrameworkID(env.Interpreter, "vllm"), Group: GroupEnv}
			for _, a := range withUUID {
				c.Evidence = append(c.Evidence, fmt.Sprintf("%s: CUDA_VISIBLE_DEVICES=%s", where(a), a.Value))
			}
			c.Evidence = append(c.Evidence, fmt.Sprintf("%s: %s %s", l.Location, l.Distribution, l.Version))
			c.Status = Problem
			if old {
				c.Summary = fmt.Sprintf("CUDA_VISIBLE_DEVICES names GPUs by UUID (%s), which vLLM %s reads as integers: it stops at start-up with \"invalid literal for int() with base 10\" (vllm-project/vllm#13815)", strings.Join(bad, ", "), l.Version)
			} else {
				c.Summary = fmt.Sprintf("CUDA_VISIBLE_DEVICES names GPUs by a shortened UUID (%s), which vLLM %s cannot look up in NVML: it stops at start-up (vllm-project/vllm#51677)", strings.Join(bad, ", "), l.Version)
			}
			c.Fix = &Fix{Text: fmt.Sprintf("Have the scheduler or the container runtime set CUDA_VISIBLE_DEVICES to GPU indexes for vLLM in %s (nvidia-smi -L lists each GPU's index beside its UUID); where the runtime already exposes only the assigned GPUs, unset CUDA_VISIBLE_DEVICES or set it to 0.", env.Prefix)}
			if !old {
				c.Fix.Text = fmt.Sprintf("Give vLLM in %s each GPU's full UUID (nvidia-smi -L prints them) or its index in CUDA_VISIBLE_DEVICES.", env.Prefix)
			}
			d.add(c)
		}
	}
}

// uuidBody is an entry's UUID after its GPU- or MIG- prefix; ok is false
// for an index.
func uuidBody(e string) (string, bool) {
	u := strings.ToUpper(e)
	for _, p := range []string{"GPU-", "MIG-"} {
		if strings.HasPrefix(u, p) {
			return e[len(p):], true
		}
	}
	return "", false
}
