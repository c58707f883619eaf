package export

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Node Feature Discovery's local feature source
// (https://kubernetes-sigs.github.io/node-feature-discovery/stable/usage/customization-guide.html,
// "Local feature source" and "Feature files"): nfd-worker reads every
// file in /etc/kubernetes/node-feature-discovery/features.d/, one
// "name=value" per line, lines starting with "#" are comments, and a
// "# +expiry-time=<RFC3339>" directive makes the lines after it vanish once
// that time has passed. It reads at most 64 kB of a file, skips files whose
// name starts with a dot, and asks writers to write a temporary file and
// rename it into place.
//
// The labels are named in NFD's own namespace, feature.node.kubernetes.io,
// which nfd-master accepts without configuration (other namespaces need
// -extra-label-ns in releases before 0.15, and kubernetes.io's others are
// refused in every release), each name starting "gpuenv-" so that a
// selector finds them all.

// NFDPrefix begins every label gpuenv writes.
const NFDPrefix = "feature.node.kubernetes.io/gpuenv-"

// NFDMaxSize is the most a feature file may hold: NFD documents 64 kB,
// read here as the smaller 64,000 bytes.
const NFDMaxSize = 64 * 1000

// Label is one node label.
type Label struct{ Name, Value string }

// NFDLabels are the labels for s: health, the versions a workload selects
// nodes by, and the drift timer's last outcome. A version that is not a
// valid label value once cleaned (see LabelValue) is left out rather than
// mangled into a value that would mislead a selector.
func (s *Snapshot) NFDLabels() []Label {
	r := s.Report
	out := []Label{
		{"healthy", strconv.FormatBool(r.Healthy)},
		{"problems", strconv.Itoa(r.Counts.Problems)},
		{"warnings", strconv.Itoa(r.Counts.Warnings)},
	}
	v := s.Versions()
	out = append(out, Label{"gpus", strconv.Itoa(v.GPUs)})
	healthy, unhealthy := s.GPUCounts()
	out = append(out, Label{"gpus-healthy", strconv.Itoa(healthy)}, Label{"gpus-unhealthy", strconv.Itoa(unhealthy)})
	toolkit := ""
	if len(v.Toolkits) > 0 {
		toolkit = v.Toolkits[0]
	}
	for _, l := range []Label{{"driver", v.Driver}, {"cuda-driver", v.CUDADriver}, {"cuda-toolkit", toolkit}} {
		if val := LabelValue(l.Value); val != "" {
			out = append(out, Label{l.Name, val})
		}
	}
	drift := "unknown"
	if s.Drift != nil {
		drift = string(s.Drift.Outcome)
	}
	out = append(out, Label{"drift", drift})
	if s.Status != nil && s.Status.Generation > 0 {
		out = append(out, Label{"generation", strconv.Itoa(s.Status.Generation)})
	}
	for _, g := range s.Groups() {
		out = append(out, Label{"check." + g.Slug, string(g.Status)})
	}
	for i := range out {
		out[i].Name = NFDPrefix + out[i].Name
	}
	return out
}

// NFDFile is the feature file for labels, ending at expiry: the expiry
// directive first, then one line per label. It refuses a label NFD would
// refuse and a file NFD would cut short, since either would leave a node
// labelled with part of what gpuenv found.
func NFDFile(labels []Label, expiry time.Time) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# +expiry-time=%s\n", expiry.UTC().Format(time.RFC3339))
	b.WriteString("# Written by gpuenv doctor --nfd; rewritten whole at each run.\n")
	for _, l := range labels {
		if err := ValidLabelName(l.Name); err != nil {
			return nil, err
		}
		if err := ValidLabelValue(l.Value); err != nil {
			return nil, fmt.Errorf("label %s: %w", l.Name, err)
		}
		b.WriteString(l.Name + "=" + l.Value + "\n")
	}
	if b.Len() > NFDMaxSize {
		return nil, fmt.Errorf("the feature file would be %d bytes; nfd-worker reads at most %d", b.Len(), NFDMaxSize)
	}
	return b.Bytes(), nil
}

// ValidLabelName checks a label name as Kubernetes does
// (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set):
// an optional DNS subdomain prefix of at most 253 characters and a slash,
// then a name of at most 63 characters of letters, digits, "-", "_" and
// ".", beginning and ending with a letter or digit.
func ValidLabelName(name string) error {
	prefix, local, ok := strings.Cut(name, "/")
	if !ok {
		local, prefix = prefix, ""
	}
	if ok {
		if prefix == "" || len(prefix) > 253 {
			return fmt.Errorf("label name %q: the prefix must be a DNS subdomain of 1 to 253 characters", name)
		}
		for _, part := range strings.Split(prefix, ".") {
			if !dnsLabel(part) {
				return fmt.Errorf("label name %q: the prefix %q is not a DNS subdomain (lower-case letters, digits, '-' and '.')", name, prefix)
			}
		}
	}
	if err := labelText(local, false); err != nil {
		return fmt.Errorf("label name %q: %w", name, err)
	}
	return nil
}

// ValidLabelValue checks a label value: empty, or at most 63 characters
// of letters, digits, "-", "_" and ".", beginning and ending with a
// letter or digit.
func ValidLabelValue(v string) error {
	if err := labelText(v, true); err != nil {
		return fmt.Errorf("label value %q: %w", v, err)
	}
	return nil
}

func labelText(s string, emptyOK bool) error {
	switch {
	case s == "" && emptyOK:
		return nil
	case s == "" || len(s) > 63:
		return fmt.Errorf("must be 1 to 63 characters")
	case !alnum(s[0]) || !alnum(s[len(s)-1]):
		return fmt.Errorf("must begin and end with a letter or digit")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%q is not allowed (letters, digits, '-', '_' and '.' are)", c)
		}
	}
	return nil
}

// LabelValue makes s a label value: characters a value may not hold
// become "_", and it is cut to 63 characters and trimmed to begin and end
// with a letter or digit. It is "" when nothing is left.
func LabelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.TrimFunc(string(b), func(r rune) bool { return r > 0x7f || !alnum(byte(r)) })
}

// dnsLabel reports whether s is one label of a DNS name as Kubernetes
// takes it (RFC 1123): 1 to 63 lower-case letters, digits and '-',
// beginning and ending with a letter or digit.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
