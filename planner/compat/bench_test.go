package compat

import (
	"errors"
	"io/fs"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/spec/version"
)

// loaders are the table loaders, each with the data files it parses.
// TestLoadersReadEveryFile keeps the list whole.
var loaders = []struct {
	files []string
	load  func() error
}{
	{[]string{"sources.tsv"}, func() error { return second(loadSources()) }},
	{[]string{"cuda_families.tsv"}, func() error { return second(loadCUDAFamilies()) }},
	{[]string{"cuda_releases.tsv"}, func() error { return second(loadCUDAReleases()) }},
	{[]string{"driver_branches.tsv"}, func() error { return second(loadBranches()) }},
	{[]string{"container_toolkit.tsv"}, func() error { return second(loadToolkit()) }},
	{[]string{"architectures.tsv"}, func() error { return second(loadArchs()) }},
	{[]string{"gpu_chips.tsv"}, func() error { return second(loadChips()) }},
	{[]string{"cuda_archs.tsv"}, func() error { return second(loadCUDAArchs()) }},
	{[]string{"gpus.tsv"}, func() error { return second(loadGPUs()) }},
	{[]string{"torch_releases.tsv", "torch_variants.tsv"}, func() error { return second(loadTorch()) }},
	{[]string{"tensorflow.tsv"}, func() error { return second(loadTensorFlow()) }},
	{[]string{"jax.tsv"}, func() error { return second(loadJAX()) }},
	{[]string{"cudnn.tsv"}, func() error { return second(loadCuDNN()) }},
	{[]string{"packages.tsv"}, func() error { return second(loadPackages()) }},
	{[]string{"distro_packages.tsv"}, func() error { return second(loadDistro()) }},
	{[]string{"framework_libraries.tsv"}, func() error { return second(loadFrameworkLibraries()) }},
}

// BenchmarkLoadAll parses every table from the embedded files, as the
// first queries of a process do.
func BenchmarkLoadAll(b *testing.B) {
	benchmarkLoad(b, func() error {
		var errs []error
		for _, l := range loaders {
			errs = append(errs, l.load())
		}
		return errors.Join(errs...)
	})
}

// TestLoadersReadEveryFile: BenchmarkLoadAll loads every table there is.
func TestLoadersReadEveryFile(t *testing.T) {
	embedded, err := fs.Glob(dataFS, "data/*.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, l := range loaders {
		for _, f := range l.files {
			loaded = append(loaded, "data/"+f)
		}
	}
	slices.Sort(loaded)
	if !slices.Equal(embedded, loaded) {
		t.Errorf("the loaders parse %v\nthe embedded tables are %v", loaded, embedded)
	}
}

// BenchmarkLoadDriverTables parses only what a driver-only plan touches.
func BenchmarkLoadDriverTables(b *testing.B) { benchmarkLoad(b, loadDriverTables) }

func benchmarkLoad(b *testing.B, load func() error) {
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		if err := load(); err != nil {
			b.Fatal(err)
		}
	}
}

func loadDriverTables() error {
	return errors.Join(second(loadSources()), second(loadCUDAFamilies()), second(loadCUDAReleases()),
		second(loadBranches()), second(loadArchs()), second(loadGPUs()))
}

func second[T any](_ T, err error) error { return err }

// reportCPU adds the process CPU time per operation to a benchmark's
// output: on a shared machine wall time per op also counts waiting for a
// CPU, CPU time does not.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTypicalPlan runs the queries a plan for a converged GPU host
// with PyTorch makes, on loaded tables.
func BenchmarkTypicalPlan(b *testing.B) {
	if err := Check(); err != nil {
		b.Fatal(err)
	}
	driver, cuda, torch := version.MustParse("550.54.15"), version.MustParse("12.4.1"), version.MustParse("2.5.1+cu124")
	cudnn := version.MustParse("9.1.0.70")
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		g, _ := GPUByPCIID(0x2330)
		_ = MaxCUDAForDriver(driver)
		_, _ = DriverSupportsCUDA(driver, cuda)
		_, _ = KernelFlavors(g.Arch, driver)
		_, _ = GPUSupportedBy(g, driver)
		_, _ = TorchVariantSupportsCC(torch, "cu124", g.CC)
		_, _ = CuDNNSupportsCUDA(cudnn, cuda)
		_, _ = Packages(PackageQuery{OS: "ubuntu", OSVersion: "22.04", Repo: RepoNVIDIA, Component: "toolkit", CUDA: cuda})
	}
}

func BenchmarkGPUByPCIID(b *testing.B) {
	must(gpuTable())
	for b.Loop() {
		GPUByPCIID(0x2901)
	}
}

func BenchmarkDriverSupportsCUDA(b *testing.B) {
	driver, cuda := version.MustParse("535.261.03"), version.MustParse("12.4")
	must(cudaReleasesTable())
	b.ReportAllocs()
	for b.Loop() {
		DriverSupportsCUDA(driver, cuda)
	}
}

func BenchmarkTorchVariantsFor(b *testing.B) {
	c := version.MustParseConstraint("2.5.*")
	must(torchTable())
	b.ReportAllocs()
	for b.Loop() {
		TorchVariantsFor(c)
	}
}
