package kubernetes

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const nfdDir = "/etc/kubernetes/node-feature-discovery/features.d"

func daemonSet(t *testing.T) (*corev1.Namespace, *appsv1.DaemonSet) {
	t.Helper()
	objs, err := Decode(DaemonSetManifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Namespaces) != 1 || len(objs.DaemonSets) != 1 {
		t.Fatalf("want one namespace and one DaemonSet, got %d and %d", len(objs.Namespaces), len(objs.DaemonSets))
	}
	return objs.Namespaces[0], objs.DaemonSets[0]
}

// Strict decoding is what makes the checks below worth anything: a field
// the API does not have must fail, not vanish.
func TestDecodeRefusesUnknownFields(t *testing.T) {
	for name, edit := range map[string][2]string{
		"misspelt field":  {"hostPID: true", "hostPid: true"},
		"misplaced field": {"      hostPID: true", "      hostPID: true\n      privileged: true"},
		"duplicate key":   {"      hostPID: true", "      hostPID: true\n      hostPID: false"},
		"unknown kind":    {"kind: Namespace", "kind: Namespaces"},
	} {
		bad := strings.Replace(string(DaemonSetManifest), edit[0], edit[1], 1)
		if bad == string(DaemonSetManifest) {
			t.Fatalf("%s: %q is not in the manifest", name, edit[0])
		}
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		} else if !strings.Contains(err.Error(), "document ") {
			t.Errorf("%s: the error does not say which document: %v", name, err)
		}
	}
}

func TestDaemonSet(t *testing.T) {
	ns, ds := daemonSet(t)
	if ds.Namespace != ns.Name {
		t.Errorf("the DaemonSet is in namespace %q, the manifest creates %q", ds.Namespace, ns.Name)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
		t.Errorf("namespace Pod Security level %q: a privileged hostPID pod is refused below privileged", got)
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the selector's %s=%s is not a label of the pods: the API server refuses it", k, v)
		}
	}
	pod := ds.Spec.Template.Spec
	if !pod.HostPID {
		t.Error("hostPID is off: doctor cannot see the node's processes")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod gets a service account token it never uses")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the container is not privileged")
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if _, ok := volumes[m.Name]; !ok {
			t.Errorf("mount %s names no volume", m.Name)
		}
		mounts[m.MountPath] = m
	}
	host, ok := mounts["/host"]
	switch {
	case !ok:
		t.Error("the node's root is not mounted at /host")
	case !host.ReadOnly:
		t.Error("the node's root is mounted writable: the DaemonSet only observes")
	case volumes[host.Name].HostPath == nil || volumes[host.Name].HostPath.Path != "/":
		t.Errorf("/host is %+v, want the node's /", volumes[host.Name].VolumeSource)
	}
	nfd, ok := mounts[nfdDir]
	switch {
	case !ok:
		t.Errorf("NFD's %s is not mounted", nfdDir)
	case nfd.ReadOnly:
		t.Error("NFD's features.d is read-only: the labels cannot be written")
	case volumes[nfd.Name].HostPath == nil || volumes[nfd.Name].HostPath.Path != nfdDir:
		t.Errorf("%s is %+v, want the node's own", nfdDir, volumes[nfd.Name].VolumeSource)
	}
	if c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem {
		if _, ok := mounts["/tmp"]; !ok {
			t.Error("a read-only root filesystem without a writable /tmp")
		}
	}

	script := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
	if !strings.Contains(script, "gpuenv doctor --root /host --nfd "+nfdDir+"/gpuenv") {
		t.Errorf("the container does not observe and label:\n%s", script)
	}
	for _, verb := range []string{"apply", "rollback", "unlock"} {
		if regexp.MustCompile(`gpuenv\s+(\S+\s+)*` + verb + `\b`).MatchString(script) {
			t.Errorf("the container runs gpuenv %s: by default it only observes", verb)
		}
	}
	if len(c.Command) == 2 && c.Command[0] == "/bin/sh" && c.Command[1] == "-c" && len(c.Args) == 1 {
		if out, err := exec.Command("sh", "-n", "-c", c.Args[0]).CombinedOutput(); err != nil {
			t.Errorf("the loop is not valid sh: %v\n%s", err, out)
		}
	} else {
		t.Errorf("command %q args %q: want /bin/sh -c and one script", c.Command, c.Args)
	}

	// The labels expire when the pod stops, and not between two runs:
	// one late run is survived.
	interval := regexp.MustCompile(`sleep (\d+)`).FindStringSubmatch(script)
	expiry := regexp.MustCompile(`--nfd-expiry (\S+)`).FindStringSubmatch(script)
	if interval == nil || expiry == nil {
		t.Errorf("the loop has no sleep or no --nfd-expiry:\n%s", script)
	} else {
		every, _ := time.ParseDuration(interval[1] + "s")
		ttl, err := time.ParseDuration(expiry[1])
		if err != nil || ttl < 2*every || ttl > 6*every {
			t.Errorf("labels expire after %s (%v) with a run every %s: want 2 to 6 runs", expiry[1], err, every)
		}
	}

	if !slices.ContainsFunc(pod.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists && tol.Effect == ""
	}) {
		t.Errorf("no toleration of the nvidia.com/gpu taint, of any effect: %+v", pod.Tolerations)
	}
	terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var keys []string
	for _, term := range terms {
		for _, e := range term.MatchExpressions {
			keys = append(keys, e.Key)
		}
	}
	if !slices.Contains(keys, "feature.node.kubernetes.io/pci-10de.present") {
		t.Errorf("the pods are not placed on nodes with an NVIDIA PCI device: %v", keys)
	}

	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		t.Errorf("requests %v: the scheduler must reserve what doctor uses", req)
	}
	if lim.Memory().IsZero() || lim.Memory().Cmp(*req.Memory()) < 0 {
		t.Errorf("memory limit %v below request %v", lim.Memory(), req.Memory())
	}
	if lim.Memory().Cmp(resource.MustParse("1Gi")) > 0 {
		t.Errorf("memory limit %v: a health check on every GPU node must stay small", lim.Memory())
	}
	if _, ok := lim[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit throttles doctor into missing its interval; only memory is limited")
	}
}

// The manifest deploys the release this tree is.
func TestImageIsThisRelease(t *testing.T) {
	src, err := os.ReadFile("../../internal/release/release.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const Version = "([^"]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no Version constant in internal/release")
	}
	version := string(m[1])
	_, ds := daemonSet(t)
	if got, want := ds.Spec.Template.Spec.Containers[0].Image, "gpuenv:"+version; got != want {
		t.Errorf("image %s, want %s", got, want)
	}
	if got := ds.Labels["app.kubernetes.io/version"]; got != version {
		t.Errorf("app.kubernetes.io/version %q, want %q", got, version)
	}
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cf), "-t gpuenv:"+version+" ") {
		t.Errorf("the Containerfile's build line does not tag gpuenv:%s", version)
	}
}
