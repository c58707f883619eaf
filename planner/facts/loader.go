package facts

// Loader is what the dynamic loader would do for the programs that use
// the GPU: for each consumer (a framework in a Python environment, the
// CUDA toolkit, a native program named to doctor), the libraries it needs
// and, for each, the file ld.so picks in its own search order and the
// files of the same name it passes over.
type Loader struct {
	// Cache is /etc/ld.so.cache as read.
	Cache LoaderCache `json:"cache"`
	// LibraryPath is the LD_LIBRARY_PATH a program started from a login
	// shell (and, on "/", from the session gpuenv ran in) gets, one
	// directory per entry with where it was set.
	LibraryPath []SearchDir        `json:"library_path"`
	Consumers   []LoaderResolution `json:"consumers"`
}

// LoaderCache is the loader's cache of library locations, which ldconfig
// builds from /etc/ld.so.conf and the trusted directories.
type LoaderCache struct {
	Path string `json:"path"`
	// Present is false when the root has no cache: ld.so then searches
	// only LD_LIBRARY_PATH, RUNPATH and the default directories. Entries
	// are then listed as ldconfig would write them, and Simulated is set.
	Present   bool `json:"present"`
	Simulated bool `json:"simulated,omitempty"`
	Entries   int  `json:"entries"`
	// Error is why a present cache could not be read.
	Error string `json:"error,omitempty"`
	// Uncached are ld.so.conf directories holding libraries the cache
	// does not list: ldconfig has not run since they were configured.
	Uncached []SearchDir `json:"uncached,omitempty"`
}

// SearchDir is one directory of a search list and where it was set.
type SearchDir struct {
	Dir  string `json:"dir"`
	From string `json:"from"`
}

// LoaderResolution is the loader's work for one consumer.
type LoaderResolution struct {
	// Kind is "framework", "toolkit" or "program".
	Kind string `json:"kind"`
	// Python is the environment's interpreter, for a framework.
	Python    string `json:"python,omitempty"`
	Framework string `json:"framework,omitempty"`
	// Subject is the framework's directory, the toolkit's or the program's
	// path.
	Subject string `json:"subject"`
	// Object is the ELF file whose needs were read, "" when they came from
	// the framework's known build (NeededFrom names the table row).
	Object     string `json:"object,omitempty"`
	NeededFrom string `json:"needed_from"`
	// Needed are the sonames the consumer loads, its own and those of
	// the libraries they bring, in load order.
	Needed []string `json:"needed"`
	// RunPath and RPath are the object's DT_RUNPATH and DT_RPATH with
	// $ORIGIN expanded; for a framework without readable ELF files, its
	// wheel library directories (site-packages/nvidia/*/lib), which its
	// libraries' RUNPATH names and which it preloads from.
	RunPath []string `json:"runpath,omitempty"`
	RPath   []string `json:"rpath,omitempty"`
	// Libraries are the sonames' resolutions, in the order of Needed.
	Libraries []ResolvedLibrary `json:"libraries"`
}

// ResolvedLibrary is one soname and the file the loader takes for it.
type ResolvedLibrary struct {
	Soname string `json:"soname"`
	// Path is the file that wins, inside the root; "" when no directory
	// of the search order has the soname.
	Path string `json:"path,omitempty"`
	// Real is the file Path leads to through symlinks.
	Real string `json:"real,omitempty"`
	// Version is the library's version as its file name, wheel or
	// toolkit says; VersionFrom says which.
	Version     string `json:"version,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	// Via is the step of the search order that found it: "LD_LIBRARY_PATH",
	// "RPATH", "RUNPATH", "ld.so.cache", "default".
	Via string `json:"via,omitempty"`
	// From is where that step's directory was set (a file and line, the
	// session, the object's RUNPATH).
	From string `json:"from,omitempty"`
	// Needer is the library that needs this one, "" for the consumer's
	// own needs.
	Needer string `json:"needed_by,omitempty"`
	// Shadows are the files of the same soname that later steps would
	// have found, and those in ld.so.conf directories the cache lacks.
	Shadows []LibraryCandidate `json:"shadows,omitempty"`
	// Elsewhere are files of the soname on the root that the search order
	// does not reach: another Python environment's wheels, a toolkit not
	// configured for the loader.
	Elsewhere []string `json:"elsewhere,omitempty"`
}

// LibraryCandidate is a file the search order passes over.
type LibraryCandidate struct {
	Path        string `json:"path"`
	Real        string `json:"real,omitempty"`
	Version     string `json:"version,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	Via         string `json:"via"`
	From        string `json:"from,omitempty"`
}
