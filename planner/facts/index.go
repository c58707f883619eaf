package facts

// PackageIndexes are the package indexes the root's package manager would
// install from, as they are on disk: apt's lists under /var/lib/apt/lists
// with their Release files and the pins of /etc/apt/preferences, or dnf's
// metadata cache. Only the GPU-relevant packages are kept, each with every
// version the indexes offer, where each comes from, and the priority the
// package manager gives it; so that a plan picks versions, and says where
// they come from, without asking the package manager in a child process.
type PackageIndexes struct {
	// Manager is "apt" or "dnf"; "" when the root has no index gpuenv
	// reads (no package manager, or lists never fetched).
	Manager string `json:"manager,omitempty"`
	// Architecture is apt's native architecture ("amd64"): the lists of
	// other architectures are read, but their packages are not kept.
	Architecture string `json:"architecture,omitempty"`
	// DefaultRelease is APT::Default-Release, the target release that
	// gets priority 990, when the configuration sets one.
	DefaultRelease string `json:"default_release,omitempty"`
	// Indexes are the indexes on disk, in the order the sources are
	// configured (apt downloads a version from the first that lists it).
	Indexes []PackageIndex `json:"indexes"`
	// Missing are configured sources with no index on disk: apt-get
	// update (dnf makecache) has not fetched them, or failed to.
	Missing []IndexSource `json:"missing,omitempty"`
	// Pins are the records of apt's preferences, in the order apt reads
	// them: /etc/apt/preferences, then /etc/apt/preferences.d/* by name.
	Pins []Pin `json:"pins,omitempty"`
	// Packages are the GPU-relevant packages the indexes list, or that
	// are installed, by name.
	Packages []IndexedPackage `json:"packages"`
}

// IndexSource is the configured source an index belongs to.
type IndexSource struct {
	// File is where the source is configured, inside the root.
	File string `json:"file"`
	URI  string `json:"uri"`
	// Suite is apt's suite ("bookworm"), or a flat repository's path
	// ("/", "./"); Component is "" for a flat repository.
	Suite     string `json:"suite,omitempty"`
	Component string `json:"component,omitempty"`
	// Repo is a dnf repository's id.
	Repo string `json:"repo,omitempty"`
}

// PackageIndex is one index file: an apt Packages list for one suite,
// component and architecture, or a dnf repository's primary metadata.
type PackageIndex struct {
	// Path is the file inside the root; it names the index in
	// IndexedVersion.Origins.
	Path     string       `json:"path"`
	Identity FileIdentity `json:"identity"`
	Source   IndexSource  `json:"source"`
	// Architecture is the list's ("amd64", "all").
	Architecture string `json:"architecture,omitempty"`
	// Site is the host of the source's URI, which apt's "Pin: origin"
	// matches.
	Site string `json:"site,omitempty"`
	// Release is the suite's Release data (apt's InRelease or Release,
	// dnf's repomd.xml revision); nil when there is none on disk.
	Release *ReleaseData `json:"release,omitempty"`
	// Priority is the priority the package manager gives the versions
	// of this index when no pin names the package: apt's 500, 990 for
	// the target release, 100 or 1 for a NotAutomatic archive, or a
	// general pin's; for dnf the repository's priority= (lower wins,
	// 99 when unset).
	Priority int `json:"priority"`
	// PriorityFrom says what decided Priority.
	PriorityFrom string `json:"priority_from"`
	// Pin is the general pin that set Priority, counted from 1 in
	// PackageIndexes.Pins; 0 when none did.
	Pin int `json:"pin,omitempty"`
	// Stanzas counts the packages the index lists, relevant or not.
	Stanzas int `json:"stanzas"`
}

// FileIdentity tells one version of a file from another without reading
// it, as apt's own cache does: a list is replaced by rename on every
// update, which changes its inode, and rewritten in place changes its
// size or modification time.
type FileIdentity struct {
	Size int64 `json:"size"`
	// MTime is the modification time in nanoseconds since the epoch.
	MTime int64  `json:"mtime_ns"`
	Inode uint64 `json:"inode"`
}

// ReleaseData is what a suite's Release file says of it.
type ReleaseData struct {
	// Path is the InRelease or Release file inside the root.
	Path     string       `json:"path"`
	Identity FileIdentity `json:"identity"`
	Origin   string       `json:"origin,omitempty"`
	Label    string       `json:"label,omitempty"`
	// Suite is the archive name ("stable", "oldstable-security"), which
	// apt's "a=" matches.
	Suite    string `json:"suite,omitempty"`
	Codename string `json:"codename,omitempty"`
	Version  string `json:"version,omitempty"`
	Date     string `json:"date,omitempty"`
	// NotAutomatic and ButAutomaticUpgrades lower the suite's default
	// priority: 1 for the first alone (experimental), 100 with both
	// (backports).
	NotAutomatic         bool `json:"not_automatic,omitempty"`
	ButAutomaticUpgrades bool `json:"but_automatic_upgrades,omitempty"`
}

// Pin is one record of apt's preferences.
type Pin struct {
	// File is the preferences file inside the root; Record counts the
	// records in it from 1.
	File   string `json:"file"`
	Record int    `json:"record"`
	// Package is the record's Package field: names, globs, /regexes/,
	// or "*" for a general pin that applies to whole indexes.
	Package string `json:"package"`
	// Pin is the record's Pin field ("release n=bookworm-backports",
	// "origin developer.download.nvidia.com", "version 550.*").
	Pin      string `json:"pin"`
	Priority int    `json:"priority"`
}

// IndexedPackage is one GPU-relevant package the indexes list or the
// package database holds.
type IndexedPackage struct {
	Name string `json:"name"`
	// Installed is the installed version, "" when none.
	Installed string `json:"installed,omitempty"`
	// Candidate is the version the package manager installs for a plain
	// "install name": for apt the highest priority, newest on a tie,
	// never a downgrade below 1000. "" when none can be installed.
	Candidate string `json:"candidate,omitempty"`
	// CandidateFrom says why Candidate won, naming the pin or priority
	// that decided when one did.
	CandidateFrom string `json:"candidate_from,omitempty"`
	// Versions are every version offered or installed, newest first.
	Versions []IndexedVersion `json:"versions"`
}

// IndexedVersion is one version of a package and where it comes from.
type IndexedVersion struct {
	Version  string `json:"version"`
	Priority int    `json:"priority"`
	// PriorityFrom names what gave the priority: an index's default
	// ("index default"), the target release, a NotAutomatic suite, a
	// pin (file and record), or the installed version's 100.
	PriorityFrom string `json:"priority_from"`
	// Pin is the pin that decided Priority, counted from 1 in
	// PackageIndexes.Pins (a pin naming the package, or a general pin
	// of its index); 0 when no pin did.
	Pin int `json:"pin,omitempty"`
	// Origins are the indexes (PackageIndex.Path) that list this version,
	// in source order; empty for a version only installed, which no index
	// lists any more.
	Origins []string `json:"origins"`
	// Installed is set for the installed version.
	Installed    bool   `json:"installed,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	// Source is the source package, when its name differs.
	Source string `json:"source,omitempty"`
	// Filename, Size and SHA256 describe the package file in the first
	// origin, which apt downloads: a copy in the package cache whose
	// checksum matches needs no download.
	Filename string `json:"filename,omitempty"`
	Size     int64  `json:"size,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
}
