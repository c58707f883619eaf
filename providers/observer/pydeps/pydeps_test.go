package pydeps

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// TestSpecifiers: PEP 440's ordering and operators, on versions the GPU
// wheels carry.
func TestSpecifiers(t *testing.T) {
	for _, tc := range []struct {
		spec, v string
		want    bool
	}{
		{"==9.1.0.70", "9.1.0.70", true},
		{"==9.1.0.70", "9.5.1.17", false},
		{"==2.5.1", "2.5.1+cu124", true},
		{"==2.5.1+cu121", "2.5.1+cu124", false},
		{">=9.8,<10.0", "9.8.0.87", true},
		{">=9.8,<10.0", "9.7.1.26", false},
		{">=9.8,<10.0", "10.0.0rc1", false},
		{"<10.0", "10.0.0.dev3", false},
		{"<10.0rc2", "10.0.0rc1", true},
		{"~=2.1", "2.9", true},
		{"~=2.1", "3.0", false},
		{"~=2.1.3", "2.1.9", true},
		{"~=2.1.3", "2.2.0", false},
		{"==0.9.*", "0.9.0.1", true},
		{"==0.9.*", "0.10.0", false},
		{"!=12.4.*", "12.4.127", false},
		{">1.0", "1.0.post1", false},
		{">1.0.post1", "1.0.post2", true},
		{">=1.0.dev0", "1.0a1", true},
		{"<=0.6.0,>=0.6.0", "0.6.0", true},
		{"==1.0", "1.0.0", true},
		{"===2.0.0", "2.0.0", true},
	} {
		specs, err := ParseSpecifiers(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		v, err := ParseVersion(tc.v)
		if err != nil {
			t.Fatalf("%s: %v", tc.v, err)
		}
		if got := Allows(specs, v, tc.v); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.v, tc.spec, got, tc.want)
		}
	}
	for _, bad := range []string{"~=2", ">=1.*", "1.0", "==x"} {
		if _, err := ParseSpecifiers(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestOrder(t *testing.T) {
	order := []string{"1.0.dev1", "1.0a1.dev1", "1.0a1", "1.0b2", "1.0rc1", "1.0", "1.0+local.1", "1.0.post1.dev1", "1.0.post1", "1.1", "1!0.1"}
	for i := 1; i < len(order); i++ {
		a, _ := ParseVersion(order[i-1])
		b, _ := ParseVersion(order[i])
		if Compare(a, b) >= 0 {
			t.Errorf("%s is not before %s", order[i-1], order[i])
		}
	}
}

// TestMarkers: the markers GPU wheels use; one that reads an unknown
// variable is undecided, unless the rest decides it.
func TestMarkers(t *testing.T) {
	env := Environment{"platform_system": "Linux", "platform_machine": "x86_64", "python_version": "3.10", "sys_platform": "linux"}
	for _, tc := range []struct {
		m           string
		want, known bool
	}{
		{`platform_system == "Linux" and platform_machine == "x86_64"`, true, true},
		{`platform_system == "Linux" and platform_machine == "aarch64"`, false, true},
		{`python_version < "3.13"`, true, true},
		{`python_version >= "3.11"`, false, true},
		{`extra == "cuda12"`, false, false},
		{`extra == "cuda12" or sys_platform == "linux"`, true, true},
		{`extra == "cuda12" and sys_platform == "win32"`, false, true},
		{`(sys_platform == "linux" or sys_platform == "darwin") and 'x86' in platform_machine`, true, true},
		{`platform_machine not in "arm64 aarch64"`, true, true},
		{`python_version <`, false, false},
	} {
		got, known := EvalMarker(tc.m, env)
		if got != tc.want || known != tc.known {
			t.Errorf("%s: %v (decided %v), want %v (decided %v)", tc.m, got, known, tc.want, tc.known)
		}
	}
}

// TestUnmet: two frameworks pinning different cuDNN wheels; the one the
// installed wheel does not satisfy is reported with the one it does; an
// extra is judged once every GPU distribution it names is installed.
func TestUnmet(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "opt/venv/lib/python3.10/site-packages")
	files := map[string]string{
		"torch-2.5.1+cu124.dist-info/METADATA":          "Metadata-Version: 2.1\nName: torch\nRequires-Dist: filelock\nRequires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_system == \"Linux\" and platform_machine == \"x86_64\"\n\nRequires-Dist: nvidia-bogus==1 (body)\n",
		"jax_cuda12_plugin-0.6.0.dist-info/METADATA":    "Name: jax-cuda12-plugin\nRequires-Dist: jax-cuda12-pjrt==0.6.0\nRequires-Dist: nvidia-cudnn-cu12<10.0,>=9.8; extra == \"with-cuda\"\nRequires-Dist: nvidia-nccl-cu12>=2.18.1; extra == \"with-cuda\"\nRequires-Dist: nvidia-cufft-cu12>=11; extra == \"absent\"\n",
		"jax_cuda12_pjrt-0.6.0.dist-info/METADATA":      "Name: jax-cuda12-pjrt\n",
		"nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA": "Name: nvidia-cudnn-cu12\n",
		"nvidia_nccl_cu12-2.21.5.dist-info/METADATA":    "Name: nvidia-nccl-cu12\n",
		"onnxruntime-1.16.1.dist-info/METADATA":         "Name: onnxruntime\n",
		"onnxruntime_gpu-1.16.1.dist-info/METADATA":     "Name: onnxruntime-gpu\n",
		"cupy_cuda12x-13.3.0.dist-info/METADATA":        "Name: cupy-cuda12x\n",
		"vllm-0.9.2.dist-info/METADATA":                 "Name: vllm\n",
	}
	for p, c := range files {
		full := filepath.Join(site, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	envs := []facts.PythonEnv{{Interpreter: "/opt/venv/bin/python", Version: "3.10", SitePackages: []string{"/opt/venv/lib/python3.10/site-packages"}}}
	Observe(h, envs, "x86_64")
	env := envs[0]
	if len(env.Unmet) != 1 {
		t.Fatalf("unmet: %+v", env.Unmet)
	}
	u := env.Unmet[0]
	if u.Distribution != "jax-cuda12-plugin" || u.Requirement != "nvidia-cudnn-cu12<10.0,>=9.8" || u.Installed != "9.1.0.70" || len(u.InstalledFor) != 1 || u.InstalledFor[0] != "torch 2.5.1+cu124" {
		t.Errorf("unmet %+v", u)
	}
	var libs []string
	for _, l := range env.Libraries {
		libs = append(libs, l.Name+":"+l.Distribution+":"+l.CUDA)
	}
	want := []string{"cupy:cupy-cuda12x:12", "onnxruntime:onnxruntime:", "onnxruntime:onnxruntime-gpu:", "vllm:vllm:"}
	if len(libs) != len(want) {
		t.Fatalf("libraries %v, want %v", libs, want)
	}
	for i := range want {
		if libs[i] != want[i] {
			t.Errorf("libraries %v, want %v", libs, want)
		}
	}
}
