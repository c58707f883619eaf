package facts

// Session is the environment GPU programs are started in, beyond the
// system-wide configuration that Environment holds: the invoking user's
// shell start-up files, a running job's environment (doctor --pid), and
// what the directories on their LD_LIBRARY_PATH hold.
type Session struct {
	// ShellFiles are the settings of LD_LIBRARY_PATH, PATH, CUDA_* and
	// NVIDIA_* in the invoking user's ~/.profile, ~/.bash_profile,
	// ~/.bash_login and ~/.bashrc, read as text: no shell is run.
	ShellFiles []Assignment `json:"shell_files"`
	// Process is the environment of the process named by --pid.
	Process *ProcessEnvironment `json:"process,omitempty"`
	// StubLibraries are driver stub libraries (a toolkit's lib64/stubs
	// libcuda.so) in a directory some LD_LIBRARY_PATH names, each with
	// the setting that names it.
	StubLibraries []StubLibrary `json:"stub_libraries"`
}

// ProcessEnvironment is a running process's environment, as its
// /proc/PID/environ holds it: the variables gpuenv observes only.
type ProcessEnvironment struct {
	PID       int          `json:"pid"`
	File      string       `json:"file"`
	Variables []Assignment `json:"variables"`
	// Truncated is true when the file was larger than gpuenv reads;
	// variables past the limit are not seen.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the file could not be read.
	Error string `json:"error,omitempty"`
}

// StubLibrary is one stub library file the loader or a dlopen by name
// would find through LD_LIBRARY_PATH.
type StubLibrary struct {
	// Path is the file as the search finds it ("…/stubs/libcuda.so"),
	// Real what it leads to.
	Path string `json:"path"`
	Real string `json:"real"`
	// Setting is the LD_LIBRARY_PATH assignment that names its directory.
	Setting Assignment `json:"setting"`
}

// PythonLibrary is a GPU library other than the frameworks, installed in
// a Python environment: onnxruntime's wheels, CuPy's, numba's, vLLM's.
type PythonLibrary struct {
	// Name is the family ("onnxruntime", "cupy", "numba", "vllm"); Distribution
	// the installed project ("onnxruntime-gpu", "cupy-cuda12x").
	Name         string `json:"name"`
	Distribution string `json:"distribution"`
	Version      string `json:"version"`
	// CUDA is the CUDA major the distribution's name says it is built
	// for ("12" for cupy-cuda12x), "" when it says none.
	CUDA string `json:"cuda,omitempty"`
	// Location is its dist-info directory.
	Location string `json:"location"`
}

// UnmetRequirement is a Requires-Dist of an installed distribution that
// what is installed does not satisfy, as pip check reports it.
type UnmetRequirement struct {
	// Distribution and Version name the one that requires.
	Distribution string `json:"distribution"`
	Version      string `json:"version"`
	// Requirement is the Requires-Dist line's requirement, marker left
	// out ("nvidia-cudnn-cu12==9.1.0.70").
	Requirement string `json:"requirement"`
	// Target is the required project; Installed its installed version,
	// "" when it is not installed.
	Target    string `json:"target"`
	Installed string `json:"installed,omitempty"`
	// InstalledFor are the distributions whose requirement on Target
	// the installed release meets ("torch 2.5.1"): the other side of a
	// conflict.
	InstalledFor []string `json:"installed_for,omitempty"`
	// File is the METADATA file the requirement was read from.
	File string `json:"file"`
}
