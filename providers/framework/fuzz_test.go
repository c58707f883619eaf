package framework

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func FuzzParseTorchVersion(f *testing.F) {
	f.Add([]byte(torchVersion))
	f.Add([]byte("__version__ = '1.13.0a0'\ndebug = False\ncuda = None\ngit_version = 'Unknown'\nhip = None\n"))
	f.Add([]byte("__version__ = '2.4.0+cu121'\ncuda: Optional[str] = '"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tv, err := ParseTorchVersion(data)
		if err == nil && tv.Version == "" && !validEmpty(data) {
			t.Fatalf("no error and no version")
		}
	})
}

// validEmpty accepts a file whose __version__ is the empty string: an
// empty version is then what the file says.
func validEmpty(data []byte) bool { return pyVersion.Match(data) }

func FuzzParseBuildInfo(f *testing.F) {
	f.Add([]byte("build_info = collections.OrderedDict([('cpu_compiler', '/usr/lib/llvm-17/bin/clang'), ('cuda_compute_capabilities', ['sm_50', 'sm_60', 'sm_70', 'sm_80', 'compute_90']), ('cuda_version', '12.3'), ('cudnn_version', '8'), ('is_cuda_build', True), ('is_rocm_build', False), ('is_tensorrt_build', True)])\n"))
	f.Add([]byte("is_cuda_build = True\ncuda_version_number = '10.1'\ncudnn_version_number = '7'\n"))
	f.Add([]byte("build_info = collections.OrderedDict([('cuda_compute_capabilities', ['sm_5"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bi, err := ParseBuildInfo(data)
		if err != nil && (bi.CUDA != "" || bi.CUDABuild) {
			t.Fatalf("error %v with %+v", err, bi)
		}
	})
}

// FuzzParseJAXVersion checks that the version read is the one the file
// assigns: quoted on a line of its own, the first assignment, and that a
// file without one still reads right once an assignment follows it.
func FuzzParseJAXVersion(f *testing.F) {
	f.Add([]byte("_version: str = \"0.4.35\"\n"))
	f.Add([]byte("_version = '0.4.26'\n_release_version: str = '0.4.26'\n"))
	// An unclosed quote: the version must not run on into the next line.
	f.Add([]byte("_version = '0.4.26\n_release_version = '0.4.26'\n"))
	f.Add([]byte("_version = \""))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseJAXVersion(data)
		if err != nil {
			if got != "" {
				t.Fatalf("error %v with version %q", err, got)
			}
		} else {
			if strings.ContainsAny(got, "\n\r") {
				t.Fatalf("version %q spans lines", got)
			}
			if !bytes.Contains(data, []byte("'"+got+"'")) && !bytes.Contains(data, []byte(`"`+got+`"`)) {
				t.Fatalf("version %q is not a quoted string of the file", got)
			}
			later, err := ParseJAXVersion(append(slices.Clip(data), "\n_version = 'later'\n"...))
			if err != nil || later != got {
				t.Fatalf("a later assignment changed %q to %q (%v)", got, later, err)
			}
		}

		// Round trip: a version written as jax writes it reads back,
		// after whatever lines precede it in a file that had none.
		want := strings.Map(func(r rune) rune {
			if strings.ContainsRune("'\"\\\n\r", r) {
				return -1
			}
			return r
		}, string(data))
		var prefix []byte
		if err != nil {
			prefix = append(slices.Clip(data), '\n')
		}
		for _, line := range []string{`_version = "` + want + `"`, `_version: str = '` + want + `'`} {
			v, err := ParseJAXVersion(append(slices.Clip(prefix), line+"\n"...))
			if err != nil || v != want {
				t.Fatalf("%q after %q read as %q (%v)", line, prefix, v, err)
			}
		}
	})
}
