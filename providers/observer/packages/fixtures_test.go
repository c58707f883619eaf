package packages

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuenv/gpuenv/providers/host"
	"github.com/gpuenv/gpuenv/providers/host/hosttest"
	"github.com/gpuenv/gpuenv/providers/host/pkgdb"
)

// TestFixtures observes the shared fixture roots: each Debian-family one
// carries a real-size database (the shared base of real packages plus its
// own GPU packages).
func TestFixtures(t *testing.T) {
	type pkg struct {
		name, version, state string
		hold                 bool
	}
	cases := []struct {
		fixture string
		present []pkg
		absent  []string
		count   int // relevant packages
	}{
		{"ubuntu2204-h100-fresh", []pkg{{"linux-image-5.15.0-105-generic", "5.15.0-105.115", "installed", false}, {"linux-headers-5.15.0-105-generic", "5.15.0-105.115", "installed", false}}, []string{"nvidia-driver-550-open", "dkms", "cuda-toolkit-12-4"}, 6},
		{"ubuntu2204-working", []pkg{
			{"nvidia-driver-550-open", "550.54.15-0ubuntu1", "installed", true},
			{"libnvidia-compute-550", "550.54.15-0ubuntu1", "installed", false},
			{"cuda-drivers-550", "550.54.15-1", "installed", false},
			{"nvidia-fabricmanager-550", "550.54.15-1", "installed", false},
			{"cuda-toolkit-12-4", "12.4.1-1", "installed", false},
			{"libcudnn9-cuda-12", "9.1.0.70-1", "installed", false},
			{"libnccl2", "2.21.5-1+cuda12.4", "installed", false},
			{"dkms", "2.8.7-2ubuntu2.2", "installed", false},
			{"linux-headers-5.15.0-94-generic", "5.15.0-94.104", "installed", false},
		}, nil, 0},
		{"ubuntu2204-mismatch", []pkg{
			{"nvidia-driver-550-open", "550.127.05-0ubuntu1", "installed", false},
			{"libnvidia-compute-550", "550.127.05-0ubuntu1", "installed", false},
			{"nvidia-dkms-550-open", "550.127.05-0ubuntu1", "installed", false},
		}, nil, 0},
		{"debian12-distro", []pkg{
			{"nvidia-driver", "535.261.03-1", "installed", false},
			{"nvidia-smi", "535.261.03-1", "installed", false},
			{"libnvidia-ml1", "535.261.03-1", "installed", false},
			{"nvidia-kernel-dkms", "535.261.03-1", "installed", false},
			{"nvidia-cuda-toolkit", "11.8.89~11.8.0-5~deb12u1", "installed", false},
			{"python3-torch", "1.13.1+dfsg-4", "installed", false},
			{"linux-image-6.1.0-27-amd64", "6.1.115-1", "installed", false},
			{"linux-headers-6.1.0-28-amd64", "6.1.119-1", "installed", false},
		}, []string{"linux-headers-6.1.0-27-amd64"}, 0},
		{"tensorflow-no-cudnn", []pkg{
			{"nvidia-driver-545", "545.23.08-0ubuntu1", "installed", false},
			{"cuda-toolkit-12-3", "12.3.2-1", "installed", false},
		}, []string{"libcudnn8", "libcudnn9-cuda-12"}, 0},
		{"nouveau", []pkg{{"linux-image-5.15.0-105-generic", "5.15.0-105.115", "installed", false}}, []string{"nvidia-driver-550-open", "dkms"}, 6},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			h := hosttest.Fixture(t, c.fixture)
			got, warns := Observe(context.Background(), h, "deb")
			hosttest.NoWarnings(t, warns)
			if got.Total < 900 {
				t.Errorf("Total = %d: the fixture's database is not real-size", got.Total)
			}
			for _, w := range c.present {
				p, ok := pkgdb.Installed(got, w.name, pkgdb.FilesPresent)
				if !ok || p.Version != w.version || string(p.State) != w.state || p.Hold != w.hold {
					t.Errorf("%s = %+v, %v; want %+v", w.name, p, ok, w)
				}
			}
			for _, n := range c.absent {
				if p, ok := pkgdb.Installed(got, n, pkgdb.FilesPresent); ok {
					t.Errorf("%s present: %+v", n, p)
				}
			}
			if c.count != 0 && len(got.Packages) != c.count {
				t.Errorf("%d relevant packages, want %d: %+v", len(got.Packages), c.count, got.Packages)
			}
		})
	}
}

// TestFixtureRHEL9 serves the RHEL 9 fixture's rpm output through a fake
// runner, as the real rpm inside the root would print it.
func TestFixtureRHEL9(t *testing.T) {
	out, err := os.ReadFile(filepath.Join(hosttest.TestdataDir(t), "rpm", "rhel9.qa"))
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{stdout: string(out)}
	h := hosttest.Fixture(t, "rhel9", host.WithRunner(r))
	got, warns := Observe(context.Background(), h, "rpm")
	hosttest.NoWarnings(t, warns)
	if r.argv == nil || r.argv[2] != "rpm" {
		t.Errorf("ran %q", r.argv)
	}
	for name, version := range map[string]string{
		"nvidia-driver":         "3:550.90.07-1.el9",
		"kmod-nvidia-open-dkms": "3:550.90.07-1.el9",
		"cuda-toolkit-12-4":     "12.4.1-1",
		"kernel-devel":          "5.14.0-427.13.1.el9_4",
		"dkms":                  "3.0.13-1.el9",
	} {
		if p, ok := pkgdb.Installed(got, name, pkgdb.FilesPresent); !ok || p.Version != version {
			t.Errorf("%s = %+v, %v; want %s", name, p, ok, version)
		}
	}
	if _, ok := pkgdb.Installed(got, "bash", pkgdb.FilesPresent); ok {
		t.Error("bash reported")
	}
	if got.Total != 62 {
		t.Errorf("Total = %d, want 62", got.Total)
	}
}
