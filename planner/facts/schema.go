package facts

// Addition is a top-level fact of the document that major version 1 did
// not have when it was first written. A reader of a document of a lower
// minor, or of one without schema_minor, learns which it lacks by the
// absence of their keys.
type Addition struct {
	// Key is the fact's key in the document.
	Key string
	// Minor is the minor that added it; 0 for those added before minors
	// were counted, which only the key's absence tells.
	Minor int
	// What names the fact for a person.
	What string
	// Planned is set for facts the planner decides steps from: a plan
	// made without one would take the host for empty where it is not.
	Planned bool
	// Label is set for a key that labels the document rather than
	// stating a fact: a document without it lacks nothing.
	Label bool
}

// Additions are the facts added to major version 1, in the order they
// came. A fact added by a later minor goes at the end with that minor,
// and SchemaMinor is raised with it.
var Additions = []Addition{
	{Key: "repositories", What: "the enabled package repositories", Planned: true},
	{Key: "init", What: "process 1 of the root", Planned: true},
	{Key: "repository_files", What: "gpuenv's repository files and keyrings", Planned: true},
	{Key: "units", What: "the systemd units gpuenv manages", Planned: true},
	{Key: "package_indexes", What: "the package indexes on disk", Planned: true},
	{Key: "context", What: "the runtime context"},
	{Key: "loader", What: "the dynamic loader's resolution"},
	{Key: "containers", What: "the container toolkit and engines", Planned: true},
	{Key: "hostname", Minor: 1, What: "the host's name"},
	{Key: "format_version", Minor: 2, What: "the document's version under the name every gpuenv document gives it", Label: true},
	{Key: "session", Minor: 3, What: "the invoking user's and a job's environment"},
	{Key: "device_access", Minor: 3, What: "the /dev/char links, cgroup drivers and device rules"},
	{Key: "health", Minor: 4, What: "the GPUs' health counters and links"},
	{Key: "fabric", Minor: 5, What: "the NVSwitches and the Fabric Manager"},
}
