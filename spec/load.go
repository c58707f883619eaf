package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/gpuenv/gpuenv/internal/regular"
)

// LoadOptions carries values for the spec's input variables from outside the
// spec. When several give a value for the same variable, the later one in
// this list wins: a variable's default, then Environ, then VarFiles in order,
// then Vars.
type LoadOptions struct {
	// Vars are --var name=value assignments.
	Vars map[string]string
	// VarFiles are --var-file files: HCL files of name = value attributes.
	VarFiles []string
	// Environ is the process environment as os.Environ returns it;
	// GPUENV_VAR_<name>=value sets variable <name>.
	Environ []string
	// Saved, when set, holds the spec's files and var files as an earlier
	// Load read them (Spec.Sources, kept in a saved plan): Load reads
	// these bytes instead of the file system, its path argument and
	// VarFiles are not used, and the spec is the one read then however
	// the files changed since.
	Saved *Sources
}

// Sources are the bytes of every file a spec was loaded from, by the
// names Load read them under, in the order it read them.
type Sources struct {
	// Files are the spec files.
	Files []SourceFile
	// VarFiles are the --var-file files.
	VarFiles []SourceFile
}

// SourceFile is one file a spec was loaded from.
type SourceFile struct {
	Name  string
	Bytes []byte
}

// EnvPrefix starts the name of an environment variable that sets an input
// variable.
const EnvPrefix = "GPUENV_VAR_"

// FileExt is the extension of spec files read from a directory.
const FileExt = ".hcl"

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "driver"},
		{Type: "cuda"},
		{Type: "cudnn"},
		{Type: "framework", LabelNames: []string{"name"}},
		{Type: "repository", LabelNames: []string{"name"}},
		{Type: "group", LabelNames: []string{"name"}},
		{Type: "environment"},
		{Type: "team", LabelNames: []string{"group"}},
		{Type: "device", LabelNames: []string{"selector"}},
		{Type: "mig", LabelNames: []string{"selector"}},
		{Type: "container_toolkit"},
	},
}

// Load reads the spec at path: a spec file, or a directory whose *.hcl files
// (sorted by name, hidden files skipped) form one spec together.
//
// It reports every problem it finds. The returned Spec is never nil, and its
// Files always hold what was parsed, for rendering the diagnostics; when the
// diagnostics contain errors, the rest of the Spec is incomplete and must not
// be acted on.
func Load(path string, opts LoadOptions) (*Spec, hcl.Diagnostics) {
	l := &loader{
		parser: hclparse.NewParser(),
		spec:   &Spec{Locals: map[string]cty.Value{}},
		opts:   opts,
	}
	l.load(path)
	l.spec.Files = l.parser.Files()
	return l.spec, boundDiagnostics(l.diags)
}

type loader struct {
	parser *hclparse.Parser
	spec   *Spec
	opts   LoadOptions
	diags  hcl.Diagnostics
	ctx    *hcl.EvalContext

	vars      map[string]*Variable
	localDefs map[string]*hcl.Attribute
}

func (l *loader) errorf(subject *hcl.Range, summary, detail string, args ...any) {
	l.report(hcl.DiagError, subject, summary, fmt.Sprintf(detail, args...))
}

func (l *loader) warnf(subject *hcl.Range, summary, detail string, args ...any) {
	l.report(hcl.DiagWarning, subject, summary, fmt.Sprintf(detail, args...))
}

func (l *loader) report(sev hcl.DiagnosticSeverity, subject *hcl.Range, summary, detail string) {
	l.diags = append(l.diags, &hcl.Diagnostic{Severity: sev, Summary: summary, Detail: detail, Subject: subject})
}

func (l *loader) load(path string) {
	paths, ok := l.specFiles(path)
	if !ok {
		return
	}
	l.spec.Paths = paths

	var files []*hcl.File
	for _, p := range paths {
		f, diags := l.parseFile(p)
		l.diags = append(l.diags, diags...)
		if f != nil {
			files = append(files, f)
		}
	}
	// A file with syntax errors is only partly parsed; anything said about
	// its blocks would be noise next to the real problem.
	if l.diags.HasErrors() {
		return
	}

	var blocks hcl.Blocks
	for _, f := range files {
		content, diags := f.Body.Content(rootSchema)
		l.diags = append(l.diags, diags...)
		blocks = append(blocks, content.Blocks...)
	}

	l.declareVariables(blocks.OfType("variable"))
	l.assignVariables()
	l.ctx = &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": l.varObject()},
		Functions: functions(),
	}
	l.evalLocals(blocks.OfType("locals"))
	l.decodeResources(blocks)
	l.checkTeams()
}

// parseFile parses one spec file, refusing one nested deeper than the
// parser can take before the parser sees it.
func (l *loader) parseFile(path string) (*hcl.File, hcl.Diagnostics) {
	src, err := l.read(path, false)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read spec", Detail: fmt.Sprintf("Reading %s: %s.", path, plainErr(err))}}
	}
	if d := checkText(src, path); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if d := checkNesting(src, path, hcl.InitialPos); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	return l.parser.ParseHCL(src, path)
}

// read returns the bytes of the spec file or var file name, from the
// saved sources when Load was given them, and records them in the
// spec's Sources.
func (l *loader) read(name string, varFile bool) ([]byte, error) {
	var src []byte
	if l.opts.Saved != nil {
		list := l.opts.Saved.Files
		if varFile {
			list = l.opts.Saved.VarFiles
		}
		i := slices.IndexFunc(list, func(s SourceFile) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("not among the saved spec's files")
		}
		src = list[i].Bytes
	} else {
		var err error
		// Bounded, and a FIFO or a device refused, so that a wrong
		// path fails at once instead of filling memory or blocking.
		what := "spec file"
		if varFile {
			what = "var file"
		}
		if src, err = regular.ReadFile(name, MaxSpecFile, what); err != nil {
			return nil, err
		}
	}
	if varFile {
		l.spec.Sources.VarFiles = append(l.spec.Sources.VarFiles, SourceFile{Name: name, Bytes: src})
	} else {
		l.spec.Sources.Files = append(l.spec.Sources.Files, SourceFile{Name: name, Bytes: src})
	}
	return src, nil
}

// specFiles lists the files that make up the spec at path.
func (l *loader) specFiles(path string) ([]string, bool) {
	if l.opts.Saved != nil {
		var names []string
		for _, f := range l.opts.Saved.Files {
			names = append(names, f.Name)
		}
		if len(names) == 0 {
			l.errorf(nil, "No spec files", "The saved spec holds no %s files.", FileExt)
			return nil, false
		}
		return names, true
	}
	info, err := os.Stat(path)
	if err != nil {
		l.errorf(nil, "Cannot read spec", "Reading %s: %s.", path, plainErr(err))
		return nil, false
	}
	if !info.IsDir() {
		return []string{path}, true
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		l.errorf(nil, "Cannot read spec", "Reading the directory %s: %s.", path, plainErr(err))
		return nil, false
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, FileExt) || e.IsDir() {
			continue
		}
		paths = append(paths, filepath.Join(path, name))
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		l.errorf(nil, "No spec files", "The directory %s contains no %s files. A spec is a %s file, or a directory of them that gpuenv reads together.", path, FileExt, FileExt)
		return nil, false
	}
	return paths, true
}

// plainErr drops the Go operation and path from an *os.PathError, which the
// diagnostic's own text already names.
func plainErr(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
