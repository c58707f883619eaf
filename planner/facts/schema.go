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
	{Key: "fabric", Minor: 2, What: "the NVSwitches and the Fabric Manager"},
}
