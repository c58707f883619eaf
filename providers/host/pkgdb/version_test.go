package pkgdb

import (
	"maps"
	"slices"
	"testing"
)

// TestPickVersions: a set of packages goes together at one raw version
// for apt, at one upstream version for dnf, where NVIDIA's repository
// gives one driver's packages different epochs and releases.
func TestPickVersions(t *testing.T) {
	for _, tc := range []struct {
		name, manager string
		listed        []string
		others        map[string][]string
		want          string
		versions      map[string]string
		rejected      []string
	}{
		{
			name:    "NVIDIA's rhel9 driver: cuda-drivers 0:V-1, the rest 3:V-1.el9",
			manager: "dnf",
			listed:  []string{"550.90.07-1", "550.54.15-1"},
			others: map[string][]string{
				"kmod-nvidia-latest-dkms": {"3:550.90.07-1.el9", "3:550.54.15-1.el9"},
				"nvidia-kmod-common":      {"3:550.90.07-1.el9"},
			},
			want:     "550.90.07-1",
			versions: map[string]string{"kmod-nvidia-latest-dkms": "3:550.90.07-1.el9", "nvidia-kmod-common": "3:550.90.07-1.el9"},
		},
		{
			name:     "the newest EVR of an upstream version, whatever the order listed",
			manager:  "dnf",
			listed:   []string{"550.90.07-1"},
			others:   map[string][]string{"kmod-nvidia-latest-dkms": {"3:550.90.07-1.el9", "3:550.90.07-2.el9", "2:550.90.07-9.el9"}},
			want:     "550.90.07-1",
			versions: map[string]string{"kmod-nvidia-latest-dkms": "3:550.90.07-2.el9"},
		},
		{
			name:     "a package lacking the upstream version passes it over",
			manager:  "dnf",
			listed:   []string{"550.90.07-1", "550.54.15-1"},
			others:   map[string][]string{"kmod-nvidia-latest-dkms": {"3:550.54.15-1.el9"}},
			want:     "550.54.15-1",
			versions: map[string]string{"kmod-nvidia-latest-dkms": "3:550.54.15-1.el9"},
			rejected: []string{"550.90.07-1 (no kmod-nvidia-latest-dkms 550.90.07)"},
		},
		{
			name:     "the same EVR needs no version of its own",
			manager:  "dnf",
			listed:   []string{"3:550.90.07-1.el9"},
			others:   map[string][]string{"nvidia-kmod-common": {"3:550.90.07-1.el9"}},
			want:     "3:550.90.07-1.el9",
			versions: nil,
		},
		{
			name:     "apt: one raw version, as before",
			manager:  "apt",
			listed:   []string{"535.309.01-0+deb12u1", "535.261.03-1"},
			others:   map[string][]string{"nvidia-kernel-dkms": {"535.309.01-1", "535.261.03-1"}},
			want:     "535.261.03-1",
			rejected: []string{"535.309.01-0+deb12u1 (no nvidia-kernel-dkms 535.309.01-0+deb12u1)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, versions, rejected := PickVersions(tc.manager, tc.listed, tc.others, nil)
			if got != tc.want || !maps.Equal(versions, tc.versions) || !slices.Equal(rejected, tc.rejected) {
				t.Errorf("picked %q %v, rejected %q; want %q %v, rejected %q", got, versions, rejected, tc.want, tc.versions, tc.rejected)
			}
			if v, r := PickVersion(tc.manager, tc.listed, tc.others, nil); v != got || !slices.Equal(r, rejected) {
				t.Errorf("PickVersion %q %q differs from PickVersions", v, r)
			}
		})
	}
}
