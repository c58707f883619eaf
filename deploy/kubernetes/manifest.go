// Package kubernetes holds gpuenv's Kubernetes manifests and decodes them
// strictly into the API's own types, so that a misspelt or misplaced field
// fails a test here instead of being dropped by the API server. It is a
// module of its own: the gpuenv binary never links Kubernetes.
package kubernetes

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DaemonSetManifest is gpuenv-daemonset.yaml: the namespace and the
// observe-and-label DaemonSet.
//
//go:embed gpuenv-daemonset.yaml
var DaemonSetManifest []byte

// Objects are the documents of a manifest, decoded.
type Objects struct {
	Namespaces []*corev1.Namespace
	DaemonSets []*appsv1.DaemonSet
}

// docSeparator is YAML's document marker on a line of its own.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Decode decodes every document of a manifest into its API type, refusing
// unknown fields, duplicate keys and kinds this package does not know. An
// error names the document (1-based) and its kind.
func Decode(manifest []byte) (*Objects, error) {
	var objs Objects
	for i, doc := range docSeparator.Split(string(manifest), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(doc)))) == 0 {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "v1 Namespace":
			ns := &corev1.Namespace{}
			objs.Namespaces = append(objs.Namespaces, ns)
			obj = ns
		case "apps/v1 DaemonSet":
			ds := &appsv1.DaemonSet{}
			objs.DaemonSets = append(objs.DaemonSets, ds)
			obj = ds
		default:
			return nil, fmt.Errorf("document %d: apiVersion %q kind %q is not one this module decodes", i+1, meta.APIVersion, meta.Kind)
		}
		if err := strict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, meta.Kind, err)
		}
	}
	return &objs, nil
}

// strict decodes one YAML document as the API server's strict field
// validation does: duplicate keys, unknown fields and fields in the wrong
// case ("hostPid") are errors. sigs.k8s.io/yaml's own UnmarshalStrict goes
// through encoding/json, which matches field names ignoring case.
func strict(doc []byte, obj any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// stripComments drops comment lines, so that a document of comments alone
// counts as empty.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
