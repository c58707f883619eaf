package containers

import (
	"strings"
	"testing"

	"github.com/gpuenv/gpuenv/spec"
)

// amplification bounds a merge's output by its input: with the depth
// bounded, writing a file back repeats at most MaxConfigDepth keys on a
// line, and a key's quoting may lengthen it a few times over.
const amplification = 64

// fuzzMerge checks one engine's parse and merge of any text: neither
// panics; text over MaxConfigSize is refused; parse and merge agree on
// what they refuse; a merge's output is bounded by its input, parses,
// has the NVIDIA runtime (and the default runtime when asked), and
// merging it again changes no setting.
func fuzzMerge(t *testing.T, e spec.Engine, content string, setDefault *bool) {
	k, _ := kindOf(e)
	st, perr := k.parse(content)
	out, merr := k.merge(content, setDefault)
	if len(content) > MaxConfigSize && (perr == nil || merr == nil) {
		t.Fatalf("%d bytes, over MaxConfigSize: parse %v, merge %v", len(content), perr, merr)
	}
	if perr != nil {
		if merr == nil {
			t.Fatalf("parse refused what merge accepted: %v\n%q", perr, content)
		}
		return
	}
	_ = st
	if merr != nil {
		return // a valid file gpuenv cannot merge into (a version 1 file, a "runtimes" that is no table)
	}
	if len(out) > amplification*len(content)+4096 {
		t.Fatalf("merging %d bytes wrote %d", len(content), len(out))
	}
	after, err := k.parse(out)
	if err != nil {
		t.Fatalf("the merge does not parse: %v\n%q\n→\n%s", err, content, out)
	}
	if !after.nvidia || setDefault != nil && *setDefault && after.defaultRuntime != RuntimeName {
		t.Fatalf("the merge has no NVIDIA runtime (or default): %+v\n%s", after, out)
	}
	again, err := k.merge(out, setDefault)
	if err != nil || !sameSettings(e, out, again) {
		t.Fatalf("merging again: %v\n%s\n→\n%s", err, out, again)
	}
}

var fuzzSeeds = map[spec.Engine][]string{
	spec.EngineDocker: {``, `{}`, `null`, `[]`, `"x"`, `1`, `{"runtimes": null}`, `{"runtimes": {"nvidia": null}}`,
		`{"runtimes": {"crun": {"path": "/usr/bin/crun"}}, "default-runtime": "crun", "n": 1e3}`,
		`{"a": ` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`},
	spec.EngineContainerd: {``, containerdV2, containerdV3, "version = 2\n[plugins]\n",
		"version = 2\na = " + strings.Repeat("{b=", 20) + "1" + strings.Repeat("}", 20),
		"version = 2\nm = \"\"\"x\"\"\"\"\" \n[" + strings.Repeat("a.", 20) + "b]\n"},
	spec.EngineCRIO: {``, "[crio.runtime]\ndefault_runtime = \"runc\"\n[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\n",
		"[crio]\nruntime = 1\n"},
}

func fuzzEngine(f *testing.F, e spec.Engine) {
	for _, s := range fuzzSeeds[e] {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, content string, def uint8) {
		var setDefault *bool
		switch def % 3 {
		case 1:
			setDefault = ptr(true)
		case 2:
			setDefault = ptr(false)
		}
		fuzzMerge(t, e, content, setDefault)
	})
}

func FuzzDockerConfig(f *testing.F)     { fuzzEngine(f, spec.EngineDocker) }
func FuzzContainerdConfig(f *testing.F) { fuzzEngine(f, spec.EngineContainerd) }
func FuzzCRIODropIn(f *testing.F)       { fuzzEngine(f, spec.EngineCRIO) }
