// Package containers observes and plans the host's container GPU support:
// NVIDIA's container toolkit, the NVIDIA runtime in each engine's
// configuration file, and the CDI spec that names the GPUs.
package containers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"github.com/gpuenv/gpuenv/spec"
)

// The engines' configuration files, inside the root, as nvidia-ctk
// runtime configure writes them.
const (
	DockerConfig     = "/etc/docker/daemon.json"
	ContainerdConfig = "/etc/containerd/config.toml"
	// CRIODropIn is a drop-in of gpuenv's own: CRI-O merges every file
	// of crio.conf.d over crio.conf, in name order, so the last name
	// wins.
	CRIODropIn = "/etc/crio/crio.conf.d/99-nvidia.toml"
)

// RuntimeName is the name the NVIDIA runtime is registered under in
// every engine, as nvidia-ctk registers it.
const RuntimeName = "nvidia"

// RuntimeBinary is the NVIDIA runtime the toolkit installs.
const RuntimeBinary = "/usr/bin/nvidia-container-runtime"

// engineKind is how gpuenv handles one engine's configuration file.
type engineKind struct {
	path  string
	parse func(content string) (engineState, error)
	merge mergeFunc
}

// kindOf is engine e's configuration; ok is false for podman, which has
// none.
func kindOf(e spec.Engine) (k engineKind, ok bool) {
	switch e {
	case spec.EngineDocker:
		return engineKind{DockerConfig, parseDocker, MergeDocker}, true
	case spec.EngineContainerd:
		return engineKind{ContainerdConfig, parseContainerd, MergeContainerd}, true
	case spec.EngineCRIO:
		return engineKind{CRIODropIn, parseCRIO, MergeCRIO}, true
	}
	return engineKind{}, false
}

// EngineConfigPath is where engine e keeps the configuration gpuenv
// merges the runtime into; "" for podman, which has none.
func EngineConfigPath(e spec.Engine) string {
	k, _ := kindOf(e)
	return k.path
}

// RestartCommand is the argv that makes engine e read its configuration
// again.
func RestartCommand(e spec.Engine) []string {
	unit := string(e)
	return []string{"systemctl", "restart", unit}
}

// engineState is what a configuration file says about the NVIDIA runtime.
type engineState struct {
	nvidia         bool
	defaultRuntime string
	version        int
}

// mergeFunc merges the NVIDIA runtime into a configuration file's text
// and returns the new text; setDefault is the spec's default_runtime, nil
// when unmanaged.
type mergeFunc func(content string, setDefault *bool) (string, error)

// Docker's daemon.json.

// decodeJSONObject reads daemon.json, which must be one JSON object (or
// empty, as no file is), no larger than MaxConfigSize and no deeper than
// MaxConfigDepth.
func decodeJSONObject(content string) (map[string]any, error) {
	if err := checkSize(content); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace([]byte(content))) == 0 {
		return map[string]any{}, nil
	}
	if err := checkJSONDepth(content); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(content)))
	// Numbers stay as written: a merge must not turn 1e3 into 1000 or
	// lose the precision of a large integer.
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not a JSON object: text after the object")
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the file holds %s, not a JSON object: Docker's settings are one object ({} for none)", jsonKind(v))
	}
	return doc, nil
}

// jsonKind names the kind of a decoded JSON value, as errors say it.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "an object"
}

func parseDocker(content string) (engineState, error) {
	doc, err := decodeJSONObject(content)
	if err != nil {
		return engineState{}, err
	}
	var st engineState
	if rt, ok := doc["runtimes"].(map[string]any); ok {
		_, st.nvidia = rt[RuntimeName].(map[string]any)
	}
	st.defaultRuntime, _ = doc["default-runtime"].(string)
	return st, nil
}

// MergeDocker adds the nvidia runtime to daemon.json, keeping every other
// key, as nvidia-ctk runtime configure --runtime=docker does.
func MergeDocker(content string, setDefault *bool) (string, error) {
	doc, err := decodeJSONObject(content)
	if err != nil {
		return "", err
	}
	runtimes := map[string]any{}
	// "runtimes": null is Docker's way of saying none, too.
	if v, ok := doc["runtimes"]; ok && v != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return "", fmt.Errorf("\"runtimes\" holds %s, not an object", jsonKind(v))
		}
		runtimes = m
	}
	entry := map[string]any{}
	if old, ok := runtimes[RuntimeName].(map[string]any); ok {
		entry = old
	}
	setRuntimePath(entry, "path")
	if _, ok := entry["args"]; !ok {
		entry["args"] = []any{}
	}
	runtimes[RuntimeName] = entry
	doc["runtimes"] = runtimes
	applyDefault(doc, "default-runtime", setDefault)
	return encodeJSON(doc)
}

// encodeJSON writes daemon.json as nvidia-ctk does: four spaces, no
// escaping of <, > and &.
func encodeJSON(doc map[string]any) (string, error) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "    ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	return out.String(), nil
}

// setRuntimePath points key at the NVIDIA runtime, keeping a path that
// already names it: nvidia-ctk writes Docker's as the bare
// "nvidia-container-runtime", found on PATH, and that entry is as good
// as gpuenv's.
func setRuntimePath(entry map[string]any, key string) {
	if p, ok := entry[key].(string); ok && path.Base(p) == path.Base(RuntimeBinary) {
		return
	}
	entry[key] = RuntimeBinary
}

// applyDefault sets or clears key to the NVIDIA runtime in table; unset
// leaves it alone, and false removes it only when it names nvidia.
func applyDefault(table map[string]any, key string, setDefault *bool) {
	switch {
	case setDefault == nil:
	case *setDefault:
		table[key] = RuntimeName
	case table[key] == RuntimeName:
		delete(table, key)
	}
}

// containerd's config.toml.

// criRuntimePlugin is the plugin whose containerd.runtimes table holds the
// runtimes CRI starts, by configuration version: version 3 (containerd
// 2.0) renamed it.
func criRuntimePlugin(v int) string {
	if v >= 3 {
		return "io.containerd.cri.v1.runtime"
	}
	return "io.containerd.grpc.v1.cri"
}

// decodeTOML reads a TOML configuration no larger than MaxConfigSize and
// no deeper than MaxConfigDepth.
func decodeTOML(content string) (map[string]any, error) {
	if err := checkSize(content); err != nil {
		return nil, err
	}
	if err := checkTOMLDepth(content); err != nil {
		return nil, err
	}
	doc := map[string]any{}
	if err := toml.Unmarshal([]byte(content), &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func containerdVersion(doc map[string]any) int {
	switch v := doc["version"].(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	// containerd reads a file without a version as version 1.
	return 1
}

// table walks doc through keys, creating each table when create is set;
// it fails when a key holds something other than a table.
func table(doc map[string]any, create bool, keys ...string) (map[string]any, error) {
	cur := doc
	for i, k := range keys {
		v, ok := cur[k]
		if !ok {
			if !create {
				return nil, nil
			}
			m := map[string]any{}
			cur[k] = m
			cur = m
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is not a table", joinKeys(keys[:i+1]))
		}
		cur = m
	}
	return cur, nil
}

func joinKeys(keys []string) string {
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += "."
		}
		out += k
	}
	return out
}

func parseContainerd(content string) (engineState, error) {
	doc, err := decodeTOML(content)
	if err != nil {
		return engineState{}, err
	}
	st := engineState{version: containerdVersion(doc)}
	if st.version < 2 {
		return st, nil
	}
	ctr, err := table(doc, false, "plugins", criRuntimePlugin(st.version), "containerd")
	st.readRuntimes(ctr, "default_runtime_name")
	return st, err
}

// readRuntimes reads the NVIDIA runtime's entry and the default runtime
// from the table that holds an engine's runtimes table, nil when the file
// has none.
func (st *engineState) readRuntimes(t map[string]any, defaultKey string) {
	if rts, ok := t["runtimes"].(map[string]any); ok {
		_, st.nvidia = rts[RuntimeName].(map[string]any)
	}
	st.defaultRuntime, _ = t[defaultKey].(string)
}

// MergeContainerd adds the nvidia runtime to config.toml in the layout of
// its version (2 or 3), keeping every other setting, as nvidia-ctk
// runtime configure --runtime=containerd does: the entry copies runc's
// options (SystemdCgroup above all, which must match the kubelet's cgroup
// driver) and points BinaryName at the NVIDIA runtime. A missing or empty
// file becomes a version 2 file, which containerd 1.6 and later read.
func MergeContainerd(content string, setDefault *bool) (string, error) {
	doc, err := decodeTOML(content)
	if err != nil {
		return "", err
	}
	v := containerdVersion(doc)
	if _, ok := doc["version"]; !ok {
		if len(doc) > 0 {
			return "", fmt.Errorf("the file has no version: containerd reads it as version 1, whose layout gpuenv does not write; add version = 2")
		}
		v = 2
		doc["version"] = int64(2)
	}
	if v < 2 {
		return "", fmt.Errorf("configuration version %d: gpuenv writes versions 2 and 3", v)
	}
	ctr, err := table(doc, true, "plugins", criRuntimePlugin(v), "containerd")
	if err != nil {
		return "", err
	}
	rts, err := table(ctr, true, "runtimes")
	if err != nil {
		return "", err
	}
	entry := map[string]any{}
	if runc, ok := rts["runc"].(map[string]any); ok {
		entry = deepCopy(runc)
	}
	if old, ok := rts[RuntimeName].(map[string]any); ok {
		entry = old
	}
	entry["runtime_type"] = "io.containerd.runc.v2"
	opts, err := table(entry, true, "options")
	if err != nil {
		return "", err
	}
	setRuntimePath(opts, "BinaryName")
	rts[RuntimeName] = entry
	applyDefault(ctr, "default_runtime_name", setDefault)
	return encodeTOML(doc)
}

func deepCopy(m map[string]any) map[string]any {
	out := maps.Clone(m)
	for k, v := range out {
		if sub, ok := v.(map[string]any); ok {
			out[k] = deepCopy(sub)
		}
	}
	return out
}

func encodeTOML(doc map[string]any) (string, error) {
	var out bytes.Buffer
	enc := toml.NewEncoder(&out)
	enc.SetIndentTables(true)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	return out.String(), nil
}

// CRI-O's drop-in: the whole file is gpuenv's, so its content is what
// the spec asks, merged over what an earlier apply left there.

func parseCRIO(content string) (engineState, error) {
	doc, err := decodeTOML(content)
	if err != nil {
		return engineState{}, err
	}
	var st engineState
	rt, err := table(doc, false, "crio", "runtime")
	st.readRuntimes(rt, "default_runtime")
	return st, err
}

// MergeCRIO adds the nvidia runtime to CRI-O's drop-in.
func MergeCRIO(content string, setDefault *bool) (string, error) {
	doc, err := decodeTOML(content)
	if err != nil {
		return "", err
	}
	rt, err := table(doc, true, "crio", "runtime")
	if err != nil {
		return "", err
	}
	rts, err := table(rt, true, "runtimes")
	if err != nil {
		return "", err
	}
	entry, err := table(rts, true, RuntimeName)
	if err != nil {
		return "", err
	}
	setRuntimePath(entry, "runtime_path")
	entry["runtime_type"] = "oci"
	applyDefault(rt, "default_runtime", setDefault)
	return encodeTOML(doc)
}

// runtimeEngines are the engines a spec configures through a runtime
// entry, in the order the plan lists them.
func runtimeEngines(c *spec.ContainerToolkit) []spec.Engine {
	var out []spec.Engine
	for _, e := range []spec.Engine{spec.EngineDocker, spec.EngineContainerd, spec.EngineCRIO} {
		if slices.Contains(c.Engines.Value, e) {
			out = append(out, e)
		}
	}
	return out
}
