package compat

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuenv/gpuenv/spec/lazyregexp"
	"github.com/gpuenv/gpuenv/spec/version"
)

// TorchIndexBase is the PyTorch wheel index; a variant's index is this
// followed by the variant name.
const TorchIndexBase = "https://download.pytorch.org/whl/"

// PyTorchRelease is one PyTorch minor release.
type PyTorchRelease struct {
	Release              version.Version   // "2.5"
	Patches              []version.Version // "2.5.0", "2.5.1"
	PythonMin, PythonMax version.Version   // inclusive, major.minor
	// DefaultVariant is the CUDA build a plain `pip install torch` from
	// PyPI gets on Linux x86_64; empty where not known.
	DefaultVariant string
	ROCm           string
	IndexFlag      string // pip option the install docs use: "--index-url"
	Variants       []PyTorchVariant
	Source         Source
}

// PyTorchVariant is one CUDA wheel variant of a PyTorch release.
type PyTorchVariant struct {
	Release version.Version // "2.5"
	Variant string          // "cu124"
	CUDA    version.Version // "12.4"
	CuDNN   version.Version // bundled cuDNN; zero where not known
	Stable  bool            // false: experimental in RELEASE.md
	// SASS lists the compute capabilities the wheels carry machine code
	// for; PTX the PTX targets they carry for JIT compilation.
	SASS, PTX []version.Version
	// AArch64 says whether the variant's index has Linux aarch64 wheels
	// with CUDA: "yes", "no", or "" where not known.
	AArch64 string
	Notes   string
	Source  Source
}

// FindLinks is the index_flag of releases that predate the per-variant
// indexes: pip finds their wheels through TorchFindLinksURL.
const FindLinks = "--find-links"

// TorchFindLinksURL is the page that links every wheel of the releases
// before 1.11, by local version (torch-1.3.0+cu101-...).
const TorchFindLinksURL = TorchIndexBase + "torch_stable.html"

// IndexURL returns the wheel index that serves the variant.
func (v PyTorchVariant) IndexURL() string { return TorchIndexBase + v.Variant }

// TensorFlowBuild is a TensorFlow release's tested Linux GPU configuration.
type TensorFlowBuild struct {
	Release              version.Version // "2.17.0"
	PythonMin, PythonMax version.Version
	CuDNN                version.Version // "8.9"
	CUDA                 version.Version // "12.3"
	// AndCUDA reports whether `pip install 'tensorflow[and-cuda]'` is the
	// documented GPU install (CUDA and cuDNN from pip wheels).
	AndCUDA bool
	Notes   string
	Source  Source
}

// JAXCUDA describes JAX's CUDA plugin for one CUDA major, from one JAX
// release until the next row for that major.
type JAXCUDA struct {
	From       version.Version // first jax release the row applies to
	CUDAMajor  uint64
	Extra      string // pip extra with CUDA from wheels: "cuda12" (jax[cuda12])
	LocalExtra string // pip extra using a system CUDA: "cuda12-local"
	Plugin     string // "jax-cuda12-plugin"
	PJRT       string // "jax-cuda12-pjrt"
	BuiltWith  version.Version
	MinCUDA    version.Version
	// MinCuDNN is inclusive, MaxCuDNN exclusive.
	MinCuDNN, MaxCuDNN version.Version
	MinDriver          version.Version
	MinCC              version.Version // zero: no stated floor
	Notes              string
	Source             Source
}

type torchData struct {
	releases []PyTorchRelease
}

var variantName = lazyregexp.New(`^(cpu|cu[0-9]{3,4}|rocm[0-9]+(\.[0-9]+)*)$`)

var torchTable = loaded(loadTorch)

func loadTorch() (torchData, error) {
	refs, err := sourcesTable()
	if err != nil {
		return torchData{}, err
	}
	recs, err := readTable("torch_releases.tsv", "release", "patches", "python_min", "python_max", "default_variant", "rocm", "index_flag", "source", "unverified")
	if err != nil {
		return torchData{}, err
	}
	var d decoder
	t := torchData{releases: make([]PyTorchRelease, 0, len(recs))}
	for _, r := range recs {
		rel := PyTorchRelease{
			Release:        d.requiredVersion(r, "release"),
			Patches:        d.versions(r, "patches"),
			PythonMin:      d.requiredVersion(r, "python_min"),
			PythonMax:      d.requiredVersion(r, "python_max"),
			DefaultVariant: d.str(r, "default_variant"),
			ROCm:           d.str(r, "rocm"),
			IndexFlag:      d.oneOf(r, "index_flag", "--index-url", "--extra-index-url", FindLinks),
		}
		rel.Source = d.source(r, "torch_releases", r.get("release"), refs)
		if nparts(rel.Release) != 2 {
			d.fail(r, "release", "%q must be major.minor", rel.Release)
		}
		if len(rel.Patches) == 0 {
			d.fail(r, "patches", "is empty")
		}
		for _, p := range rel.Patches {
			if !mm(p).Equal(rel.Release) || nparts(p) != 3 {
				d.fail(r, "patches", "%s is not a patch release of %s", p, rel.Release)
			}
		}
		if !slices.IsSortedFunc(rel.Patches, version.Version.Compare) {
			d.fail(r, "patches", "must be in ascending order")
		}
		if n := len(t.releases); n > 0 && t.releases[n-1].Release.Compare(rel.Release) >= 0 {
			d.fail(r, "release", "rows must be sorted by release without duplicates")
		}
		t.releases = append(t.releases, rel)
	}
	if d.err != nil {
		return t, d.err
	}
	recs, err = readTable("torch_variants.tsv", "release", "variant", "cuda", "cudnn", "status", "sass", "ptx", "aarch64", "notes", "source", "unverified")
	if err != nil {
		return torchData{}, err
	}
	for _, r := range recs {
		v := PyTorchVariant{
			Release: d.requiredVersion(r, "release"),
			Variant: d.required(r, "variant"),
			CUDA:    d.requiredVersion(r, "cuda"),
			CuDNN:   d.version(r, "cudnn"),
			Stable:  d.oneOf(r, "status", "stable", "experimental") == "stable",
			SASS:    d.versions(r, "sass"),
			PTX:     d.versions(r, "ptx"),
			AArch64: d.oneOf(r, "aarch64", "yes", "no", ""),
			Notes:   d.str(r, "notes"),
		}
		v.Source = d.source(r, "torch_variants", r.get("release")+"/"+v.Variant, refs)
		if want := cudaVariant(v.CUDA); v.Variant != want {
			d.fail(r, "variant", "%q does not match CUDA %s (want %q)", v.Variant, v.CUDA, want)
		}
		if len(v.SASS) == 0 {
			d.fail(r, "sass", "is empty")
		}
		i := slices.IndexFunc(t.releases, func(rel PyTorchRelease) bool { return rel.Release.Equal(v.Release) })
		if i < 0 {
			d.fail(r, "release", "%s is not in torch_releases.tsv", v.Release)
			continue
		}
		vs := t.releases[i].Variants
		if n := len(vs); n > 0 && vs[n-1].CUDA.Compare(v.CUDA) >= 0 {
			d.fail(r, "cuda", "a release's variants must be sorted by CUDA without duplicates")
		}
		t.releases[i].Variants = append(vs, v)
	}
	for _, rel := range t.releases {
		if rel.DefaultVariant != "" && !slices.ContainsFunc(rel.Variants, func(v PyTorchVariant) bool { return v.Variant == rel.DefaultVariant }) {
			d.fail(record{file: "torch_releases.tsv", line: rel.Source.Line}, "default_variant", "%q is not a variant of %s", rel.DefaultVariant, rel.Release)
		}
	}
	return t, d.err
}

// cudaVariant names the PyTorch variant of a CUDA version: "cu124".
func cudaVariant(cuda version.Version) string {
	return "cu" + strconv.FormatUint(cuda.Major(), 10) + strconv.FormatUint(cuda.Minor(), 10)
}

// TorchVariantName returns the PyTorch wheel variant built for a CUDA
// version: "cu124" for 12.4.
func TorchVariantName(cuda version.Version) string { return cudaVariant(cuda) }

// TorchReleases returns every PyTorch release, oldest first.
func TorchReleases() []PyTorchRelease { return slices.Clone(must(torchTable()).releases) }

// TorchRelease returns the release a PyTorch version belongs to: "2.5" and
// "2.5.1+cu124" both give 2.5. A three-part version must be one of the
// release's published patches.
func TorchRelease(v version.Version) (PyTorchRelease, error) {
	for _, rel := range must(torchTable()).releases {
		if !rel.Release.Equal(mm(v)) {
			continue
		}
		if nparts(v) >= 3 && !slices.ContainsFunc(rel.Patches, v.Trunc(3).Equal) {
			return PyTorchRelease{}, fmt.Errorf("torch %s is not a published release of %s (%s): %w", v, rel.Release, joinVersions(rel.Patches), ErrUnknown)
		}
		return rel, nil
	}
	return PyTorchRelease{}, fmt.Errorf("torch %s: %w", v, ErrUnknown)
}

// TorchVariant returns one variant of the release v belongs to.
func TorchVariant(v version.Version, variant string) (PyTorchVariant, error) {
	rel, err := TorchRelease(v)
	if err != nil {
		return PyTorchVariant{}, err
	}
	for _, x := range rel.Variants {
		if x.Variant == variant {
			return x, nil
		}
	}
	names := make([]string, len(rel.Variants))
	for i, x := range rel.Variants {
		names[i] = x.Variant
	}
	return PyTorchVariant{}, fmt.Errorf("torch %s is published for %s, not %s (%s): %w", rel.Release, strings.Join(names, ", "), variant, rel.Source, ErrUnknown)
}

// TorchVariantsFor returns the CUDA variants of every release with a
// published patch that satisfies c, oldest release first; "2.5.*" gives
// 2.5's cu118, cu121 and cu124.
func TorchVariantsFor(c version.Constraint) []PyTorchVariant {
	var out []PyTorchVariant
	for _, rel := range must(torchTable()).releases {
		if slices.ContainsFunc(rel.Patches, c.Check) {
			out = append(out, rel.Variants...)
		}
	}
	return out
}

// TorchIndexURL returns the wheel index for a variant ("cpu", "cu124",
// "rocm6.2").
func TorchIndexURL(variant string) (string, error) {
	if !variantName.MatchString(variant) {
		return "", fmt.Errorf("%q is not a PyTorch wheel variant (cpu, cuXYZ or rocmX.Y)", variant)
	}
	u := TorchIndexBase + variant
	if _, err := url.Parse(u); err != nil {
		return "", fmt.Errorf("index for %q: %w", variant, err)
	}
	return u, nil
}

// TorchVariantSupportsCC reports whether a variant's wheels run on a GPU of
// compute capability cc, and how or why not.
func TorchVariantSupportsCC(release version.Version, variant string, cc version.Version) (bool, string) {
	v, err := TorchVariant(release, variant)
	if err != nil {
		return false, err.Error()
	}
	ok, how := ccCovered(v.SASS, v.PTX, v.CUDA, cc)
	if !ok {
		return false, fmt.Sprintf("torch %s %s carries code for %s, none of which runs on compute capability %s (%s)", v.Release, v.Variant, smList(v.SASS, v.PTX), mm(cc), v.Source)
	}
	return true, how
}

// ccCovered applies CUDA's binary compatibility rules: machine code for
// X.y runs on X.z with z >= y (same major), and PTX for a capability is
// compiled at load time for any equal or newer one that the build's CUDA
// release targets (its bundled libraries have no code for later GPUs).
func ccCovered(sass, ptx []version.Version, cuda, cc version.Version) (bool, string) {
	cc = mm(cc)
	best := version.Version{}
	for _, s := range sass {
		if s.Major() == cc.Major() && s.Minor() <= cc.Minor() && s.Compare(best) > 0 {
			best = s
		}
	}
	if !best.IsZero() {
		return true, "machine code for sm_" + smDigits(best)
	}
	if ok, _ := CUDATargets(cuda, cc); !ok && !cuda.IsZero() {
		return false, ""
	}
	for _, p := range slices.Backward(ptx) {
		if p.Compare(cc) <= 0 {
			return true, "PTX for compute_" + smDigits(p) + ", compiled when loaded"
		}
	}
	return false, ""
}

func smDigits(v version.Version) string {
	return strconv.FormatUint(v.Major(), 10) + strconv.FormatUint(v.Minor(), 10)
}

func smList(sass, ptx []version.Version) string {
	var parts []string
	for _, s := range sass {
		parts = append(parts, "sm_"+smDigits(s))
	}
	for _, p := range ptx {
		parts = append(parts, "compute_"+smDigits(p))
	}
	return strings.Join(parts, ", ")
}

func joinVersions(vs []version.Version) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = v.String()
	}
	return strings.Join(s, ", ")
}

var tensorflowTable = loaded(loadTensorFlow)

func loadTensorFlow() ([]TensorFlowBuild, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("tensorflow.tsv", "release", "python_min", "python_max", "cudnn", "cuda", "and_cuda", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]TensorFlowBuild, 0, len(recs))
	for _, r := range recs {
		b := TensorFlowBuild{
			Release:   d.requiredVersion(r, "release"),
			PythonMin: d.requiredVersion(r, "python_min"),
			PythonMax: d.requiredVersion(r, "python_max"),
			CuDNN:     d.requiredVersion(r, "cudnn"),
			CUDA:      d.requiredVersion(r, "cuda"),
			AndCUDA:   d.yesNo(r, "and_cuda"),
			Notes:     d.str(r, "notes"),
		}
		b.Source = d.source(r, "tensorflow", r.get("release"), refs)
		if n := len(rows); n > 0 && mm(rows[n-1].Release).Compare(mm(b.Release)) >= 0 {
			d.fail(r, "release", "rows must be sorted, one per minor release")
		}
		rows = append(rows, b)
	}
	return rows, d.err
}

// TensorFlowReleases returns every TensorFlow build row, oldest first.
func TensorFlowReleases() []TensorFlowBuild { return slices.Clone(must(tensorflowTable())) }

// TensorFlowRelease returns the tested configuration of the minor release
// v belongs to ("2.17.1" gives 2.17.0's row).
func TensorFlowRelease(v version.Version) (TensorFlowBuild, error) {
	for _, b := range must(tensorflowTable()) {
		if mm(b.Release).Equal(mm(v)) {
			return b, nil
		}
	}
	return TensorFlowBuild{}, fmt.Errorf("tensorflow %s: %w", v, ErrUnknown)
}

var jaxTable = loaded(loadJAX)

func loadJAX() ([]JAXCUDA, error) {
	refs, err := sourcesTable()
	if err != nil {
		return nil, err
	}
	recs, err := readTable("jax.tsv", "from", "cuda_major", "extra", "local_extra", "plugin", "pjrt", "built_with", "min_cuda", "min_cudnn", "max_cudnn", "min_driver", "min_cc", "notes", "source", "unverified")
	if err != nil {
		return nil, err
	}
	var d decoder
	rows := make([]JAXCUDA, 0, len(recs))
	for _, r := range recs {
		j := JAXCUDA{
			From:       d.requiredVersion(r, "from"),
			CUDAMajor:  d.uint(r, "cuda_major"),
			Extra:      d.required(r, "extra"),
			LocalExtra: d.required(r, "local_extra"),
			Plugin:     d.required(r, "plugin"),
			PJRT:       d.required(r, "pjrt"),
			BuiltWith:  d.requiredVersion(r, "built_with"),
			MinCUDA:    d.requiredVersion(r, "min_cuda"),
			MinCuDNN:   d.requiredVersion(r, "min_cudnn"),
			MaxCuDNN:   d.requiredVersion(r, "max_cudnn"),
			MinDriver:  d.requiredVersion(r, "min_driver"),
			MinCC:      d.version(r, "min_cc"),
			Notes:      d.str(r, "notes"),
		}
		j.Source = d.source(r, "jax", r.get("from")+"/cuda"+r.get("cuda_major"), refs)
		if j.MinCUDA.Major() != j.CUDAMajor || j.BuiltWith.Major() != j.CUDAMajor {
			d.fail(r, "min_cuda", "CUDA versions must belong to CUDA %d", j.CUDAMajor)
		}
		if j.MinCuDNN.Compare(j.MaxCuDNN) >= 0 {
			d.fail(r, "max_cudnn", "must be above min_cudnn")
		}
		if n := len(rows); n > 0 {
			p := rows[n-1]
			if c := p.From.Compare(j.From); c > 0 || c == 0 && p.CUDAMajor >= j.CUDAMajor {
				d.fail(r, "from", "rows must be sorted by from, then cuda_major, without duplicates")
			}
		}
		rows = append(rows, j)
	}
	return rows, d.err
}

// JAXPlugins returns every JAX CUDA row, oldest first.
func JAXPlugins() []JAXCUDA { return slices.Clone(must(jaxTable())) }

// JAXPlugin returns the CUDA plugin facts in force for a JAX release and
// CUDA major.
func JAXPlugin(jax version.Version, cudaMajor uint64) (JAXCUDA, error) {
	var found JAXCUDA
	for _, j := range must(jaxTable()) {
		if j.CUDAMajor == cudaMajor && j.From.Compare(jax) <= 0 {
			found = j
		}
	}
	if found.From.IsZero() {
		return JAXCUDA{}, fmt.Errorf("jax %s has no CUDA %d plugin: %w", jax, cudaMajor, ErrUnknown)
	}
	return found, nil
}

// JAXPluginsFor returns, for each CUDA major JAX release jax supports,
// the row in force, by CUDA major.
func JAXPluginsFor(jax version.Version) []JAXCUDA {
	var out []JAXCUDA
	seen := map[uint64]bool{}
	for _, j := range must(jaxTable()) {
		if seen[j.CUDAMajor] {
			continue
		}
		seen[j.CUDAMajor] = true
		if p, err := JAXPlugin(jax, j.CUDAMajor); err == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b JAXCUDA) int { return int(a.CUDAMajor) - int(b.CUDAMajor) })
	return out
}
