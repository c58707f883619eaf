package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// gpuenv-events [-partial] [-progress] FILE reads the JSON Lines of an
// apply or rollback --json and checks the stream's contract: every line
// one JSON object with a "type" and an RFC 3339 "@timestamp", the first a
// "version" event with a "format_version", the last a "summary", every
// operation_start followed by its operation_end before the next starts,
// package manager output and progress tagged with the operation running,
// and progress (checkProgress) rate-limited, with a phase, and
// percentages that do not go back. It prints one line per event — the
// type and what the event is about, runs of output collapsed into one
// line — for the script to compare; progress only with -progress, one
// line per run of the same phase. -partial accepts a stream cut short
// (its process was killed): no summary at its end.
func init() {
	extraTestCommands["gpuenv-events"] = events
}

func events() {
	args := os.Args[1:]
	var partial, progress bool
	for len(args) > 1 && (args[0] == "-partial" || args[0] == "-progress") {
		partial = partial || args[0] == "-partial"
		progress = progress || args[0] == "-progress"
		args = args[1:]
	}
	if len(args) != 1 {
		die(fmt.Errorf("usage: gpuenv-events [-partial] [-progress] FILE"))
	}
	f, err := os.Open(args[0])
	if err != nil {
		die(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	var out []string
	var open map[string]any
	var pc progressCheck
	n := 0
	for sc.Scan() {
		n++
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			die(fmt.Errorf("line %d is not a JSON object: %v: %s", n, err, sc.Text()))
		}
		typ, _ := ev["type"].(string)
		ts, _ := ev["@timestamp"].(string)
		if typ == "" {
			die(fmt.Errorf("line %d has no type", n))
		}
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			die(fmt.Errorf("line %d: @timestamp %q: %v", n, ts, err))
		}
		if n == 1 && (typ != "version" || ev["format_version"] != streamFormatVersion) {
			die(fmt.Errorf("the first event is %s with format_version %v", typ, ev["format_version"]))
		}
		line := typ
		op, _ := ev["operation"].(map[string]any)
		if op != nil {
			line += fmt.Sprintf(" %v", op["index"])
			if u, ok := op["undoes"]; ok {
				line += fmt.Sprintf(" of generation %v", u)
			}
			line += fmt.Sprintf(" %v", op["step"])
		}
		switch typ {
		case "operation_start":
			if open != nil {
				die(fmt.Errorf("line %d: an operation starts while %v runs", n, open["step"]))
			}
			open = op
			pc = progressCheck{}
		case "operation_end":
			if open == nil || open["index"] != op["index"] || open["step"] != op["step"] {
				die(fmt.Errorf("line %d: operation_end of %v without its start", n, op))
			}
			open = nil
			line += " " + fmt.Sprint(ev["outcome"])
		case "package_manager_output":
			if op == nil || open == nil || open["index"] != op["index"] {
				die(fmt.Errorf("line %d: output %q not tagged with the running operation", n, ev["line"]))
			}
			if len(out) > 0 && out[len(out)-1] == line {
				continue
			}
		case "progress":
			if op == nil || open == nil || open["index"] != op["index"] || open["step"] != op["step"] {
				die(fmt.Errorf("line %d: progress not tagged with the running operation", n))
			}
			p, _ := ev["progress"].(map[string]any)
			if err := pc.check(ts, p); err != nil {
				die(fmt.Errorf("line %d: %v: %s", n, err, sc.Text()))
			}
			line += " " + fmt.Sprint(p["phase"])
			if !progress || len(out) > 0 && out[len(out)-1] == line {
				continue
			}
		case "revert_start", "revert_end":
			line += fmt.Sprintf(" %v", ev["count"])
			if o, ok := ev["outcome"]; ok {
				line += fmt.Sprintf(" %v", o)
			}
		case "summary":
			line += fmt.Sprintf(" %v generation %v exit %v", ev["outcome"], ev["generation"], ev["exit_code"])
		case "diagnostic":
			d, _ := ev["diagnostic"].(map[string]any)
			line += fmt.Sprintf(" %v: %v", d["severity"], d["summary"])
		case "message", "plan":
			if typ == "message" {
				continue
			}
		case "rollback_plan":
			rp, _ := ev["rollback"].(map[string]any)
			line += fmt.Sprintf(" %v", rp["generations"])
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		die(err)
	}
	if n == 0 || !partial && !strings.HasPrefix(out[len(out)-1], "summary") {
		die(fmt.Errorf("the stream does not end with a summary"))
	}
	fmt.Println(strings.Join(out, "\n"))
	os.Exit(0)
}

// progressCheck holds what the progress events of one operation must
// keep to: at most one every 150 ms and five in any second (the engine
// sends them every 250 ms at most), and within one command, percentages
// that do not go back — those of its download apart from those of its
// package manager's steps, which start from 0 again.
type progressCheck struct {
	times []time.Time
	last  map[string]float64
}

func (c *progressCheck) check(ts string, p map[string]any) error {
	at, _ := time.Parse(time.RFC3339Nano, ts)
	if k := len(c.times); k > 0 && at.Sub(c.times[k-1]) < 150*time.Millisecond {
		return fmt.Errorf("progress %s after the one before", at.Sub(c.times[k-1]))
	}
	c.times = append(c.times, at)
	if k := len(c.times); k > 5 && at.Sub(c.times[k-6]) < time.Second {
		return fmt.Errorf("six progress events within %s", at.Sub(c.times[k-6]))
	}
	phase, _ := p["phase"].(string)
	if phase == "" {
		return fmt.Errorf("progress without a phase")
	}
	pct, ok := p["percent"].(float64)
	if !ok {
		return nil
	}
	if pct < 0 || pct > 100 {
		return fmt.Errorf("percent %v", pct)
	}
	scale := fmt.Sprintf("%v", p["command"])
	if phase == "downloading" {
		scale += " download"
	}
	if c.last == nil {
		c.last = map[string]float64{}
	}
	if prev, seen := c.last[scale]; seen && pct < prev {
		return fmt.Errorf("percent %v after %v in command %v", pct, prev, p["command"])
	}
	c.last[scale] = pct
	return nil
}
