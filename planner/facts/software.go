package facts

// Packages are the GPU-relevant entries of the host's package database.
type Packages struct {
	// Manager is the database read, or "" when the host has none gpuenv
	// reads.
	Manager Database `json:"manager"`
	// Total is how many packages the database holds, GPU-related or not.
	Total int `json:"total"`
	// Interrupted is true when dpkg's journal (/var/lib/dpkg/updates)
	// holds entries not yet merged into the status file: a dpkg run was
	// cut short, and `dpkg --configure -a` must run before anything else.
	// The entries are applied to Packages as dpkg itself would.
	Interrupted bool      `json:"interrupted,omitempty"`
	Packages    []Package `json:"packages"`
}

// Database is a package database gpuenv reads.
type Database string

const (
	DatabaseDpkg Database = "dpkg"
	DatabaseRPM  Database = "rpm"
)

// Package is one package as the database records it.
type Package struct {
	Name         string `json:"name"`
	Version      string `json:"version"` // "535.309.01-0+deb12u1", as written
	Architecture string `json:"architecture,omitempty"`
	Source       string `json:"source,omitempty"` // source package
	// State is dpkg's package state (StateInstalled for RPM).
	State PackageState `json:"state"`
	// Want is dpkg's selection: "install", "hold", "deinstall", "purge"
	// ("install", or "hold" under a dnf versionlock, for RPM).
	Want string `json:"want"`
	Hold bool   `json:"hold"`
	// ReinstallRequired is dpkg's "reinstreq" error flag: the package is
	// broken and must be reinstalled before anything else is done to it.
	ReinstallRequired bool `json:"reinstall_required,omitempty"`
}

// PackageState is dpkg's state of a package, as its status file writes it.
type PackageState string

const (
	StateNotInstalled    PackageState = "not-installed"
	StateConfigFiles     PackageState = "config-files" // removed; its configuration files stay
	StateHalfInstalled   PackageState = "half-installed"
	StateUnpacked        PackageState = "unpacked"
	StateHalfConfigured  PackageState = "half-configured"
	StateTriggersAwaited PackageState = "triggers-awaited"
	StateTriggersPending PackageState = "triggers-pending"
	StateInstalled       PackageState = "installed"
)

// Repository is one enabled package source: an apt "deb" entry, from a
// one-line sources.list file or a deb822 .sources stanza, or a dnf
// repository section.
type Repository struct {
	// File is where it is configured, inside the root.
	File string `json:"file"`
	// ID is a dnf repository's section name.
	ID   string   `json:"id,omitempty"`
	URIs []string `json:"uris"`
	// Suites and Components are apt's ("bookworm", "main contrib").
	Suites     []string `json:"suites,omitempty"`
	Components []string `json:"components,omitempty"`
	// Priority is a dnf repository's priority= (lower wins; dnf's
	// default, 99, when 0).
	Priority int `json:"priority,omitempty"`
	// Keys are the keys the source trusts, as written: apt's Signed-By
	// (keyring paths, or fingerprints of keys apt already has), dnf's
	// gpgkey (file:// or https URLs). Empty when the source names none,
	// and apt trusts every key in its trusted.gpg.d.
	Keys []string `json:"keys,omitempty"`
	// GPGCheck is a dnf repository's gpgcheck=1 (dnf checks packages'
	// signatures).
	GPGCheck bool `json:"gpgcheck,omitempty"`
	// Options are an apt source's other options, as written: a one-line
	// source's ("arch=amd64", "trusted=yes"), a deb822 stanza's other
	// fields ("Architectures: amd64").
	Options []string `json:"options,omitempty"`
	// URIsFrom is "metalink" or "mirrorlist" when a dnf repository has
	// no baseurl and URIs holds that list's address instead.
	URIsFrom string `json:"uris_from,omitempty"`
}

// CUDA lists the installed CUDA toolkits.
type CUDA struct {
	Toolkits []Toolkit `json:"toolkits"`
	// Default is where /usr/local/cuda points (resolved, inside the root),
	// or "" when it does not exist.
	Default string `json:"default,omitempty"`
}

// Toolkit is one CUDA toolkit install.
type Toolkit struct {
	Path string `json:"path"` // "/usr/local/cuda-12.4", "/usr/lib/nvidia-cuda-toolkit"
	// Version is the toolkit release: "12.4.1" where the files name the
	// update, "11.8" where version.json carries a date stamp
	// ("11.8.20220929") instead, "11.8.0" from Debian's package version.
	Version string `json:"version"`
	// Runtime is the CUDA runtime's own version ("12.4.127", from
	// version.json's cuda_cudart, version.txt or the package), which is
	// what nvcc and libcudart report.
	Runtime string `json:"runtime_version,omitempty"`
	// VersionFrom names where the version was read: "version.json",
	// "version.txt", or "package:<name>".
	VersionFrom string `json:"version_from"`
	Nvcc        string `json:"nvcc,omitempty"` // path to nvcc when present
	// Layout is "nvidia" (/usr/local/cuda-X.Y) or "distro" (Debian's
	// nvidia-cuda-toolkit spread over /usr).
	Layout  string `json:"layout"`
	Package string `json:"package,omitempty"`
}

// CuDNN lists cuDNN installs.
type CuDNN struct {
	Installs []CuDNNInstall `json:"installs"`
}

// CuDNNInstall is one cuDNN found by its header or libraries.
type CuDNNInstall struct {
	Version   string   `json:"version"` // "9.1.0" from the header's defines
	Header    string   `json:"header,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	// CUDAMajor is the CUDA major it was built for, when a package name
	// (libcudnn9-cuda-12, +cuda12.2) or a path says.
	CUDAMajor string `json:"cuda_major,omitempty"`
	// Package and PackageVersion name the package that installed it
	// ("libcudnn9-cuda-12", "9.1.0.70-1"), when the database has one of
	// the same version.
	Package        string `json:"package,omitempty"`
	PackageVersion string `json:"package_version,omitempty"`
}

// PythonEnv is one Python environment and the frameworks installed in it.
type PythonEnv struct {
	// Interpreter is the path of its python executable.
	Interpreter string `json:"interpreter"`
	Prefix      string `json:"prefix"`
	Version     string `json:"python_version,omitempty"` // "3.11"
	// Virtual is true for a venv (pyvenv.cfg present).
	Virtual bool `json:"virtual"`
	// System is true for the distribution's own Python, whose site
	// directories (/usr/lib/python3/dist-packages …) are found from the
	// file layout whether or not an interpreter was named.
	System       bool        `json:"system"`
	SitePackages []string    `json:"site_packages"`
	Frameworks   []Framework `json:"frameworks"`
	// Libraries are the GPU libraries besides the frameworks (facts/
	// session.go); Unmet the GPU requirements of installed distributions
	// that the environment does not satisfy. Both added in minor 2.
	Libraries []PythonLibrary    `json:"gpu_libraries,omitempty"`
	Unmet     []UnmetRequirement `json:"unmet_requirements,omitempty"`
}

// Framework is a machine-learning framework installed in an environment.
type Framework struct {
	Name    string `json:"name"`    // "pytorch", "tensorflow", "jax"
	Version string `json:"version"` // "2.5.1+cu124", "1.13.0a0"
	// Variant is the wheel's local version ("cu124", "cpu") when it has one.
	Variant string `json:"variant,omitempty"`
	// CUDA is the CUDA version the build targets ("12.4"); "" for a CPU-only
	// build. CPUOnly is true when the files say so.
	CUDA    string `json:"cuda,omitempty"`
	CuDNN   string `json:"cudnn,omitempty"`
	CPUOnly bool   `json:"cpu_only"`
	// CUDAArchs are the compute capabilities the build carries, when its
	// files say ("sm_80", "compute_90"): TensorFlow's build_info.py, the
	// GPU code embedded in PyTorch's libtorch_cuda.so (.nv_fatbin).
	CUDAArchs []string `json:"cuda_archs,omitempty"`
	// Plugins are companion packages: jax's jax-cuda12-plugin and pjrt;
	// the NVIDIA wheels (nvidia-cudnn-cu12 …) TensorFlow's [and-cuda]
	// extra brings, each as its nvidia/<lib> directory.
	Plugins []Library `json:"plugins,omitempty"`
	// Installer is the dist-info's INSTALLER ("pip", "uv", "conda"),
	// "debian" or "rpm" for a distribution package, or "" when unknown;
	// Package names the distribution package.
	Installer string `json:"installer,omitempty"`
	Package   string `json:"package,omitempty"`
	Location  string `json:"location"`
}

// Group is one /etc/group entry.
type Group struct {
	Name    string   `json:"name"`
	GID     uint32   `json:"gid"`
	Members []string `json:"members"`
	// PrimaryOf are users whose primary group (in /etc/passwd) this is.
	PrimaryOf []string `json:"primary_of,omitempty"`
}

// Environment is the system-wide environment as configuration files set it.
type Environment struct {
	// Variables are assignments of GPU-relevant variables
	// (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, PATH, LD_LIBRARY_PATH …) in
	// /etc/environment, /etc/profile.d/* and systemd DefaultEnvironment=.
	Variables []Assignment `json:"variables"`
	// Teams are the CUDA_VISIBLE_DEVICES of each team, from the files
	// /etc/gpuenv/teams/<group>.env that gpuenv's profile script reads
	// for the members of <group>; each names its Group. Added in minor 8.
	Teams []Assignment `json:"teams,omitempty"`
	// LoaderPaths are the directories in /etc/ld.so.conf and the files it
	// includes.
	LoaderPaths []LoaderPath `json:"loader_paths"`
	// Managed lists gpuenv's own files that exist on the host.
	Managed []string `json:"managed_files,omitempty"`
	// ManagedDigests are the same files with their bytes' digests, which
	// the planner compares with what each must hold.
	ManagedDigests []FileDigest `json:"managed_file_digests,omitempty"`
}

// Assignment is one variable set in one file.
type Assignment struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	// Group is, for a team's setting, the Unix group whose members get
	// it; "" for a setting everyone gets. Added in minor 8.
	Group string `json:"group,omitempty"`
}

// LoaderPath is a library directory the dynamic loader searches.
type LoaderPath struct {
	Dir  string `json:"dir"`
	File string `json:"file"`
}

// FileDigest is one file gpuenv writes or reads a step's premise from, as
// a plan needs it: whether it is there, and its bytes' sha256, which is
// all a planner compares with what the file must hold.
type FileDigest struct {
	// Path is inside the root.
	Path string `json:"path"`
	// SHA256 is the hex sha256 of the file's bytes; "" when the file could
	// not be read (a directory, a dangling link, no permission).
	SHA256 string `json:"sha256,omitempty"`
	// Fingerprints are, for a keyring, the fingerprints of the primary
	// keys it holds (upper-case hex, in the keyring's order), so that a
	// plan can tell the pinned key from another; KeyError says why none
	// could be read from it.
	Fingerprints []string `json:"fingerprints,omitempty"`
	KeyError     string   `json:"key_error,omitempty"`
}

// RepositoryFiles are gpuenv's own package-source files and the keyrings
// sources name, as the repository planner compares them.
type RepositoryFiles struct {
	// Files are the gpuenv-* files in /etc/apt/sources.list.d,
	// /etc/apt/preferences.d and /etc/yum.repos.d, by path.
	Files []FileDigest `json:"files"`
	// Keyrings are the keyring files the host has in the usual places
	// (/usr/share/keyrings, /etc/apt/keyrings, /etc/apt/trusted.gpg.d,
	// /etc/pki/rpm-gpg) and every other one that an enabled source names
	// (Signed-By, gpgkey=file://) and that exists, by path.
	Keyrings []FileDigest `json:"keyrings"`
}

// Unit is the enablement of a systemd unit gpuenv manages, and, for a
// unit gpuenv writes itself, its unit file.
type Unit struct {
	Name string `json:"name"` // "nvidia-persistenced.service"
	// File is the unit file gpuenv writes for it, when it writes one and
	// the file exists.
	File *FileDigest `json:"file,omitempty"`
	// Enabled is true when the link `systemctl enable` makes from its
	// WantedBy= target (multi-user.target.wants) exists.
	Enabled bool `json:"enabled"`
	// MIGLayout is, for gpuenv-mig.service, the layout its command lines
	// make at boot: by GPU UUID, each GPU instance as
	// "PROFILE:START:SIZE:SLICES" (NVML's profile id, its placement, its
	// compute instances' slices joined by "+"). Added in minor 6.
	MIGLayout map[string][]string `json:"mig_layout,omitempty"`
	// ComputeModes are, for gpuenv-compute-mode.service, the compute
	// modes its command lines set at boot, by GPU UUID ("default",
	// "exclusive_process", "prohibited"). Added in minor 7.
	ComputeModes map[string]string `json:"compute_modes,omitempty"`
}
