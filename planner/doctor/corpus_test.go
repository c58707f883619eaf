package doctor_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/tools/txtar"

	"github.com/gpuenv/gpuenv/planner"
	"github.com/gpuenv/gpuenv/planner/doctor"
	"github.com/gpuenv/gpuenv/planner/facts"
	findings "github.com/gpuenv/gpuenv/planner/finding"
	"github.com/gpuenv/gpuenv/providers"
	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// corpusCase is one confirmed public report rebuilt as a root: the
// thread it comes from, the cause the thread confirmed, and what doctor
// must say about it. testdata/corpus/<name>/case.txt holds the fields as
// "key: value" lines; root.txtar the files laid over the base fixture.
type corpusCase struct {
	name   string
	source string
	cause  string
	// class is the check ID (before the subject) that names the cause;
	// check, when set, the whole ID.
	class, check string
	status       doctor.Status
	// fix is text the fix must hold: the direction that removes the
	// cause (a variable to clear, a flag to start with, a release).
	fix      []string
	base     string
	pythons  []string
	programs []string
	session  []facts.Assignment
	remove   []string
	nvml     string
	user     *doctor.User
	// elfs are real ELF objects built with gcc into the root.
	elfs []elfSpec
}

// elfSpec is "elf: PATH soname=S needs=a,b runpath=D rpath=D exe
// fatbin=sm_80,compute_90": fatbin gives the object a .nv_fatbin section
// with one container of those targets, as a CUDA library has.
type elfSpec struct {
	path, soname   string
	needs          []string
	runpath, rpath string
	exe            bool
	fatbin         []string
}

func readCase(t *testing.T, dir string) corpusCase {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "case.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := corpusCase{name: filepath.Base(dir), base: "none"}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("case.txt: %q is not key: value", line)
		}
		v = strings.TrimSpace(v)
		switch k {
		case "source":
			c.source = v
		case "cause":
			c.cause = v
		case "class":
			c.class = v
		case "check":
			c.check = v
		case "status":
			c.status = doctor.Status(v)
		case "fix":
			c.fix = append(c.fix, v)
		case "base":
			c.base = v
		case "python":
			c.pythons = append(c.pythons, v)
		case "program":
			c.programs = append(c.programs, v)
		case "session":
			name, val, _ := strings.Cut(v, "=")
			c.session = append(c.session, facts.Assignment{Name: name, Value: val})
		case "remove":
			c.remove = append(c.remove, v)
		case "nvml":
			c.nvml = v
		case "user":
			f := strings.Fields(v)
			uid, _ := strconv.Atoi(f[1])
			gid, _ := strconv.Atoi(f[2])
			c.user = &doctor.User{Name: f[0], UID: uint32(uid), GID: uint32(gid)}
		case "elf":
			c.elfs = append(c.elfs, parseELF(t, v))
		default:
			t.Fatalf("case.txt: unknown key %q", k)
		}
	}
	if c.source == "" || c.cause == "" || c.class == "" || c.status == "" || len(c.fix) == 0 {
		t.Fatalf("case.txt must name source, cause, class, status and fix")
	}
	return c
}

func parseELF(t *testing.T, v string) elfSpec {
	f := strings.Fields(v)
	e := elfSpec{path: f[0]}
	for _, kv := range f[1:] {
		k, val, _ := strings.Cut(kv, "=")
		switch k {
		case "soname":
			e.soname = val
		case "needs":
			e.needs = strings.Split(val, ",")
		case "runpath":
			e.runpath = val
		case "rpath":
			e.rpath = val
		case "exe":
			e.exe = true
		case "fatbin":
			e.fatbin = strings.Split(val, ",")
		default:
			t.Fatalf("elf: unknown field %q", k)
		}
	}
	return e
}

// buildELF compiles e into root with gcc (hosttest.BuildELF).
func buildELF(t *testing.T, root string, e elfSpec) {
	t.Helper()
	if len(e.fatbin) > 0 {
		var c []hosttest.FatbinEntry
		for _, a := range e.fatbin {
			kind, n, _ := strings.Cut(a, "_")
			sm, err := strconv.ParseUint(n, 10, 32)
			if err != nil || kind != "sm" && kind != "compute" {
				t.Fatalf("elf: fatbin target %q is not sm_N or compute_N", a)
			}
			c = append(c, hosttest.FatbinEntry{PTX: kind == "compute", SM: uint32(sm), Payload: 256})
		}
		hosttest.BuildFatbinELF(t, filepath.Join(root, e.path), e.soname, hosttest.Fatbin(c))
		return
	}
	var flags []string
	switch {
	case e.runpath != "":
		flags = []string{"-Wl,--enable-new-dtags", "-Wl,-rpath," + e.runpath}
	case e.rpath != "":
		flags = []string{"-Wl,--disable-new-dtags", "-Wl,-rpath," + e.rpath}
	}
	soname := e.soname
	if e.exe {
		soname = ""
	}
	hosttest.BuildELF(t, filepath.Join(root, e.path), soname, e.needs, flags...)
}

// report lays out the case's root and runs doctor on it.
func (c corpusCase) report(t *testing.T, dir string) *doctor.Report {
	t.Helper()
	root := t.TempDir()
	testdata := hosttest.TestdataDir(t)
	if c.base != "none" {
		if err := hosttest.BuildNamed(testdata, c.base, root); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.remove {
		if err := os.RemoveAll(filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	if ar, err := txtar.ParseFile(filepath.Join(dir, "root.txtar")); err == nil {
		if err := hosttest.BuildArchive(ar, root, testdata); err != nil {
			t.Fatal(err)
		}
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range c.elfs {
		buildELF(t, root, e)
	}
	h, err := host.New(root)
	if err != nil {
		t.Fatal(err)
	}
	opts := corpusObserveOptions(c.pythons, c.programs, c.session)
	if c.nvml != "" {
		opts.NVML = host.NewNVML(hosttest.NVMLServer(c.nvml))
	}
	obs := providers.Observe(context.Background(), h, opts)
	in := doctor.Input{Obs: obs, User: c.user, Session: c.session}
	r := doctor.Run(in)
	observeIsRunFilteredByStage(t, obs, r)
	rulesAreDeclared(t, r)
	judgeIsRunFilteredByStage(t, in, r)
	if len(c.session) == 0 {
		// The session doctor runs in is its own; plan's is not given.
		planSaysWhatDoctorSays(t, obs, c.user, r)
	}
	return r
}

// planSaysWhatDoctorSays: on each case's host, a plan that changes
// nothing warns of every finding doctor reports there, in its words, and
// of nothing else: plan judges every rule doctor has.
func planSaysWhatDoctorSays(t *testing.T, obs *facts.Observation, user *doctor.User, r *doctor.Report) {
	t.Helper()
	key := func(f findings.Finding) string { return f.ID + " " + string(f.Status) + " " + f.Summary }
	var want, got []string
	for _, c := range r.Checks {
		if c.Status.Flagged() {
			want = append(want, key(c))
		}
	}
	for _, f := range planner.EndStateFindings(providers.EndState(obs, nil), user) {
		got = append(got, key(f))
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("a plan without steps warns otherwise than doctor reports (-doctor +plan):\n%s", diff)
	}
}

// judgeIsRunFilteredByStage: plan's verdicts (Judge) are doctor's of
// stage plan, each of them, on every case's host.
func judgeIsRunFilteredByStage(t *testing.T, in doctor.Input, r *doctor.Report) {
	t.Helper()
	var want []doctor.Check
	for _, c := range r.Checks {
		if c.Stage == findings.Plan {
			want = append(want, c)
		}
	}
	if diff := cmp.Diff(want, doctor.Judge(in, findings.Plan), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Judge(plan) differs from Run's checks of stage plan (-Run +Judge):\n%s", diff)
	}
}

// rulesAreDeclared: every rule doctor reports says which command reports
// it first, so that a new rule cannot leave plan silent by default.
func rulesAreDeclared(t *testing.T, r *doctor.Report) {
	t.Helper()
	for _, c := range r.Checks {
		stage, ok := doctor.StageOf(c.ID)
		switch {
		case !ok:
			t.Errorf("rule %s is not in doctor's stages", c.ID)
		case stage != c.Stage:
			t.Errorf("rule %s is reported at stage %s, declared %s", c.ID, c.Stage, stage)
		}
	}
}

// observeIsRunFilteredByStage: observe's problems are exactly doctor's
// flagged checks of stage observe, in doctor's words and verdicts, so
// that one rule is worded and judged once.
func observeIsRunFilteredByStage(t *testing.T, obs *facts.Observation, r *doctor.Report) {
	t.Helper()
	var want findings.Problems
	for _, c := range r.Checks {
		if c.Stage == findings.Observe && c.Status.Flagged() {
			want = append(want, c)
		}
	}
	got := slices.Clone(obs.Problems)
	for i := range got {
		if got[i].Layer == "" {
			t.Errorf("observe's problem %s has no layer to be shown under", got[i].ID)
		}
		got[i].Layer = ""
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("observe's problems differ from doctor's flagged checks of stage observe (-doctor +observe):\n%s", diff)
	}
}

// diagnosed reports whether r names the case's cause with the right
// weight and a fix in the right direction, and if not, why.
func (c corpusCase) diagnosed(r *doctor.Report) (bool, string) {
	var near []string
	for _, k := range r.Checks {
		id, _, _ := strings.Cut(k.ID, ":")
		if c.check != "" && k.ID != c.check || c.check == "" && id != c.class {
			continue
		}
		if k.Status != c.status {
			near = append(near, k.ID+" is "+string(k.Status)+": "+k.Summary)
			continue
		}
		var fix string
		if k.Fix != nil {
			fix = k.Fix.Text + "\n" + k.Fix.Spec + "\n" + strings.Join(k.Fix.Commands, "\n")
		}
		if i := slices.IndexFunc(c.fix, func(w string) bool { return !strings.Contains(fix, w) }); i >= 0 {
			near = append(near, k.ID+": the fix lacks "+strconv.Quote(c.fix[i])+": "+fix)
			continue
		}
		return true, ""
	}
	if len(near) == 0 {
		var got []string
		for _, k := range r.Checks {
			if k.Status == doctor.Problem || k.Status == doctor.Warning {
				got = append(got, k.ID+" ("+string(k.Status)+"): "+k.Summary)
			}
		}
		return false, "no " + c.class + " check; the report's findings:\n  " + strings.Join(got, "\n  ")
	}
	return false, strings.Join(near, "\n")
}

// anyFix reports whether some warning or problem of r, whatever its
// check, carries a fix holding every direction of the case: the loose
// reading of "diagnosed", logged beside the strict one for comparison.
func (c corpusCase) anyFix(r *doctor.Report) bool {
	for _, k := range r.Checks {
		if k.Fix == nil || k.Status != doctor.Problem && k.Status != doctor.Warning {
			continue
		}
		fix := k.Fix.Text + "\n" + k.Fix.Spec + "\n" + strings.Join(k.Fix.Commands, "\n")
		if !slices.ContainsFunc(c.fix, func(w string) bool { return !strings.Contains(fix, w) }) {
			return true
		}
	}
	return false
}

// TestCorpus runs doctor on every rebuilt report and asserts that it
// names the cause the thread confirmed, as a problem or warning, with a
// fix that goes the right way.
func TestCorpus(t *testing.T) {
	dirs, err := filepath.Glob("testdata/corpus/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 40 {
		t.Errorf("the corpus holds %d cases, fewer than 40", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			c := readCase(t, dir)
			r := c.report(t, dir)
			t.Logf("loose: %v", c.anyFix(r))
			if ok, why := c.diagnosed(r); !ok {
				t.Errorf("%s\ncause (%s): %s\n%s", c.name, c.source, c.cause, why)
				for _, k := range r.Checks {
					if k.ID == c.check {
						t.Logf("evidence: %s", strings.Join(k.Evidence, "\n  "))
					}
				}
			}
		})
	}
}
