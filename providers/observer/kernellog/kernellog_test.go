package kernellog

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuenv/gpuenv/planner/facts"
	"github.com/gpuenv/gpuenv/providers/host"
)

// root lays files out under a fresh root and returns its host.
func root(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	dir := t.TempDir()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A previous boot's refusal is history: only the lines after the last
// "Linux version" count, and the source says the boot's start was found.
func TestCurrentBootOnly(t *testing.T) {
	log := `Nov 30 09:00:00 gpu1 kernel: [    0.000000] Linux version 6.8.0-40-generic (buildd@lcy02) #40-Ubuntu SMP
Nov 30 09:00:05 gpu1 kernel: [    5.559842] NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)
Nov 30 09:00:05 gpu1 kernel: [    5.559842] NVRM: installed in this system requires use of the NVIDIA open kernel modules.
Dec  1 08:00:00 gpu1 kernel: [    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP
Dec  1 08:00:04 gpu1 kernel: [    4.100000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build  (dvs-builder@U22-I3-AE18-09-3)  Wed Oct 29 23:15:11 UTC 2025
Dec  1 09:30:00 gpu1 kernel: [ 5400.000000] usb 1-1: new high-speed USB device number 3
`
	l := Observe(context.Background(), root(t, map[string]string{"var/log/kern.log": log}), DefaultLimits)
	if l == nil || len(l.Sources) != 1 || !l.Sources[0].BootStart || l.Sources[0].Path != "/var/log/kern.log" {
		t.Fatalf("sources: %+v", l)
	}
	if len(l.Events) != 0 {
		t.Errorf("the previous boot's refusal was counted: %+v", l.Events)
	}
	if l.Module == nil || l.Module.Flavor != "open" || l.Module.Version != "580.105.08" {
		t.Errorf("module: %+v", l.Module)
	}
}

// The driver's refusals as users' logs show them, in each way a log
// writes a record of several lines: /dev/kmsg's one record (escaped
// newlines), a syslog file's line per line, journalctl's indented
// continuation.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		want      facts.KernelEvent
	}{
		{
			// https://github.com/negativo17/nvidia-driver/issues/158
			"gsp, journal", `Aug 14 10:00:01 host kernel: NVRM: The NVIDIA GPU 0000:09:00.0 (PCI ID: 10de:1d01)
             NVRM: installed in this system is not supported by open
             NVRM: nvidia.ko because it does not include the required GPU
             NVRM: System Processor (GSP).
             NVRM: Please see the 'Open Linux Kernel Modules' and 'GSP
             NVRM: Firmware' sections in the driver README, available on
             NVRM: the Linux graphics driver download page at
             NVRM: www.nvidia.com.
Aug 14 10:00:01 host kernel: nvidia 0000:09:00.0: probe with driver nvidia failed with error -1
`, facts.KernelEvent{Kind: facts.EventGSPRequired, PCIAddress: "0000:09:00.0", PCIID: "10de:1d01"},
		},
		{
			"open required, syslog lines", `Dec  1 08:00:05 host kernel: [    5.559842] NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)
Dec  1 08:00:05 host kernel: [    5.559842] NVRM: installed in this system requires use of the NVIDIA open kernel modules.
`, facts.KernelEvent{Kind: facts.EventOpenModulesRequired, PCIAddress: "0000:02:00.0", PCIID: "10de:2c58"},
		},
		{
			"open required, rsyslog escapes", "Dec  1 08:00:05 host kernel: [    5.559842] NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2C31)#012NVRM: installed in this system requires use of the NVIDIA open kernel modules.\n",
			facts.KernelEvent{Kind: facts.EventOpenModulesRequired, PCIAddress: "0000:02:00.0", PCIID: "10de:2c31"},
		},
		{
			// https://github.com/ZaidQureshi/bam/issues/38
			"unsupported release", `Oct 19 10:00:00 host kernel: [  422.450961] NVRM: The NVIDIA GPU 0000:8a:00.0 (PCI ID: 10de:26b9)
Oct 19 10:00:00 host kernel: [  422.450961] NVRM: installed in this system is not supported by the
Oct 19 10:00:00 host kernel: [  422.450961] NVRM: NVIDIA 470.256.02 driver release.
`, facts.KernelEvent{Kind: facts.EventUnsupportedGPU, PCIAddress: "0000:8a:00.0", PCIID: "10de:26b9", Driver: "470.256.02"},
		},
		{
			// https://github.com/siderolabs/extensions/issues/227: Talos
			// prints the kernel's records with kmsg's escapes.
			"unsupported release, kmsg escapes", `kern: warning: [2023-09-14T03:08:37.411164757Z]: NVRM: The NVIDIA GPU 0000:00:10.0 (PCI ID: 10de:1b38)\x0aNVRM: installed in this system is not supported by the\x0aNVRM: NVIDIA 535.54.03 driver release.\x0aNVRM: Please see 'Appendix A - Supported NVIDIA GPU Products'\x0aNVRM: in this release's README, available on the operating system\x0aNVRM: specific graphics driver download page at www.nvidia.com.
`, facts.KernelEvent{Kind: facts.EventUnsupportedGPU, PCIAddress: "0000:00:10.0", PCIID: "10de:1b38", Driver: "535.54.03"},
		},
		{
			// https://github.com/MrMEEE/bumblebee-Old-and-abbandoned/issues/537
			"unsupported release, old wording", `Jul 31 14:10:32 Demitrius kernel: [ 2739.854585] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:0a75) installed
Jul 31 14:10:32 Demitrius kernel: [ 2739.854587] NVRM: in this system is not supported by the 280.04 NVIDIA Linux
Jul 31 14:10:32 Demitrius kernel: [ 2739.854589] NVRM: graphics driver release.  Please see 'Appendix A -
`, facts.KernelEvent{Kind: facts.EventUnsupportedGPU, PCIAddress: "0000:01:00.0", PCIID: "10de:0a75", Driver: "280.04"},
		},
		{
			"legacy", `Oct  1 10:00:00 host kernel: [    6.000000] NVRM: The NVIDIA GeForce GT 1030 GPU installed in this system is
Oct  1 10:00:00 host kernel: [    6.000000] NVRM:   supported through the NVIDIA 580.xx Legacy drivers. Please
Oct  1 10:00:00 host kernel: [    6.000000] NVRM:   visit http://www.nvidia.com/object/unix.html for more
Oct  1 10:00:00 host kernel: [    6.000000] NVRM:   information.  The 610.43.02 NVIDIA driver will ignore this GPU.
`, facts.KernelEvent{Kind: facts.EventLegacyGPU, GPUName: "GeForce GT 1030", Branch: "580", Driver: "610.43.02"},
		},
		{
			// https://github.com/beclab/Olares/pull/3963
			"nova", "Aug 17 10:00:00 host kernel: [  201.910514] NVRM: GPU 0000:01:00.0 is already bound to NovaCore.\n",
			facts.KernelEvent{Kind: facts.EventBoundToNova, PCIAddress: "0000:01:00.0"},
		},
		{
			// https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1104
			"rm init", "Apr 10 10:00:00 host kernel: [   21.091872] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0x40:2168)\n",
			facts.KernelEvent{Kind: facts.EventRmInitFailed, PCIAddress: "0000:01:00.0", Code: "0x62:0x40:2168"},
		},
		{
			// https://github.com/Start9Labs/start-technologies/pull/3693
			"xid", "Aug 14 10:00:00 host kernel: NVRM: Xid (PCI:000f:01:00): 169, fd8cd000 94000000\n",
			facts.KernelEvent{Kind: facts.EventXid, PCIAddress: "000f:01:00.0", Code: "169"},
		},
		{
			// The MIG form of the line, as NVIDIA's Xid catalogue gives
			// it (docs.nvidia.com/deploy/xid-errors): the GPU instance
			// follows the address.
			"xid of a GPU instance", "Aug 14 10:00:00 host kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=4242, Contained: CE User Channel\n",
			facts.KernelEvent{Kind: facts.EventXid, PCIAddress: "0000:01:00.0", Code: "94"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Observe(context.Background(), root(t, map[string]string{"var/log/syslog": tc.log}), DefaultLimits)
			if l == nil || len(l.Events) != 1 {
				t.Fatalf("events: %+v", l)
			}
			e := l.Events[0]
			if e.Kind != tc.want.Kind || e.PCIAddress != tc.want.PCIAddress || e.PCIID != tc.want.PCIID || e.Driver != tc.want.Driver ||
				e.Branch != tc.want.Branch || e.GPUName != tc.want.GPUName || e.Code != tc.want.Code || e.Source != "/var/log/syslog" || e.Count != 1 {
				t.Errorf("got %+v\nwant %+v", e, tc.want)
			}
			if l.Sources[0].BootStart {
				t.Errorf("a log without a boot line claims the boot's start: %+v", l.Sources[0])
			}
		})
	}
}

// A refusal repeated at every probe is one event with its count, and a
// /dev/kmsg record (escaped newlines, a dictionary line) reads as a line.
func TestRepeatsAndKmsgRecords(t *testing.T) {
	var lines []line
	for range 3 {
		rec := []byte("3,1021,5559842,-;NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:2c58)\\x0a               NVRM: installed in this system requires use of the NVIDIA open kernel modules.\n SUBSYSTEM=pci\n")
		lines = append(lines, line{text: kmsgText(rec), source: host.KmsgPath})
		rec = []byte("3,1022,5559858,-;NVRM: GPU 0000:02:00.0: RmInitAdapter failed! (0x22:0x56:884)\n")
		lines = append(lines, line{text: kmsgText(rec), source: host.KmsgPath})
	}
	ev, _ := events(lines)
	if len(ev) != 2 || ev[0].Kind != facts.EventOpenModulesRequired || ev[0].Count != 3 || ev[1].Kind != facts.EventRmInitFailed || ev[1].Count != 3 {
		t.Fatalf("%+v", ev)
	}
}

// A log rotated since the boot: the current file has no boot line, so
// the rotated one is read on to it, and their lines keep their order.
func TestRotated(t *testing.T) {
	h := root(t, map[string]string{
		"var/log/kern.log.1": "Dec  1 08:00:00 h kernel: [    0.000000] Linux version 6.8.0-45-generic\nDec  1 08:00:04 h kernel: [    4.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 00:00:00 UTC 2025\n",
		"var/log/kern.log":   "Dec  2 08:00:00 h kernel: [86400.0] NVRM: Xid (PCI:0000:17:00): 79, pid=1234, GPU has fallen off the bus.\n",
	})
	l := Observe(context.Background(), h, DefaultLimits)
	if len(l.Sources) != 2 || l.Sources[0].BootStart || !l.Sources[1].BootStart {
		t.Fatalf("sources: %+v", l.Sources)
	}
	if l.Module == nil || l.Module.Flavor != "proprietary" || l.Module.Source != "/var/log/kern.log.1" {
		t.Errorf("module: %+v", l.Module)
	}
	if len(l.Events) != 1 || l.Events[0].Code != "79" || l.Events[0].PCIAddress != "0000:17:00.0" || l.Events[0].Source != "/var/log/kern.log" {
		t.Errorf("events: %+v", l.Events)
	}
}

// A root without any log gives no log section; one whose kern.log is a
// FIFO is refused without blocking, and says so.
func TestNoLog(t *testing.T) {
	if l := Observe(context.Background(), root(t, map[string]string{"etc/hostname": "h\n"}), DefaultLimits); l != nil {
		t.Errorf("%+v", l)
	}
	h := root(t, map[string]string{"var/log/.keep": ""})
	if err := syscallMkfifo(filepath.Join(h.Root(), "var/log/kern.log")); err != nil {
		t.Skip(err)
	}
	done := make(chan *facts.KernelLog)
	go func() { done <- Observe(context.Background(), h, DefaultLimits) }()
	select {
	case l := <-done:
		if l == nil || len(l.Sources) != 1 || l.Sources[0].Error == "" {
			t.Errorf("%+v", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO kern.log blocked the read")
	}
}

// On the running system the kernel's buffer is read and the read ends
// at its newest record instead of waiting for more.
func TestKmsgLive(t *testing.T) {
	h, err := host.New("/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(host.KmsgPath); err != nil {
		t.Skip(err)
	}
	start := time.Now()
	l := Observe(context.Background(), h, DefaultLimits)
	if l == nil || len(l.Sources) == 0 {
		t.Fatal("no log")
	}
	s := l.Sources[0]
	if s.Path != host.KmsgPath {
		t.Fatalf("%+v", l.Sources)
	}
	if s.Error != "" {
		t.Skipf("not readable here: %s", s.Error)
	}
	if s.Bytes == 0 || !s.BootStart {
		t.Errorf("%+v", s)
	}
	if d := time.Since(start); d > DefaultLimits.Time {
		t.Errorf("took %s", d)
	}
}

// The bound holds when the boot is larger than it: the scan stops at
// Bytes and says the log was truncated.
func TestBound(t *testing.T) {
	var b bytes.Buffer
	writeLog(&b, 4<<20, false)
	lim := DefaultLimits
	lim.Bytes = 1 << 20
	tl, err := scanTail(bytes.NewReader(b.Bytes()), int64(b.Len()), lim.Bytes, lim.Lines, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !tl.truncated || tl.boot || tl.bytes > lim.Bytes+chunk {
		t.Errorf("read %d bytes, truncated %v, boot %v", tl.bytes, tl.truncated, tl.boot)
	}
	if len(tl.lines) == 0 || !strings.Contains(string(tl.lines[0]), "Xid") {
		t.Errorf("the newest lines were not kept: %d", len(tl.lines))
	}
}

// writeLog writes size bytes of a busy kern.log: a boot line at the
// start when boot is set, then mostly other messages with an Xid now and
// then, as a GPU node's log looks after days of running.
func writeLog(b *bytes.Buffer, size int, boot bool) {
	if boot {
		b.WriteString("Dec  1 08:00:00 gpu1 kernel: [    0.000000] Linux version 6.8.0-45-generic (buildd@lcy02) #45-Ubuntu SMP\n")
	}
	for i := 0; b.Len() < size; i++ {
		if i%5000 == 0 {
			fmt.Fprintf(b, "Dec  1 09:%02d:00 gpu1 kernel: [%6d.000000] NVRM: Xid (PCI:0000:17:00): 13, pid=%d, Graphics Exception\n", i%60, i, i)
			continue
		}
		fmt.Fprintf(b, "Dec  1 09:%02d:00 gpu1 kernel: [%6d.000000] audit: type=1400 audit(1701421200.%03d:%d): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.x\" name=\"/proc/%d/mounts\"\n", i%60, i, i%1000, i, i)
	}
}

// BenchmarkKernLog100MB reads a 100 MB kern.log through the host handle,
// as observe does: once with this boot's start 1 MB from the end (the
// common case: days of earlier boots above it), and once with no boot
// line at all, where the byte bound ends the read.
func BenchmarkKernLog100MB(b *testing.B) {
	for _, bc := range []struct {
		name string
		boot int // bytes of the current boot, at the end
	}{{"boot-1MB-from-end", 1 << 20}, {"no-boot-line", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			var buf bytes.Buffer
			buf.Grow(100<<20 + 4096)
			if bc.boot > 0 {
				writeLog(&buf, 100<<20-bc.boot, true)
				var cur bytes.Buffer
				writeLog(&cur, bc.boot, true)
				buf.Write(cur.Bytes())
			} else {
				writeLog(&buf, 100<<20, false)
			}
			h := root(b, map[string]string{"var/log/kern.log": buf.String()})
			buf = bytes.Buffer{}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l := Observe(context.Background(), h, DefaultLimits)
				if len(l.Events) == 0 {
					b.Fatal("no events")
				}
			}
			b.StopTimer()
			l := Observe(context.Background(), h, DefaultLimits)
			b.ReportMetric(float64(l.Sources[0].Bytes)/(1<<20), "MiB-scanned")
		})
	}
}
