package compat

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The table of GPUs is generated from Debian's pci.ids and checked against
// it where the file is installed (CI installs the pci.ids package):
//
//	go test ./planner/compat -run TestGPUTableMatchesPCIIDs -update-gpus
//
// rewrites data/gpus.tsv, adding a row for every id of a chip in
// gpu_chips.tsv and keeping what rows say beyond pci.ids (drivers, notes,
// names from NVIDIA's README).
var updateGPUs = flag.Bool("update-gpus", false, "rewrite data/gpus.tsv from pci.ids")

// pciIDsPath is where Debian's pci.ids package installs the file;
// GPUENV_PCI_IDS names another copy.
func pciIDsPath() string {
	if p := os.Getenv("GPUENV_PCI_IDS"); p != "" {
		return p
	}
	return "/usr/share/misc/pci.ids"
}

// pciGPU is one NVIDIA device of pci.ids that is a GPU of a known chip.
type pciGPU struct {
	id    uint16
	name  string // the bracketed marketing name, or the chip text when none
	chip  string // base chip: "GK110" for "GK110BGL"
	descr string
}

// chipName reads "GK110BGL [Tesla K40m]" or "GH100[H100 SXM5 80GB]": the
// chip, its variant letters, the name, and any text after the chip.
var chipName = regexp.MustCompile(`^([A-Z]{2}[0-9]{3})([A-Z]*)\s*(?:\[([^\]]*)\])?\s*(.*)$`)

// nonGPU marks functions of a GPU board that are not the GPU: its HDMI
// audio and USB-C controllers.
var nonGPU = regexp.MustCompile(`Audio|USB|UCSI`)

// parsePCIIDs returns NVIDIA's (vendor 10de) GPUs of known chips.
func parsePCIIDs(r io.Reader) ([]pciGPU, error) {
	var out []pciGPU
	in := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] != '\t' {
			in = strings.HasPrefix(line, "10de ")
			continue
		}
		if !in || strings.HasPrefix(line, "\t\t") {
			continue
		}
		idText, descr, ok := strings.Cut(line[1:], "  ")
		if !ok {
			return nil, fmt.Errorf("pci.ids: %q: no two spaces after the device id", line)
		}
		n, err := strconv.ParseUint(idText, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("pci.ids: %q: %v", line, err)
		}
		m := chipName.FindStringSubmatch(descr)
		if m == nil || nonGPU.MatchString(m[4]) {
			continue
		}
		if _, ok := ChipByName(m[1]); !ok {
			continue
		}
		name := strings.TrimSpace(m[3])
		if name == "" {
			name = strings.TrimSpace(descr)
		}
		out = append(out, pciGPU{id: uint16(n), name: name, chip: m[1], descr: descr})
	}
	return out, sc.Err()
}

func TestParsePCIIDs(t *testing.T) {
	const sample = "# comment\n" +
		"10de  NVIDIA Corporation\n" +
		"\t0e0a  GK104 HDMI Audio Controller\n" +
		"\t1024  GK180GL [Tesla K40c]\n" +
		"\t\t10de 0983  Tesla K40c\n" +
		"\t102d  GK210GL [Tesla K80]\n" +
		"\t1725  GP100\n" +
		"\t1ad8  TU104 USB 3.1 Host Controller\n" +
		"\t2330  GH100[H100 SXM5 80GB]\n" +
		"\t0a20  GT216 [GeForce GT 220]\n" +
		"10df  Emulex Corporation\n" +
		"\t1ae5  LP6000 [GK104 lookalike]\n"
	got, err := parsePCIIDs(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, g := range got {
		lines = append(lines, fmt.Sprintf("%04X %s %s", g.id, g.chip, g.name))
	}
	want := []string{"1024 GK180 Tesla K40c", "102D GK210 Tesla K80", "1725 GP100 GP100", "2330 GH100 H100 SXM5 80GB"}
	if !slices.Equal(lines, want) {
		t.Errorf("parsed %q, want %q", lines, want)
	}
}

func TestGPUTableMatchesPCIIDs(t *testing.T) {
	data, err := os.ReadFile(pciIDsPath())
	if os.IsNotExist(err) {
		t.Skipf("%s is not installed (Debian package pci.ids)", pciIDsPath())
	}
	if err != nil {
		t.Fatal(err)
	}
	listed, err := parsePCIIDs(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if *updateGPUs {
		if err := rewriteGPUs(listed); err != nil {
			t.Fatal(err)
		}
		t.Log("data/gpus.tsv rewritten; run the tests again without -update-gpus")
		return
	}
	inFile := map[uint16]bool{}
	for _, p := range listed {
		inFile[p.id] = true
		g, ok := GPUByPCIID(p.id)
		if !ok {
			t.Errorf("pci.ids %04x %q (%s) has no gpus.tsv row", p.id, p.descr, p.chip)
			continue
		}
		c, _ := ChipByName(p.chip)
		if g.Chip != p.chip || g.Arch != c.Arch || !g.CC.Equal(c.CC) {
			t.Errorf("%s: chip %s %s %s, pci.ids says %s (%s %s)", g.Source, g.Chip, g.Arch, g.CC, p.chip, c.Arch, c.CC)
		}
		// Names NVIDIA's README gives are newer than the package's.
		if g.Model != p.name && !cites(g.Source, "open-gpu-readme") {
			t.Errorf("%s: model %q, pci.ids says %q", g.Source, g.Model, p.name)
		}
	}
	if len(listed) < 600 {
		t.Errorf("only %d GPUs of known chips in %s", len(listed), pciIDsPath())
	}
	for _, g := range GPUs() {
		if g.Chip != "" && !inFile[g.PCIID] {
			t.Errorf("%s names chip %s but pci.ids has no GPU %04x", g.Source, g.Chip, g.PCIID)
		}
	}
}

func cites(s Source, id string) bool {
	return slices.ContainsFunc(s.Refs, func(r Ref) bool { return r.ID == id })
}

// rewriteGPUs writes data/gpus.tsv with a row for every listed GPU.
func rewriteGPUs(listed []pciGPU) error {
	const file = "data/gpus.tsv"
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var head []string
	var header []string
	rows := map[uint16]map[string]string{}
	for line := range strings.SplitSeq(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" || line[0] == '#' {
			head = append(head, line)
			continue
		}
		cells := strings.Split(line, "\t")
		if header == nil {
			header = cells
			continue
		}
		row := map[string]string{}
		for i, c := range cells {
			row[header[i]] = c
		}
		n, err := strconv.ParseUint(row["pci_id"], 16, 16)
		if err != nil {
			return err
		}
		rows[uint16(n)] = row
	}
	cols := []string{"pci_id", "model", "chip", "arch", "cc", "open_required", "min_driver", "open_readme", "notes", "source", "unverified"}
	for _, p := range listed {
		c, _ := ChipByName(p.chip)
		row, ok := rows[p.id]
		if !ok {
			row = map[string]string{"pci_id": fmt.Sprintf("%04X", p.id), "model": p.name, "source": "pci-ids"}
			rows[p.id] = row
		}
		row["chip"], row["arch"], row["cc"] = c.Name, c.Arch, c.CC.String()
		verifyByChip(row, c)
	}
	var b strings.Builder
	for _, l := range head {
		b.WriteString(l + "\n")
	}
	b.WriteString(strings.Join(cols, "\t") + "\n")
	ids := make([]uint16, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = rows[id][c]
		}
		b.WriteString(strings.Join(cells, "\t") + "\n")
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// verifyByChip cites the chip's sources for a row's arch and cc and drops
// them from its unverified fields where the chip's capability is verified.
func verifyByChip(row map[string]string, c Chip) {
	ids := strings.Split(row["source"], ",")
	for _, r := range c.Source.Refs {
		if !slices.Contains(ids, r.ID) && r.ID != idUnverified {
			ids = append(ids, r.ID)
		}
	}
	var left []string
	for f := range strings.SplitSeq(row["unverified"], "; ") {
		if f == "" || f == "arch" || (f == "cc" && c.Source.Verified()) {
			continue
		}
		left = append(left, f)
	}
	if !c.Source.Verified() && !slices.Contains(left, "cc") {
		left = append(left, "cc")
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == idUnverified })
	if len(left) > 0 {
		ids = append(ids, idUnverified)
	}
	row["source"] = strings.Join(ids, ",")
	row["unverified"] = strings.Join(left, "; ")
}
