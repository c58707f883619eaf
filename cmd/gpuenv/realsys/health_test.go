//go:build realsystem

package realsys

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

// Health is the base root with the engines gpuenv's health outputs are
// read by: Prometheus's promtool and node_exporter, and Slurm's
// controller, node daemon and client with munge.
var Health = &Layer{Name: "bookworm-health", Parent: Base, Include: []string{
	"prometheus", "prometheus-node-exporter", "slurmctld", "slurmd", "slurm-client", "munge",
}}

// healthyNode lays the working DGX fixture out at /srv/node in r: doctor
// finds it healthy (NVML is not asked of a root that is not this
// machine's), and one profile script breaks it.
func healthyNode(t *testing.T, r *Root) {
	t.Helper()
	if err := os.MkdirAll(r.Path("/srv/node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := hosttest.BuildNamed(filepath.Join(h.repo, "testdata"), "ubuntu2204-working", r.Path("/srv/node")); err != nil {
		t.Fatal(err)
	}
}

// breakNode makes doctor find one problem in /srv/node: CUDA_VISIBLE_DEVICES
// names a GPU the host does not have. fixNode takes it away.
func breakNode(r *Root) {
	r.WriteFile("/srv/node/etc/profile.d/gpu.sh", "export CUDA_VISIBLE_DEVICES=0,9\n")
}
func fixNode(r *Root) { r.MustSh("rm /srv/node/etc/profile.d/gpu.sh") }

// freePort is a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// doctor --prometheus writes a file Prometheus's own promtool accepts, and
// Debian's node_exporter serves its series from the textfile collector
// directory, with the drift timer's record and the health verdicts.
func TestHealthPrometheus(t *testing.T) {
	r := h.NewRoot(t, Health, Mounts{Proc: true})
	healthyNode(t, r)
	r.WriteFile("/srv/spec/gpuenv.hcl", "# nothing managed\n")
	res := r.Gpuenv("--root", "/srv/node", "plan", "--detailed-exitcode", "--record-drift", "/srv/spec")
	if res.Code != 0 {
		t.Fatalf("plan: %s", res)
	}
	const dir = "/var/lib/prometheus/node-exporter"
	breakNode(r)
	// Debian gives /var/lib/prometheus to the prometheus user, who could
	// swap root's file in node-exporter/ for a link: gpuenv refuses it
	// until the directory is root's, as docs/fleets.md says to make it.
	res = r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", dir+"/gpuenv.prom")
	if want := "/var/lib/prometheus is owned by uid "; res.Code != 1 || !strings.Contains(res.Stderr, want) || !strings.Contains(res.Stderr, "(prometheus) with mode 0755, not by root") {
		t.Fatalf("doctor into the prometheus user's directory: want exit 1 and %q; %s", want, res)
	}
	r.MustSh("chown root:root /var/lib/prometheus")
	res = r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", dir+"/gpuenv.prom")
	if res.Code != 2 {
		t.Fatalf("doctor on the broken node: want exit 2; %s", res)
	}

	check := r.Sh("promtool check metrics < " + dir + "/gpuenv.prom")
	if check.Code != 0 || strings.TrimSpace(check.Stdout+check.Stderr) != "" {
		t.Errorf("promtool check metrics: %s", check)
	}

	port := freePort(t)
	r.MustSh(fmt.Sprintf("setsid prometheus-node-exporter --web.listen-address=127.0.0.1:%d --collector.disable-defaults --collector.textfile --collector.textfile.directory=%s </dev/null >/tmp/node-exporter.log 2>&1 &", port, dir))
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter did not answer: %v\n%s", err, r.MustSh("cat /tmp/node-exporter.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{
		"node_textfile_scrape_error 0",
		"gpuenv_doctor_healthy 0",
		`gpuenv_doctor_group_status{group="environment",name="Environment",number="8"} 2`,
		`gpuenv_doctor_group_status{group="nvml",name="NVML",number="3"} 0`,
		`gpuenv_doctor_checks{status="problem"} 1`,
		`gpuenv_driver_info{cuda_driver="",cuda_toolkits="12.4.1",driver="550.54.15",library="550.54.15",module="550.54.15"} 1`,
		"gpuenv_gpus 8",
		"gpuenv_drift_record_present 1",
		`gpuenv_drift_outcome{outcome="no-changes"} 1`,
		`gpuenv_drift_changes{action="add"} 0`,
		"gpuenv_generation 0",
		`node_textfile_mtime_seconds{file="` + dir + `/gpuenv.prom"}`,
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("node_exporter's /metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// The per-GPU health series pass promtool too: a node whose GPU 1
// logged Xid 79 and whose GPU 3 trained at x8, read from the root's
// kern.log and sysfs (NVML is not asked of a root that is not this
// machine's).
func TestHealthPrometheusGPUs(t *testing.T) {
	r := h.NewRoot(t, Health, Mounts{Proc: true})
	healthyNode(t, r)
	r.WriteFile("/srv/node/var/log/kern.log", "Sep 09 15:53:19 saturn kernel: NVRM: Xid (PCI:0000:2a:00): 79, pid=0, GPU has fallen off the bus.\n")
	for f, v := range map[string]string{"current_link_width": "8", "max_link_width": "16", "current_link_speed": "32.0 GT/s PCIe", "max_link_speed": "32.0 GT/s PCIe"} {
		r.WriteFile("/srv/node/sys/bus/pci/devices/0000:5d:00.0/"+f, v+"\n")
	}
	res := r.Gpuenv("--root", "/srv/node", "doctor", "--prometheus", "/tmp/gpuenv.prom")
	if res.Code != 2 {
		t.Fatalf("doctor: want exit 2; %s", res)
	}
	check := r.Sh("promtool check metrics < /tmp/gpuenv.prom")
	if check.Code != 0 || strings.TrimSpace(check.Stdout+check.Stderr) != "" {
		t.Errorf("promtool check metrics: %s", check)
	}
	prom := r.MustSh("cat /tmp/gpuenv.prom")
	for _, want := range []string{
		`gpuenv_gpu_xid_errors{gpu="",UUID="",pci_bus_id="0000:2a:00.0",model_name="H100 SXM5 80GB HBM3"} 79`,
		`gpuenv_gpu_xid_events{gpu="",UUID="",pci_bus_id="0000:2a:00.0",model_name="H100 SXM5 80GB HBM3",xid="79"} 1`,
		`gpuenv_gpu_pcie_link_width{gpu="",UUID="",pci_bus_id="0000:5d:00.0",model_name="H100 SXM5 80GB HBM3"} 8`,
		`gpuenv_gpus_unhealthy 2`,
	} {
		if !strings.Contains(prom, "\n"+want+"\n") {
			t.Errorf("the file lacks %q:\n%s", want, prom)
		}
	}
}

// slurm.conf for one controller and one node on loopback. No systemd runs
// as PID 1 and the machine has cgroup v1, so processes are tracked from
// /proc and tasks are not bound; everything runs as root. The last line is
// where gpuenv is run: as the health check or as the Prolog.
const slurmConf = `ClusterName=gpuenv
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurmctld.log
SlurmdLogFile=/var/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
SlurmdTimeout=300
NodeName=gpunode NodeAddr=127.0.0.1 CPUs=1 RealMemory=1 State=UNKNOWN
PartitionName=debug Nodes=gpunode Default=YES MaxTime=INFINITE State=UP
%[4]s
`

// healthInterval is how often slurmd runs the health check here.
const healthInterval = 5

// slurmNode is a one-node Slurm cluster running in a root, with gpuenv
// on the fixture root /srv/node as /usr/local/sbin/node-health.
type slurmNode struct {
	t *testing.T
	r *Root
}

// startSlurm starts munged, slurmctld and slurmd in a fresh root, with
// gpuenvLine (HealthCheckProgram or Prolog) in slurm.conf, and waits for
// the node to register idle.
func startSlurm(t *testing.T, gpuenvLine string) *slurmNode {
	r := h.NewRoot(t, Health, Mounts{Proc: true, Sys: true})
	slurmdCgroups(t, r)
	healthyNode(t, r)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(hostname, ".")
	r.WriteFile("/etc/slurm/slurm.conf", fmt.Sprintf(slurmConf, short, freePort(t), freePort(t), gpuenvLine))
	// slurmd runs the program with no arguments: the link's name makes
	// gpuenv slurm-health, and this script gives it the fixture root.
	r.WriteFile("/usr/local/sbin/node-health", "#!/bin/sh\nexec /usr/local/sbin/gpuenv-slurm-health --root /srv/node >>/var/log/node-health.log 2>&1\n")
	r.MustSh(`chmod 755 /usr/local/sbin/node-health
ln -s /usr/local/bin/gpuenv /usr/local/sbin/gpuenv-slurm-health
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/spool/slurmctld /var/spool/slurmd
chown munge:munge /run/munge
runuser -u munge -- /usr/sbin/munged
munge -n | unmunge >/dev/null`)
	n := &slurmNode{t: t, r: r}
	for _, daemon := range []string{"slurmctld", "slurmd -N gpunode"} {
		if res := r.Sh("setsid " + daemon + " </dev/null >/tmp/daemon.log 2>&1"); res.Code != 0 {
			t.Fatalf("%s: %s\n%s\n%s", daemon, res, r.Sh("cat /tmp/daemon.log").Stdout, n.logs())
		}
	}
	n.wait("registration", func(state, _ string) bool { return strings.HasPrefix(state, "IDLE") && !drained(state) })
	return n
}

func (n *slurmNode) logs() string {
	return n.r.Sh("tail -n 30 /var/log/slurmctld.log /var/log/slurmd.log /var/log/node-health.log").Stdout
}

// wait polls scontrol until the node's state and reason satisfy ok, and
// fails the test after a dozen health check intervals.
func (n *slurmNode) wait(what string, ok func(state, reason string) bool) (string, string) {
	n.t.Helper()
	deadline := time.Now().Add(12 * healthInterval * time.Second)
	var state, reason string
	for time.Now().Before(deadline) {
		state, reason = n.node()
		if ok(state, reason) {
			return state, reason
		}
		time.Sleep(time.Second)
	}
	n.t.Fatalf("%s: node still %s (%s)\n%s", what, state, reason, n.logs())
	return "", ""
}

// node is the node's state and reason, as scontrol shows them.
func (n *slurmNode) node() (string, string) {
	res := n.r.Sh("scontrol show node gpunode")
	return nodeField(res.Stdout, "State="), nodeField(res.Stdout, "Reason=")
}

func drained(state string) bool { return strings.Contains(state, "DRAIN") }

// Debian 12's real slurmctld and slurmd run gpuenv as HealthCheckProgram,
// through the gpuenv-slurm-health link and with slurmd's own environment:
// a broken node is drained with gpuenv's reason, a fixed one resumed, and
// a node an administrator drained stays drained, broken or fixed.
func TestHealthSlurm(t *testing.T) {
	n := startSlurm(t, fmt.Sprintf("HealthCheckProgram=/usr/local/sbin/node-health\nHealthCheckInterval=%d", healthInterval))
	r := n.r

	breakNode(r)
	_, reason := n.wait("broken node", func(state, _ string) bool { return drained(state) })
	if !strings.HasPrefix(reason, "gpuenv: CUDA_VISIBLE_DEVICES hides GPUs: /etc/profile.d/gpu.sh:1 names GPU 9") {
		t.Errorf("drain reason %q, want gpuenv's naming the problem\n%s", reason, n.logs())
	}

	fixNode(r)
	n.wait("fixed node", func(state, _ string) bool { return !drained(state) })

	// An administrator's drain survives both verdicts: two checks each.
	r.MustSh(`scontrol update NodeName=gpunode State=DRAIN Reason="replace PSU 2"`)
	for _, broken := range []bool{true, false} {
		if broken {
			breakNode(r)
		} else {
			fixNode(r)
		}
		runs := healthRuns(r)
		waitRuns := time.Now().Add(12 * healthInterval * time.Second)
		for healthRuns(r) < runs+2 && time.Now().Before(waitRuns) {
			time.Sleep(time.Second)
		}
		if healthRuns(r) < runs+2 {
			t.Fatalf("slurmd ran the health check %d times in %ds\n%s", healthRuns(r)-runs, 12*healthInterval, n.logs())
		}
		if state, reason := n.node(); !drained(state) || reason != "replace PSU 2" {
			t.Errorf("administrator's drain with the node broken=%v: %s (%s)", broken, state, reason)
		}
	}
	h.Report("slurm health check: drain, resume and an administrator's drain kept, with slurmd %s", r.MustSh("slurmd -V"))
}

// As the Prolog, gpuenv lets a job run on a healthy node; on a broken one
// it drains the node before failing, so Slurm requeues the job and the
// node keeps gpuenv's reason rather than "Prolog error"; the health check
// run by hand once the node is fixed resumes it.
func TestHealthSlurmProlog(t *testing.T) {
	n := startSlurm(t, "Prolog=/usr/local/sbin/node-health")
	r := n.r

	if res := r.Sh("timeout 60 srun -N1 -t 1 /bin/echo ran"); res.Code != 0 || strings.TrimSpace(res.Stdout) != "ran" {
		t.Fatalf("srun on the healthy node: %s\n%s", res, n.logs())
	}
	if state, _ := n.node(); drained(state) {
		t.Fatalf("the healthy node was drained: %s", state)
	}

	breakNode(r)
	job := strings.TrimSpace(r.MustSh("sbatch --parsable -N1 -t 1 --wrap /bin/true"))
	_, reason := n.wait("broken node after a job", func(state, _ string) bool { return drained(state) })
	if !strings.HasPrefix(reason, "gpuenv: CUDA_VISIBLE_DEVICES hides GPUs") {
		t.Errorf("drain reason %q, want gpuenv's\n%s", reason, n.logs())
	}
	if out := r.MustSh("scontrol show job " + job); strings.Contains(out, "JobState=COMPLETED") {
		t.Errorf("the job ran on the broken node:\n%s", out)
	}

	fixNode(r)
	res := r.Chroot([]string{"SLURMD_NODENAME=gpunode"}, "/usr/local/sbin/node-health")
	if res.Code != 0 {
		t.Fatalf("health check by hand: %s\n%s", res, n.logs())
	}
	n.wait("fixed node", func(state, _ string) bool { return !drained(state) })
	h.Report("slurm Prolog: gpuenv's drain kept over \"Prolog error\"; the health check by hand took %s (Slurm allows 60s)", res.Took)
}

// slurmdCgroups gives the root what slurmd 22.05 needs of cgroups: it
// starts its cgroup plugin whatever the task and process-tracking plugins,
// and refuses to run unless /sys/fs/cgroup is a cgroup v2 file system or,
// for v1, a tmpfs holding the name=systemd hierarchy. The machine's own
// mount is bound in (v2) or its named systemd hierarchy, which has no
// controllers (v1); with proctrack/linuxproc and task/none slurmd only
// looks at it.
func slurmdCgroups(t *testing.T, r *Root) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		t.Fatalf("this machine's cgroups: %v", err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		r.mount("/sys/fs/cgroup", r.Path("/sys/fs/cgroup"), "", unix.MS_BIND, "")
		return
	}
	r.mount("tmpfs", r.Path("/sys/fs/cgroup"), "tmpfs", 0, "mode=0755")
	if err := os.Mkdir(r.Path("/sys/fs/cgroup/systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.mount("/sys/fs/cgroup/systemd", r.Path("/sys/fs/cgroup/systemd"), "", unix.MS_BIND, "")
}

// healthRuns counts the health check's runs in its log: each prints one
// "Node gpunode" line.
func healthRuns(r *Root) int {
	n, _ := strconv.Atoi(strings.TrimSpace(r.Sh("grep -c '^Node gpunode' /var/log/node-health.log || true").Stdout))
	return n
}

// nodeField is a field of `scontrol show node`: State's first word, or
// Reason's whole line less scontrol's "[user@time]".
func nodeField(out, field string) string {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, field); ok {
			if field == "Reason=" {
				if i := strings.LastIndex(v, " ["); i >= 0 {
					v = v[:i]
				}
				return v
			}
			v, _, _ = strings.Cut(v, " ")
			return v
		}
	}
	return ""
}
