// Package manpage turns a chapter of the manual (docs/*.md) into a manual
// page, so that the page a package installs is made from the chapter at
// build time and the two cannot say different things.
//
// It reads the markdown the chapters are written in, not all of
// CommonMark: ATX headings, paragraphs, "-" and "1." lists whose items
// continue on indented lines (a fenced block inside an item included),
// fenced code blocks, pipe tables, and inline code, bold, italics and
// links. A table becomes a list of tagged paragraphs, one per row, which
// reads better at a terminal's width than a grid of long cells. Every
// character outside ASCII is written as groff's \[uXXXX] escape, as
// preconv would, so that the page formats the same in any locale.
package manpage

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Page describes the page made from a chapter.
type Page struct {
	Name    string // gpuenv-spec
	Section int    // 5
	Summary string // the NAME line's text after the dash
	Source  string // the footer's source, such as "gpuenv 0.9.0"
	Manual  string // the header's manual, such as "File Formats"
	// SeeAlso is printed as the last section, page references such as
	// "gpuenv(1)".
	SeeAlso []string
}

// Render writes the page for the markdown of a chapter. The chapter's
// level-1 heading is the page's title and is left out; level-2 headings
// are sections, deeper ones subsections.
func Render(md []byte, p Page) ([]byte, error) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	fmt.Fprintf(w, ".TH %s %d \"\" %s %s\n", strings.ToUpper(p.Name), p.Section, quoteArg(p.Source), quoteArg(p.Manual))
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", escapeText(p.Name), escapeText(p.Summary))
	r := &renderer{w: w}
	lines := strings.Split(strings.ReplaceAll(string(md), "\r\n", "\n"), "\n")
	if err := r.blocks(lines, "DESCRIPTION"); err != nil {
		return nil, err
	}
	if len(p.SeeAlso) > 0 {
		fmt.Fprintf(w, ".SH \"SEE ALSO\"\n")
		var refs []string
		for _, s := range p.SeeAlso {
			refs = append(refs, manRef(s))
		}
		fmt.Fprintf(w, "%s\n", strings.Join(refs, ",\n"))
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type renderer struct {
	w       *bufio.Writer
	section bool // a .SH was written
}

var (
	headingRE = regexp.MustCompile(`^(#{1,6}) +(.*?) *#* *$`)
	fenceRE   = regexp.MustCompile("^( *)(```+)(.*)$")
	bulletRE  = regexp.MustCompile(`^( *)([-*]|\d+\.) +(.*)$`)
)

// blocks renders the chapter; intro names the section that holds what
// comes before the first level-2 heading.
func (r *renderer) blocks(lines []string, intro string) error {
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			i++
		case headingRE.MatchString(l):
			m := headingRE.FindStringSubmatch(l)
			switch len(m[1]) {
			case 1:
				// The title: the page's NAME says it.
			case 2:
				fmt.Fprintf(r.w, ".SH %s\n", quoteArg(strings.ToUpper(plain(m[2]))))
				r.section = true
			default:
				r.ensureSection(intro)
				fmt.Fprintf(r.w, ".SS %s\n", quoteArg(plain(m[2])))
			}
			i++
		case fenceRE.MatchString(l):
			r.ensureSection(intro)
			n, err := r.code(lines[i:], fmt.Sprintf("line %d", i+1))
			if err != nil {
				return err
			}
			i += n
		case strings.HasPrefix(strings.TrimSpace(l), "|"):
			r.ensureSection(intro)
			n := 0
			for i+n < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+n]), "|") {
				n++
			}
			if err := r.table(lines[i:i+n], i+1); err != nil {
				return err
			}
			i += n
		case bulletRE.MatchString(l) && !strings.HasPrefix(l, "    "):
			r.ensureSection(intro)
			n, err := r.item(lines[i:], i+1)
			if err != nil {
				return err
			}
			i += n
		default:
			r.ensureSection(intro)
			n := 0
			var para []string
			for i+n < len(lines) && !startsBlock(lines[i+n]) {
				para = append(para, strings.TrimSpace(lines[i+n]))
				n++
			}
			fmt.Fprintf(r.w, ".PP\n%s\n", inline(strings.Join(para, " ")))
			i += n
		}
	}
	return nil
}

func (r *renderer) ensureSection(name string) {
	if !r.section {
		fmt.Fprintf(r.w, ".SH %s\n", quoteArg(name))
		r.section = true
	}
}

// startsBlock says whether a line ends the paragraph before it.
func startsBlock(l string) bool {
	t := strings.TrimSpace(l)
	return t == "" || headingRE.MatchString(l) || fenceRE.MatchString(l) ||
		strings.HasPrefix(t, "|") || (bulletRE.MatchString(l) && !strings.HasPrefix(l, "    "))
}

// code writes a fenced block unfilled and indented, and returns the lines
// it took, the fences included.
func (r *renderer) code(lines []string, where string) (int, error) {
	m := fenceRE.FindStringSubmatch(lines[0])
	indent, fence := len(m[1]), m[2]
	fmt.Fprintf(r.w, ".PP\n.RS 4\n.nf\n")
	for n := 1; n < len(lines); n++ {
		if c := fenceRE.FindStringSubmatch(lines[n]); c != nil && c[2] == fence && strings.TrimSpace(c[3]) == "" {
			fmt.Fprintf(r.w, ".fi\n.RE\n")
			return n + 1, nil
		}
		l := lines[n]
		if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
			l = l[indent:]
		}
		fmt.Fprintf(r.w, "%s\n", protectLine(escapeLiteral(l)))
	}
	return 0, fmt.Errorf("%s: the code block is not closed", where)
}

// item writes one list item and returns the lines it took: its first
// line, the indented lines that continue it, and, after a blank line, an
// indented fenced block or paragraph that belongs to it.
func (r *renderer) item(lines []string, lineNo int) (int, error) {
	m := bulletRE.FindStringSubmatch(lines[0])
	tag := `\(bu`
	if m[2] != "-" && m[2] != "*" {
		tag = m[2]
	}
	width := len(m[1]) + len(m[2]) + 1
	fmt.Fprintf(r.w, ".IP %s %d\n", tag, max(4, width))
	text := []string{m[3]}
	n := 1
	for n < len(lines) {
		l := lines[n]
		switch {
		case strings.TrimSpace(l) != "" && strings.HasPrefix(l, "  ") && !bulletRE.MatchString(l) && !fenceRE.MatchString(l):
			text = append(text, strings.TrimSpace(l))
			n++
			continue
		case strings.TrimSpace(l) == "" && n+1 < len(lines) && strings.HasPrefix(lines[n+1], "   ") && strings.TrimSpace(lines[n+1]) != "":
			fmt.Fprintf(r.w, "%s\n", inline(strings.Join(text, " ")))
			text = nil
			if fenceRE.MatchString(lines[n+1]) {
				k, err := r.code(lines[n+1:], fmt.Sprintf("line %d", lineNo+n+1))
				if err != nil {
					return 0, err
				}
				n += 1 + k
			} else {
				fmt.Fprintf(r.w, ".IP \"\" %d\n", max(4, width))
				n++
			}
			continue
		case fenceRE.MatchString(l) && strings.HasPrefix(l, "  "):
			fmt.Fprintf(r.w, "%s\n", inline(strings.Join(text, " ")))
			text = nil
			k, err := r.code(lines[n:], fmt.Sprintf("line %d", lineNo+n))
			if err != nil {
				return 0, err
			}
			n += k
			continue
		}
		break
	}
	if len(text) > 0 {
		fmt.Fprintf(r.w, "%s\n", inline(strings.Join(text, " ")))
	}
	return n, nil
}

// table writes each row as a tagged paragraph: the first cell as the tag,
// then each other cell after its column's heading.
func (r *renderer) table(lines []string, lineNo int) error {
	if len(lines) < 2 {
		return fmt.Errorf("line %d: a table needs a heading row and a delimiter row", lineNo)
	}
	head := cells(lines[0])
	for k, l := range lines[2:] {
		row := cells(l)
		if len(row) != len(head) {
			return fmt.Errorf("line %d: %d cells in a table of %d columns", lineNo+2+k, len(row), len(head))
		}
		fmt.Fprintf(r.w, ".TP\n%s\n", inline(row[0]))
		first := true
		for c := 1; c < len(row); c++ {
			if row[c] == "" {
				continue
			}
			if !first {
				fmt.Fprintf(r.w, ".br\n")
			}
			first = false
			fmt.Fprintf(r.w, "\\fI%s\\fR: %s\n", escapeText(plain(head[c])), inline(row[c]))
		}
	}
	return nil
}

// cells splits a table row at the pipes that are not escaped (\|) and not
// inside a code span.
func cells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	row = strings.TrimSuffix(row, "|")
	var out []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(row); i++ {
		c := row[i]
		switch {
		case c == '\\' && i+1 < len(row) && row[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '|' && !code:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

var (
	linkRE   = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`)
	codeRE   = regexp.MustCompile("`+([^`]+)`+")
	boldRE   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	italicRE = regexp.MustCompile(`(^|[\s(])\*([^*\s][^*]*)\*`)
)

// inline renders a paragraph's text: code and bold in bold, italics in
// italics, a link as its text (and its address, when it leads out of the
// manual).
func inline(s string) string {
	// Code spans first, so that nothing inside them is read as markup;
	// each is replaced by a placeholder until the rest is done.
	var spans []string
	s = codeRE.ReplaceAllStringFunc(s, func(m string) string {
		spans = append(spans, strings.Trim(m, "`"))
		return fmt.Sprintf("\x00%d\x00", len(spans)-1)
	})
	s = linkRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := linkRE.FindStringSubmatch(m)
		if strings.Contains(sub[2], "://") {
			return sub[1] + " <" + sub[2] + ">"
		}
		return sub[1]
	})
	s = escapeText(s)
	s = boldRE.ReplaceAllString(s, `\fB$1\fR`)
	s = italicRE.ReplaceAllString(s, `$1\fI$2\fR`)
	s = regexp.MustCompile("\x00(\\d+)\x00").ReplaceAllStringFunc(s, func(m string) string {
		var k int
		fmt.Sscanf(strings.Trim(m, "\x00"), "%d", &k)
		return `\fB` + escapeLiteral(spans[k]) + `\fR`
	})
	return protectLine(s)
}

// plain is a heading's text without markup, for .SH and .SS.
func plain(s string) string {
	s = linkRE.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "`", "")
	s = strings.ReplaceAll(s, "**", "")
	return s
}

// escapeText escapes what roff would read as its own: the backslash, and
// every character outside ASCII as \[uXXXX]. NUL, which no text holds,
// marks inline's placeholders and passes.
func escapeText(s string) string { return escape(s, false) }

// escapeLiteral is escapeText for code, whose hyphens are options and
// paths: \- keeps each a hyphen-minus when copied from the page.
func escapeLiteral(s string) string { return escape(s, true) }

func escape(s string, literal bool) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == '\\':
			b.WriteString(`\e`)
		case c == '-' && literal:
			b.WriteString(`\-`)
		case c > 0x7e || (c < 0x20 && c != '\t' && c != 0):
			fmt.Fprintf(&b, `\[u%04X]`, c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// protectLine keeps a line that starts with a dot or an apostrophe from
// being read as a request.
func protectLine(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}

// quoteArg makes s one argument of a request.
func quoteArg(s string) string {
	return `"` + strings.ReplaceAll(escapeText(s), `"`, `\(dq`) + `"`
}

// manRef writes "name(5)" as a page reference, the name in bold.
func manRef(s string) string {
	name, sect, ok := strings.Cut(s, "(")
	if !ok {
		return escapeText(s)
	}
	return `\fB` + escapeText(name) + `\fR(` + escapeText(sect)
}
