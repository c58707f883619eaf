package pkgdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuenv/gpuenv/providers/host/hosttest"
)

func TestRelevant(t *testing.T) {
	yes := []string{
		"nvidia-driver", "nvidia-driver-550-open", "libnvidia-compute-550", "cuda-toolkit-12-4",
		"cuda-drivers-550", "libcuda1", "libcudnn9-cuda-12", "libcudnn8", "cudnn9-cuda-12",
		"nvidia-container-toolkit", "python3-torch", "python3-torch-cuda", "python3-tensorflow",
		"firmware-nvidia-gsp", "libnccl2", "linux-headers-6.1.0-28-amd64", "linux-image-amd64",
		"dkms", "nvidia-kernel-dkms", "libcublas11", "libnppc11", "libcudart11.0", "kmod-nvidia-open-dkms",
		"linux-modules-nvidia-550-generic",
	}
	no := []string{
		"", "a", "libc6", "bash", "libcurl4", "libcups2", "python3", "python3-numpy", "linux-base",
		"libnv", "cud", "xserver-xorg-core", "firmware-linux-free", "nvme-cli",
	}
	for _, n := range yes {
		if !Relevant(n) || !relevantBytes([]byte(n)) {
			t.Errorf("Relevant(%q) = false, want true", n)
		}
	}
	for _, n := range no {
		if Relevant(n) || relevantBytes([]byte(n)) {
			t.Errorf("Relevant(%q) = true, want false", n)
		}
	}
}

func TestDpkgWarningsCapped(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "Package: nvidia-%d\nStatus: bogus\n\n", i)
	}
	db := parseStatus([]byte(b.String()), nil, false)
	ws := db.warnings(StatusPath)
	if len(ws) != maxProblems+1 || !strings.Contains(ws[maxProblems].Message, "40 more") {
		t.Errorf("got %d warnings, last %v", len(ws), ws[len(ws)-1])
	}
}

func TestUpstream(t *testing.T) {
	cases := map[string]string{
		"11.8.89~11.8.0-5~deb12u1": "11.8.89~11.8.0",
		"1:1.2.13.dfsg-1":          "1.2.13.dfsg",
		"550.54.15-0ubuntu1":       "550.54.15",
		"12.4.1-1":                 "12.4.1",
		"3:550.54.15-1.el9":        "550.54.15",
		"2.36":                     "2.36",
		"a:b-c":                    "a:b",
	}
	for in, want := range cases {
		if got := Upstream(in); got != want {
			t.Errorf("Upstream(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReadStatusInPieces: the real-size database read through buffers of
// every kind of size (smaller than one paragraph, than two, and the one
// observation uses) parses as it does whole.
func TestReadStatusInPieces(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(hosttest.Build(t, "ubuntu2204-working"), StatusPath))
	if err != nil {
		t.Fatal(err)
	}
	want := parseStatus(data, map[string]bool{"libcudnn9-cuda-12:amd64": true}, false)
	if len(want.packages) < 40 || want.total < 900 {
		t.Fatalf("the fixture's database has %d packages, %d relevant: too few to test with", want.total, len(want.packages))
	}
	for _, size := range []int{100, 1000, 32 << 10} {
		buf := make([]byte, size)
		got, err := readStatus(strings.NewReader(string(data)), &buf, map[string]bool{"libcudnn9-cuda-12:amd64": true}, false)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(statusDB{})); diff != "" {
			t.Errorf("read through %d bytes (-whole +in pieces):\n%s", size, diff)
		}
	}
}
