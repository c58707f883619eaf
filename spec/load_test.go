package spec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/spec/version"
)

const fullSpec = `driver {
  version           = "550.*"
  kernel_modules    = "open"
  source            = "nvidia"
  persistence_mode  = true
  blacklist_nouveau = true
  hold              = false
}

cuda {
  version         = "12.4"
  source          = "nvidia"
  path            = "/usr/local/cuda-12.4/"
  set_environment = true
}

cudnn {
  version = "9.1.0.70"
  source  = "nvidia"
}

framework "pytorch" {
  version   = "2.5.1+cu124"
  venv      = "/opt/torch"
  cuda      = "12.4"
}

framework "jax" {
  python    = "/opt/jax/bin/python"
  extras    = ["cuda12"]
  index_url = "file:///srv/wheels"
}

repository "cuda" {
  url      = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
  keyring  = "/usr/share/keyrings/cuda-archive-keyring.gpg"
  priority = 600

  key_fingerprint = "7d5a b3c8 ea6e 6296 c742  f610 4948 e015 6f69 5994"
}

group "video" {
  members   = ["alice", "bob"]
  exclusive = true
}

environment {
  cuda_visible_devices = ["1", "GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d", "MIG-GPU-5d5a1ee2-2f2a-4b33-9ac3-5b3e8f1b2c4d/1/0", "MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c"]
  cuda_device_order    = "PCI_BUS_ID"
  variables = {
    HF_HOME = "/data/hf cache"
  }
}

device "all" {
  compute_mode = "exclusive_process"
}

device "0" {
  absent = true
}
`

func TestLoadEveryBlock(t *testing.T) {
	s := mustLoad(t, fullSpec)

	if got, want := s.Paths, []string{"spec.hcl"}; !cmp.Equal(got, want) {
		t.Errorf("Paths = %v, want %v", got, want)
	}
	d := s.Driver
	if d == nil {
		t.Fatal("Driver is nil")
	}
	if v, ok := d.Version.Get(); !ok || v.String() != "550.*" || !v.Check(version.MustParse("550.54.15")) || v.Check(version.MustParse("555.42.02")) {
		t.Errorf("Driver.Version = %v (set %v)", v, ok)
	}
	if d.KernelModules.Or("") != KernelModulesOpen || d.Source.Or("") != SourceNVIDIA {
		t.Errorf("Driver flavour/source = %q/%q", d.KernelModules.Value, d.Source.Value)
	}
	if !d.PersistenceMode.Value || !d.BlacklistNouveau.Value {
		t.Errorf("Driver booleans = %+v %+v", d.PersistenceMode, d.BlacklistNouveau)
	}
	// hold = false is set and false, which is not the same as left out.
	if !d.Hold.Set || d.Hold.Value {
		t.Errorf("Driver.Hold = %+v, want set to false", d.Hold)
	}
	if got := d.DefRange.String(); got != "spec.hcl:1,1-7" {
		t.Errorf("Driver.DefRange = %s", got)
	}
	if got := d.Version.Range.String(); got != "spec.hcl:2,23-30" {
		t.Errorf("Driver.Version.Range = %s", got)
	}

	c := s.CUDA
	if c.Path.Value != "/usr/local/cuda-12.4" || !c.SetEnvironment.Value || c.Version.Value.String() != "12.4" {
		t.Errorf("CUDA = %+v", c)
	}
	if !c.Version.Value.Check(version.MustParse("12.4.1")) {
		t.Error(`cuda version "12.4" does not accept 12.4.1`)
	}
	if v, ok := s.CuDNN.Version.Value.Exact(); !ok || v.String() != "9.1.0.70" {
		t.Errorf("CuDNN.Version.Exact() = %v, %v", v, ok)
	}

	if len(s.Frameworks) != 2 {
		t.Fatalf("got %d frameworks", len(s.Frameworks))
	}
	torch, jax := s.Frameworks[0], s.Frameworks[1]
	if torch.Name != PyTorch || torch.Venv.Value != "/opt/torch" || torch.Python.Set || torch.CUDA.Value.String() != "12.4" {
		t.Errorf("pytorch = %+v", torch)
	}
	if got := torch.EffectiveIndexURL(); got != "https://download.pytorch.org/whl/cu124" {
		t.Errorf("pytorch index = %s", got)
	}
	if got := torch.NameRange.String(); got != "spec.hcl:22,11-20" {
		t.Errorf("pytorch NameRange = %s", got)
	}
	if jax.Name != JAX || jax.Python.Value != "/opt/jax/bin/python" || !cmp.Equal(jax.Extras.Value, []string{"cuda12"}) {
		t.Errorf("jax = %+v", jax)
	}
	if got := jax.EffectiveIndexURL(); got != "file:///srv/wheels" {
		t.Errorf("jax index = %s", got)
	}
	if jax.Source.Set || jax.Source.Or(DefaultFrameworkSource) != SourcePip {
		t.Errorf("jax source = %+v", jax.Source)
	}

	repo := s.Repositories[0]
	if repo.Name != "cuda" || repo.Priority.Value != 600 || repo.Suites.Set || !cmp.Equal(repo.Suites.Or(DefaultSuites), []string{"/"}) {
		t.Errorf("repository = %+v", repo)
	}
	if repo.Keyring.Value != "/usr/share/keyrings/cuda-archive-keyring.gpg" {
		t.Errorf("keyring = %q", repo.Keyring.Value)
	}
	// gpg's groups of four, in any case, are compared as one word.
	if repo.KeyFingerprint.Value != "7D5AB3C8EA6E6296C742F6104948E0156F695994" {
		t.Errorf("key_fingerprint = %q", repo.KeyFingerprint.Value)
	}

	g := s.Groups[0]
	if g.Name != "video" || !cmp.Equal(g.Members.Value, []string{"alice", "bob"}) || !g.Exclusive.Value {
		t.Errorf("group = %+v", g)
	}

	e := s.Environment
	if len(e.CUDAVisibleDevices.Value) != 4 || e.CUDADeviceOrder.Value != DeviceOrderPCIBusID {
		t.Errorf("environment = %+v", e)
	}
	if !cmp.Equal(e.Variables.Value, map[string]string{"HF_HOME": "/data/hf cache"}) {
		t.Errorf("variables = %v", e.Variables.Value)
	}

	if len(s.Devices) != 2 || s.Devices[0].Selector != AllDevices || s.Devices[0].ComputeMode.Value != ComputeModeExclusiveProcess {
		t.Errorf("devices = %+v", s.Devices)
	}
	if !s.Devices[1].IsAbsent() || s.Devices[0].IsAbsent() {
		t.Errorf("device absent = %v, %v", s.Devices[0].IsAbsent(), s.Devices[1].IsAbsent())
	}
}

// What the spec leaves out stays unset, so the planner leaves it alone;
// null counts as left out.
func TestUnsetAndNull(t *testing.T) {
	s := mustLoad(t, `driver {
  version = null
  hold    = false
}
group "render" {
  members = []
}
`)
	if s.CUDA != nil || s.CuDNN != nil || s.Environment != nil || len(s.Frameworks) != 0 || len(s.Devices) != 0 {
		t.Errorf("blocks the spec does not name were decoded: %+v", s)
	}
	d := s.Driver
	if d.Version.Set || d.KernelModules.Set || d.Source.Set || d.PersistenceMode.Set || d.BlacklistNouveau.Set || d.Absent.Set {
		t.Errorf("driver attributes set that the spec did not set: %+v", d)
	}
	if !d.Hold.Set || d.Hold.Value {
		t.Errorf("hold = %+v, want set to false", d.Hold)
	}
	if d.Hold.Range.String() != "spec.hcl:3,13-18" {
		t.Errorf("hold range = %s", d.Hold.Range)
	}
	if d.Version.Range != (hcl.Range{}) {
		t.Errorf("unset attribute has range %s", d.Version.Range)
	}
	m := s.Groups[0].Members
	if !m.Set || len(m.Value) != 0 {
		t.Errorf("members = [] decoded as %+v, want set and empty", m)
	}
	if s.Groups[0].Exclusive.Or(false) {
		t.Error("exclusive defaults to true")
	}
}

func TestDirectorySpec(t *testing.T) {
	files := map[string]string{
		"b-driver.hcl":  "driver {\n  version = local.branch\n}\n",
		"a-locals.hcl":  "locals {\n  branch = \"${var.branch}.*\"\n}\n",
		"c-vars.hcl":    "variable \"branch\" {\n  default = \"550\"\n}\n",
		".hidden.hcl":   "this is not HCL",
		"notes.txt":     "not a spec file",
		"backup.hcl~":   "drivr {}",
		"sub/other.hcl": "drivr {}",
	}
	s, diags := loadFiles(t, files, ".", LoadOptions{})
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diagsOf(diags))
	}
	if want := []string{"a-locals.hcl", "b-driver.hcl", "c-vars.hcl"}; !cmp.Equal(s.Paths, want) {
		t.Errorf("Paths = %v, want %v", s.Paths, want)
	}
	if got := s.Driver.Version.Value.String(); got != "550.*" {
		t.Errorf("driver version = %q", got)
	}
	if got := s.Driver.DefRange.Filename; got != "b-driver.hcl" {
		t.Errorf("driver range file = %q", got)
	}
	for _, p := range s.Paths {
		if s.Files[p] == nil {
			t.Errorf("Files lacks %s", p)
		}
	}
}

// Values come from the default, then GPUENV_VAR_, then var files in order,
// then --var: each overrides the one before.
func TestVariablePrecedence(t *testing.T) {
	src := `variable "a" {
  default = "default"
}
variable "b" {
  default = "default"
}
variable "c" {
  default = "default"
}
variable "d" {
  default = "default"
}
variable "e" {
  default = "default"
}
`
	files := map[string]string{
		"spec.hcl":   src,
		"one.hclvar": "c = \"file one\"\nd = \"file one\"\ne = \"file one\"\n",
		"two.hclvar": "d = \"file two\"\ne = \"file two\"\n",
	}
	s, diags := loadFiles(t, files, "spec.hcl", LoadOptions{
		Environ:  []string{"PATH=/bin", "GPUENV_VAR_b=env", "GPUENV_VAR_c=env", "GPUENV_VAR_e=env", "GPUENV_VAR_undeclared=x"},
		VarFiles: []string{"one.hclvar", "two.hclvar"},
		Vars:     map[string]string{"e": "flag"},
	})
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diagsOf(diags))
	}
	want := map[string]struct {
		value string
		from  ValueSource
	}{
		"a": {"default", FromDefault},
		"b": {"env", FromEnvironment},
		"c": {"file one", FromVarFile},
		"d": {"file two", FromVarFile},
		"e": {"flag", FromCommandLine},
	}
	for _, v := range s.Variables {
		w := want[v.Name]
		if v.Value.AsString() != w.value || v.ValueFrom != w.from {
			t.Errorf("var.%s = %q from %s, want %q from %s", v.Name, v.Value.AsString(), v.ValueFrom, w.value, w.from)
		}
	}
	// The var files are kept for rendering diagnostics that point into them.
	if s.Files["one.hclvar"] == nil {
		t.Error("Files lacks the var file")
	}
}

func TestVariableTypes(t *testing.T) {
	src := `variable "devices" {
  type        = list(string)
  description = "GPUs CUDA may use"
}
variable "persist" {
  type    = bool
  default = false
}
variable "count" {
  type = number
}
variable "anything" {
}
environment {
  cuda_visible_devices = var.devices
}
driver {
  persistence_mode = var.persist
}
`
	s, diags := loadFiles(t, map[string]string{"spec.hcl": src}, "spec.hcl", LoadOptions{
		Vars:    map[string]string{"devices": `["0", "1"]`, "count": "2", "anything": "[1]"},
		Environ: []string{"GPUENV_VAR_persist=true"},
	})
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diagsOf(diags))
	}
	if got := s.Environment.CUDAVisibleDevices.Value; !cmp.Equal(got, []string{"0", "1"}) {
		t.Errorf("cuda_visible_devices = %v", got)
	}
	if !s.Driver.PersistenceMode.Value {
		t.Error("persistence_mode from GPUENV_VAR_persist=true is false")
	}
	byName := map[string]*Variable{}
	for _, v := range s.Variables {
		byName[v.Name] = v
	}
	if byName["devices"].Description != "GPUs CUDA may use" {
		t.Errorf("description = %q", byName["devices"].Description)
	}
	if !byName["count"].Value.RawEquals(cty.NumberIntVal(2)) {
		t.Errorf("count = %#v", byName["count"].Value)
	}
	// A variable without a type takes command-line text as a string.
	if !byName["anything"].Value.RawEquals(cty.StringVal("[1]")) {
		t.Errorf("anything = %#v", byName["anything"].Value)
	}
}

func TestLocalsAndFunctions(t *testing.T) {
	s := mustLoad(t, `variable "cuda" {
  default = "12.6"
}
locals {
  tag     = "cu${replace(var.cuda, ".", "")}"
  torch   = local.cuda_is_new ? "2.6.0+${local.tag}" : "2.5.1+${local.tag}"
  cuda_is_new = var.cuda == "12.6"
  members = sort(distinct(concat(["bob"], split(",", "alice,bob"))))
  order   = upper(lower("pci_bus_id"))
  n       = length(local.members) + length("ab") + max(1, 4)
}
framework "pytorch" {
  version = local.torch
  venv    = format("/opt/%s", join("-", ["torch", local.tag]))
}
group "video" {
  members = local.members
}
environment {
  cuda_device_order = local.order
  variables = {
    N = tostring(local.n)
  }
}
`)
	if got := s.Frameworks[0].Version.Value.String(); got != "2.6.0+cu126" {
		t.Errorf("torch version = %q", got)
	}
	if got := s.Frameworks[0].Venv.Value; got != "/opt/torch-cu126" {
		t.Errorf("venv = %q", got)
	}
	if got := s.Groups[0].Members.Value; !cmp.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("members = %v", got)
	}
	if got := s.Environment.Variables.Value["N"]; got != "8" {
		t.Errorf("N = %q", got)
	}
	if got := s.Environment.CUDADeviceOrder.Value; got != DeviceOrderPCIBusID {
		t.Errorf("order = %q", got)
	}
	if got := s.Locals["tag"]; !got.RawEquals(cty.StringVal("cu126")) {
		t.Errorf("local.tag = %#v", got)
	}
}

// A failing local reports once: what refers to it is not reported again.
func TestFailedLocalReportsOnce(t *testing.T) {
	_, diags := loadSrc(t, `locals {
  bad  = upper(1, 2)
  uses = "${local.bad}x"
}
cuda {
  version = local.uses
}
`)
	if len(diags) != 1 || diags[0].Summary != "Too many function arguments" {
		t.Errorf("diagnostics = %v", diagsOf(diags))
	}
}

func TestFunctionNames(t *testing.T) {
	want := []string{
		"abs", "ceil", "chomp", "coalesce", "coalescelist", "compact", "concat", "contains",
		"distinct", "element", "flatten", "floor", "format", "formatlist", "join", "keys",
		"length", "lookup", "lower", "max", "merge", "min", "regex", "regexall", "replace",
		"reverse", "slice", "sort", "split", "strrev", "substr", "title", "tobool", "tolist",
		"tomap", "tonumber", "toset", "tostring", "trim", "trimprefix", "trimspace",
		"trimsuffix", "upper", "values", "zipmap",
	}
	if diff := cmp.Diff(want, FunctionNames()); diff != "" {
		t.Errorf("FunctionNames (-want +got):\n%s", diff)
	}
	s := mustLoad(t, `locals {
  l1 = length(["a", "b", "c"])
  l2 = length({ a = 1 })
  l3 = length("héllo")
  f  = format("%05d", 7)
  c  = coalesce(null, "x")
}
`)
	wants := map[string]cty.Value{
		"l1": cty.NumberIntVal(3),
		"l2": cty.NumberIntVal(1),
		"l3": cty.NumberIntVal(5),
		"f":  cty.StringVal("00007"),
		"c":  cty.StringVal("x"),
	}
	for name, w := range wants {
		if got := s.Locals[name]; !got.RawEquals(w) {
			t.Errorf("local.%s = %#v, want %#v", name, got, w)
		}
	}
}

func TestFrameworksPerEnvironment(t *testing.T) {
	s := mustLoad(t, `framework "pytorch" {
  venv = "/opt/a"
}
framework "pytorch" {
  venv = "/opt/b"
}
framework "pytorch" {
  python = "/opt/c/bin/python"
}
framework "pytorch" {
  source = "distro"
}
framework "tensorflow" {
  venv = "/opt/a"
}
`)
	if len(s.Frameworks) != 5 {
		t.Errorf("got %d frameworks, want 5", len(s.Frameworks))
	}
}

func TestAbsentBlocks(t *testing.T) {
	s := mustLoad(t, `driver {
  absent = true
  source = "nvidia"
}
cuda {
  absent = true
  path   = "/usr/local/cuda-11.8"
}
cudnn {
  absent = true
}
framework "pytorch" {
  absent = true
  venv   = "/opt/torch"
}
repository "old" {
  absent = true
}
group "video" {
  absent = true
}
environment {
  absent = true
}
`)
	blocks := []*Block{&s.Driver.Block, &s.CUDA.Block, &s.CuDNN.Block, &s.Frameworks[0].Block, &s.Repositories[0].Block, &s.Groups[0].Block, &s.Environment.Block}
	for i, b := range blocks {
		if !b.IsAbsent() {
			t.Errorf("block %d is not absent", i)
		}
	}
}

// Versions keep the text they were written with: a driver's 535.261.03 is
// not 535.261.3, and four-part cuDNN versions work in constraints.
func TestVersionsKeepTheirText(t *testing.T) {
	s := mustLoad(t, `driver {
  version = "535.261.03"
}
cudnn {
  version = "~8.9.7"
}
`)
	v, ok := s.Driver.Version.Value.Exact()
	if !ok || v.String() != "535.261.03" {
		t.Errorf("driver pin = %q (exact %v)", v, ok)
	}
	c := s.CuDNN.Version.Value
	if !c.Check(version.MustParse("8.9.7.29")) || c.Check(version.MustParse("8.10.0")) || c.Check(version.MustParse("9.1.0.70")) {
		t.Errorf("cudnn constraint %q", c)
	}
}

// A spec loaded from the sources an earlier Load read is that spec, though
// its files and var files changed or went away since.
func TestLoadSaved(t *testing.T) {
	dir := t.TempDir()
	specFile := filepath.Join(dir, "a.hcl")
	varFile := filepath.Join(dir, "prod.vars")
	write := func(name, content string) {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(specFile, "variable \"cuda\" {}\n\ncuda {\n  version = var.cuda\n}\n")
	write(varFile, "cuda = \"12.4\"\n")
	first, diags := Load(dir, LoadOptions{VarFiles: []string{varFile}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := Sources{
		Files:    []SourceFile{{Name: specFile, Bytes: []byte("variable \"cuda\" {}\n\ncuda {\n  version = var.cuda\n}\n")}},
		VarFiles: []SourceFile{{Name: varFile, Bytes: []byte("cuda = \"12.4\"\n")}},
	}
	if d := cmp.Diff(want, first.Sources); d != "" {
		t.Fatalf("sources (-want +got):\n%s", d)
	}

	write(specFile, "cuda {\n  version = \"11.8\"\n}\n")
	os.Remove(varFile)
	again, diags := Load(filepath.Join(dir, "elsewhere"), LoadOptions{VarFiles: []string{"ignored"}, Saved: &first.Sources})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := again.CUDA.Version.Value.String(); got != "12.4" {
		t.Errorf("cuda version from the saved sources: %s, want 12.4", got)
	}
	if d := cmp.Diff(first.Sources, again.Sources); d != "" {
		t.Errorf("sources read again (-first +again):\n%s", d)
	}
	if d := cmp.Diff(first.Paths, again.Paths); d != "" {
		t.Errorf("paths (-first +again):\n%s", d)
	}

	_, diags = Load(dir, LoadOptions{Saved: &Sources{}})
	if !diags.HasErrors() || diags[0].Summary != "No spec files" {
		t.Errorf("no saved files: %v", diags)
	}
}
