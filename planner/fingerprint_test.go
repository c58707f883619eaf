package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/planner/plan"
)

func fingerprintFacts() *facts.Observation {
	obs := gpuFacts(2)
	obs.OS = facts.OS{ID: "ubuntu", VersionID: "22.04", Family: "deb"}
	obs.Kernel = facts.Kernel{Release: "5.15.0-105-generic", SecureBoot: "disabled",
		Loaded: []facts.LoadedModule{{Name: "nvidia", Size: 100, RefCount: 3, UsedBy: []string{"nvidia_uvm"}}}}
	obs.Driver = facts.Driver{ModuleVersion: "550.54.15", LibraryVersion: "550.54.15"}
	obs.Packages = facts.Packages{Manager: "dpkg", Total: 1500, Packages: []facts.Package{
		{Name: "nvidia-driver-550", Version: "550.54.15-0ubuntu1", State: "installed", Want: "install"},
	}}
	obs.NVML.Devices[0].MemoryUsed = 1 << 30
	obs.NVML.Devices[0].PersistenceMode = "disabled"
	obs.NVML.Devices[0].GPUInstances = []facts.GPUInstance{{Profile: "7g.80gb", ProfileID: 4, Size: 8, Compute: []facts.ComputeInstance{{Slices: 7, UUID: "MIG-0"}}}}
	obs.Groups = []facts.Group{{Name: "video", GID: 44, Members: []string{"alice"}}}
	obs.Repositories = []facts.Repository{{File: "/etc/apt/sources.list", URIs: []string{"http://archive.ubuntu.com/ubuntu/"}, Suites: []string{"jammy"}, Components: []string{"main", "restricted"}}}
	return obs
}

func TestFingerprintStaleness(t *testing.T) {
	driverPlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "driver", Action: plan.Update}}}
	groupPlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "group.video", Action: plan.Update}}}
	devicePlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "device.all", Action: plan.Update}}}
	emptyPlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{}}
	enginePlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "container_toolkit.engine.docker", Action: plan.Update}}}
	repoPlan := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "repository.cuda", Action: plan.Create}}}
	packagePlan := func(s plan.Step) *plan.Plan {
		p := &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{s}}
		p.Transactions = Batch(p.Steps)
		return p
	}
	driverInstall := packagePlan(plan.Step{Address: "driver", Action: plan.Update, After: map[string]string{"version": "550.90.07-0ubuntu1"},
		Operations: []plan.Operation{aptOp("nvidia-driver-550", "550.90.07-0ubuntu1")}})
	distroTorch := packagePlan(plan.Step{Address: "framework.pytorch", Action: plan.Create, After: map[string]string{"package": "python3-torch=2.0.1-1"},
		Operations: []plan.Operation{aptOp("python3-torch", "2.0.1-1")}})
	pipTorch := packagePlan(plan.Step{Address: "framework.pytorch", Action: plan.Create, After: map[string]string{"version": "2.5.1+cu124", "index_url": "https://download.pytorch.org/whl/cu124"},
		Operations: []plan.Operation{pkgOp(plan.PackagesOp{Manager: "pip", Venv: "/opt/pytorch", IndexURL: "https://download.pytorch.org/whl/cu124", Install: []plan.PackagePin{{Name: "torch", Version: "2.5.1+cu124"}}})}})
	moreSources := func(o *facts.Observation) {
		o.Repositories[0].Components = append(o.Repositories[0].Components, "universe")
	}
	tests := []struct {
		name   string
		plan   *plan.Plan
		change func(o *facts.Observation)
		stale  []string // the sections named stale; nil for a fresh plan
	}{
		{"memory in use", driverPlan, func(o *facts.Observation) { o.NVML.Devices[0].MemoryUsed = 70 << 30 }, nil},
		{"processes", devicePlan, func(o *facts.Observation) {
			o.NVML.Devices[1].Processes = []facts.GPUProcess{{PID: 7, UsedMemory: 1 << 30}}
		}, nil},
		{"module reference counts", driverPlan, func(o *facts.Observation) {
			o.Kernel.Loaded[0].RefCount = 9
			o.Kernel.Loaded[0].UsedBy = nil
		}, nil},
		{"the package database's size", driverPlan, func(o *facts.Observation) { o.Packages.Total = 1501 }, nil},
		{"a package version", driverPlan, func(o *facts.Observation) { o.Packages.Packages[0].Version = "550.90.07-0ubuntu1" }, []string{FactsPackages}},
		{"a hold", driverPlan, func(o *facts.Observation) { o.Packages.Packages[0].Hold = true }, []string{FactsPackages}},
		{"the running kernel", driverPlan, func(o *facts.Observation) { o.Kernel.Release = "5.15.0-106-generic" }, []string{FactsKernel}},
		{"the loaded module", driverPlan, func(o *facts.Observation) { o.Driver.ModuleVersion = "550.90.07" }, []string{FactsDriver}},
		{"a group a driver plan does not use", driverPlan, func(o *facts.Observation) { o.Groups[0].Members = nil }, nil},
		{"the group a group plan changes", groupPlan, func(o *facts.Observation) { o.Groups[0].Members = nil }, []string{FactsGroups}},
		{"a package a group plan does not use", groupPlan, func(o *facts.Observation) { o.Packages.Packages = nil }, nil},
		{"a device setting", devicePlan, func(o *facts.Observation) { o.NVML.Devices[0].PersistenceMode = "enabled" }, []string{FactsDevices}},
		{"a MIG instance", devicePlan, func(o *facts.Observation) {
			o.NVML.Devices[1].GPUInstances = []facts.GPUInstance{{Profile: "7g.80gb", ProfileID: 4, Size: 8, Compute: []facts.ComputeInstance{{Slices: 7}}}}
		}, []string{FactsDevices}},
		// fingerprintFacts gives GPU 0 a 7g instance with no process.
		{"a process on a MIG instance", devicePlan, func(o *facts.Observation) {
			o.NVML.Devices[0].GPUInstances[0].Compute[0].Processes = []facts.GPUProcess{{PID: 7, UsedMemory: 1 << 30}}
		}, nil},
		{"a package under an empty plan", emptyPlan, func(o *facts.Observation) { o.Packages.Packages = nil }, []string{FactsPackages}},
		{"a package source a repository plan adds", repoPlan, func(o *facts.Observation) {
			o.Repositories = append(o.Repositories, facts.Repository{File: "/etc/apt/sources.list.d/cuda.list", URIs: []string{"https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"}, Suites: []string{"/"}})
		}, []string{FactsRepos}},
		{"a package source a driver plan does not use", driverPlan, func(o *facts.Observation) { o.Repositories = nil }, nil},
		{"the sources a driver install picked its version from", driverInstall, moreSources, []string{FactsRepos}},
		{"the sources a distribution framework comes from", distroTorch, moreSources, []string{FactsRepos}},
		{"the apt sources under a pip install", pipTorch, moreSources, nil},
		{"memory under an empty plan", emptyPlan, func(o *facts.Observation) { o.NVML.Devices[1].MemoryUsed = 5 }, nil},
		{"process 1 under an environment plan", &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "environment", Action: plan.Update}}},
			func(o *facts.Observation) { o.Init = facts.Init{PID1: "systemd", Live: true, Systemd: true} }, []string{FactsInit}},
		{"process 1 under a driver plan", driverPlan, func(o *facts.Observation) { o.Init = facts.Init{PID1: "bash", Live: true} }, nil},
		{"a managed file's bytes under an environment plan", &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "environment", Action: plan.Update}}},
			func(o *facts.Observation) {
				o.Environment.ManagedDigests = []facts.FileDigest{{Path: "/etc/ld.so.conf.d/gpuenv.conf", SHA256: "00"}}
			}, []string{FactsEnvironment}},
		{"gpuenv's sources file under a repository plan", repoPlan, func(o *facts.Observation) {
			o.RepositoryFiles.Files = []facts.FileDigest{{Path: "/etc/apt/sources.list.d/gpuenv-cuda.sources", SHA256: "00"}}
		}, []string{FactsRepoFiles}},
		{"a keyring under a driver install", driverInstall, func(o *facts.Observation) {
			o.RepositoryFiles.Keyrings = []facts.FileDigest{{Path: "/usr/share/keyrings/cuda-archive-keyring.gpg", SHA256: "00"}}
		}, []string{FactsRepoFiles}},
		{"a keyring under a pip install", pipTorch, func(o *facts.Observation) {
			o.RepositoryFiles.Keyrings = []facts.FileDigest{{Path: "/usr/share/keyrings/cuda-archive-keyring.gpg", SHA256: "00"}}
		}, nil},
		{"the boot unit under a device plan", devicePlan, func(o *facts.Observation) {
			o.Units = []facts.Unit{{Name: "gpuenv-compute-mode.service", Enabled: true}}
		}, []string{FactsUnits}},
		{"persistenced under a driver settings plan", &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "driver.persistence", Action: plan.Update}}},
			func(o *facts.Observation) {
				o.Units = []facts.Unit{{Name: "nvidia-persistenced.service", Enabled: true}}
			}, []string{FactsUnits}},
		{"a unit under a group plan", groupPlan, func(o *facts.Observation) {
			o.Units = []facts.Unit{{Name: "nvidia-persistenced.service", Enabled: true}}
		}, nil}, {"an engine's configuration under its plan", enginePlan, func(o *facts.Observation) {
			o.Containers.Engines = []facts.EngineConfig{{Engine: "docker", Path: "/etc/docker/daemon.json", Exists: true, SHA256: "00", Content: "{}"}}
		}, []string{FactsContainers}},
		{"the CDI spec under a CDI plan", &plan.Plan{FormatVersion: plan.FormatVersion, Steps: []plan.Step{{Address: "container_toolkit.cdi", Action: plan.Update}}},
			func(o *facts.Observation) {
				o.Containers.CDISpecs = []facts.CDISpec{{Path: "/etc/cdi/nvidia.yaml", SHA256: "00", Kind: "nvidia.com/gpu"}}
			}, []string{FactsContainers}},
		{"an engine's configuration under a driver plan", driverPlan, func(o *facts.Observation) {
			o.Containers.Engines = []facts.EngineConfig{{Engine: "docker", Path: "/etc/docker/daemon.json", Exists: true, SHA256: "00"}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fingerprintFacts()
			var buf bytes.Buffer
			if err := WriteSavedPlan(&buf, tt.plan, before, nil, stackKinds()); err != nil {
				t.Fatal(err)
			}
			sp, err := ReadSavedPlan(&buf)
			if err != nil {
				t.Fatal(err)
			}
			after := fingerprintFacts()
			tt.change(after)

			same := Fingerprint(tt.plan, before, stackKinds()).Digest == Fingerprint(tt.plan, after, stackKinds()).Digest
			err = sp.CheckFresh(after)
			if tt.stale == nil {
				if !same || err != nil {
					t.Fatalf("fingerprint changed (%v): %v", !same, err)
				}
				return
			}
			var se *StaleError
			if same || !errors.As(err, &se) {
				t.Fatalf("fingerprint unchanged (%v), CheckFresh = %v", same, err)
			}
			if diff := cmp.Diff(tt.stale, se.Changed); diff != "" {
				t.Errorf("changed sections (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(se.Diagnostic().Summary, "Saved plan is stale") {
				t.Errorf("diagnostic summary %q", se.Diagnostic().Summary)
			}
		})
	}
}

func TestFingerprintSections(t *testing.T) {
	p := &plan.Plan{Steps: []plan.Step{{Address: "group.video"}, {Address: "environment"}}}
	var got []string
	for _, s := range Fingerprint(p, fingerprintFacts(), stackKinds()).Sections {
		got = append(got, s.Name)
	}
	want := []string{FactsDeviceNodes, FactsCUDA, FactsGroups, FactsEnvironment, FactsInit}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sections (-want +got):\n%s", diff)
	}
}

// savedSample is the sample plan saved with the sample facts, as the
// saved file's bytes and as decoded JSON, for tests that edit it.
func savedSample(t *testing.T) ([]byte, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSavedPlan(&buf, samplePlan(), fingerprintFacts(), nil, stackKinds()); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), m
}

func TestReadSavedPlanRefuses(t *testing.T) {
	good := func() map[string]any {
		_, m := savedSample(t)
		return m
	}
	tests := []struct {
		name   string
		change func(m map[string]any)
		want   string
	}{
		{"a plain JSON plan", func(m map[string]any) { delete(m, "gpuenv_saved_plan") }, "not a saved plan"},
		{"a newer layout", func(m map[string]any) { m["gpuenv_saved_plan"] = 3 }, "layout 3"},
		{"layout 1", func(m map[string]any) { m["gpuenv_saved_plan"] = 1 }, "saved plan layout 1 keeps no copy of the spec"},
		{"a newer format", func(m map[string]any) { m["format_version"] = "2.0" }, "plan format 2.0 is not known to this gpuenv (it reads 3.x and 1.x, writes " + plan.FormatVersion + ")"},
		{"a format that is no version", func(m map[string]any) { m["format_version"] = "one" }, `plan format version "one" is not a version`},
		{"no fingerprint", func(m map[string]any) { delete(m, "facts_fingerprint") }, "no sha256 facts fingerprint"},
		{"a broken step", func(m map[string]any) {
			m["steps"].([]any)[0].(map[string]any)["action"] = "no-op"
		}, "is not a change"},
		{"an unknown reason code", func(m map[string]any) {
			m["steps"].([]any)[0].(map[string]any)["action_reason"] = "because"
		}, `unknown action_reason "because"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := good()
			tt.change(m)
			b, _ := json.Marshal(m)
			_, err := ReadSavedPlan(bytes.NewReader(b))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ReadSavedPlan = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	b, _ := json.Marshal(good())
	sp, err := ReadSavedPlan(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*samplePlan(), sp.Plan); diff != "" {
		t.Errorf("saved plan's plan (-want +got):\n%s", diff)
	}
	// A plan saved by a gpuenv writing format 1.0 has no action_reason; it
	// is read all the same.
	old := good()
	old["format_version"] = "1.0"
	for _, s := range old["steps"].([]any) {
		delete(s.(map[string]any), "action_reason")
	}
	b, _ = json.Marshal(old)
	if _, err := ReadSavedPlan(bytes.NewReader(b)); err != nil {
		t.Errorf("a 1.0 plan: %v", err)
	}
	if IsSavedPlan([]byte("driver {\n}\n")) {
		t.Error("a spec taken for a saved plan")
	}
}

func TestIsPlanDocument(t *testing.T) {
	saved, m := savedSample(t)
	delete(m, "gpuenv_saved_plan")
	unmarked, _ := json.Marshal(m)
	plain, _ := json.Marshal(samplePlan())
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{
		{"a plan --json document", plain, true},
		{"a saved plan without its marker", unmarked, true},
		{"a saved plan", saved, false},
		{"a spec", []byte("driver {\n  version = \"550\"\n}\n"), false},
		{"other JSON", []byte(`{"driver": {"version": "550"}}`), false},
		{"broken JSON", []byte(`{"format_version": "1.0",`), false},
	} {
		if got := IsPlanDocument(tt.data); got != tt.want {
			t.Errorf("%s: IsPlanDocument = %v, want %v", tt.name, got, tt.want)
		}
	}
}
