package containers

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/plan"
	"github.com/gpuenv/gpuenv/spec"
)

// defaultRuntime is the runtime each engine starts containers with when
// its configuration names none: what an absent toolkit's default gives
// way to.
const defaultRuntime = "runc"

// planAbsentEngines takes the nvidia runtime out of every engine
// configuration that has it: once the toolkit is gone, an entry naming
// its runtime (above all as the default) makes the engine fail every
// container it starts with it. Each file keeps every other setting, and
// rollback restores its bytes.
func planAbsentEngines(req *planner.Request, c *spec.ContainerToolkit, resp *planner.Response) []plan.Step {
	var steps []plan.Step
	for _, e := range []spec.Engine{spec.EngineDocker, spec.EngineContainerd, spec.EngineCRIO} {
		cfg := engineFacts(req.Facts, e)
		if !cfg.Exists || cfg.Error != "" || !cfg.NVIDIARuntime && cfg.DefaultRuntime != RuntimeName {
			continue
		}
		op := &plan.FileOp{Path: cfg.Path}
		what := fmt.Sprintf("removes the nvidia runtime from %s, keeping every other setting", cfg.Path)
		if e == spec.EngineCRIO {
			// The drop-in is gpuenv's own: nothing else is in it.
			op.Remove = true
			what = fmt.Sprintf("removes %s, gpuenv's drop-in", cfg.Path)
		} else {
			unmerged, err := unmerge(e, cfg.Content)
			if err != nil {
				resp.Diagnostics = append(resp.Diagnostics, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Engine configuration cannot be changed",
					Detail:   fmt.Sprintf("gpuenv cannot take the NVIDIA runtime out of %s: %s.", cfg.Path, err),
					Subject:  c.DefRange.Ptr(),
				})
				continue
			}
			op = engineFileOp(cfg, unmerged)
		}
		if cfg.DefaultRuntime == RuntimeName {
			what += fmt.Sprintf(", and makes %s the default runtime again", defaultRuntime)
		}
		restart := "at its next start"
		if req.Facts.Init.Systemd {
			op.After = RestartCommand(e)
			restart = "then " + strings.Join(op.After, " ")
		}
		before := map[string]string{"path": cfg.Path, "runtime": RuntimeName}
		if cfg.DefaultRuntime != "" {
			before["default_runtime"] = fmt.Sprint(cfg.DefaultRuntime == RuntimeName)
		}
		steps = append(steps, plan.Step{
			Address:    engineAddress + string(e),
			Action:     plan.Delete,
			ReasonCode: plan.ReasonAbsentRequested,
			Before:     before,
			Operations: []plan.Operation{{Kind: plan.OpFile, File: op}},
			Reason:     plan.Sentence([]string{cfg.Path + " names the runtime of the NVIDIA container toolkit, which absent = true removes", what + ", " + restart}),
		})
	}
	return steps
}

// unmerge is the configuration text without the nvidia runtime.
func unmerge(e spec.Engine, content string) (string, error) {
	switch e {
	case spec.EngineDocker:
		return UnmergeDocker(content)
	case spec.EngineContainerd:
		return UnmergeContainerd(content)
	}
	return "", fmt.Errorf("engine %s has no runtime entry", e)
}

// UnmergeDocker takes the nvidia runtime out of daemon.json: its entry,
// the runtimes object when nothing else is left in it, and a
// default-runtime that names it (Docker's default is then runc again).
func UnmergeDocker(content string) (string, error) {
	doc, err := decodeJSONObject(content)
	if err != nil {
		return "", err
	}
	if rts, ok := doc["runtimes"].(map[string]any); ok {
		delete(rts, RuntimeName)
		if len(rts) == 0 {
			delete(doc, "runtimes")
		}
	}
	if doc["default-runtime"] == RuntimeName {
		delete(doc, "default-runtime")
	}
	return encodeJSON(doc)
}

// UnmergeContainerd takes the nvidia runtime out of config.toml in the
// layout of its version, and points a default_runtime_name that names it
// back at runc.
func UnmergeContainerd(content string) (string, error) {
	doc, err := decodeTOML(content)
	if err != nil {
		return "", err
	}
	v := containerdVersion(doc)
	if v < 2 {
		return "", fmt.Errorf("configuration version %d: gpuenv writes versions 2 and 3", v)
	}
	ctr, err := table(doc, false, "plugins", criRuntimePlugin(v), "containerd")
	if err != nil || ctr == nil {
		return encodeTOML(doc)
	}
	if rts, ok := ctr["runtimes"].(map[string]any); ok {
		delete(rts, RuntimeName)
	}
	if ctr["default_runtime_name"] == RuntimeName {
		ctr["default_runtime_name"] = defaultRuntime
	}
	return encodeTOML(doc)
}
