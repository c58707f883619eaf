package pkgindex

import (
	"bytes"
	"testing"
)

// FuzzParseAptConf: any apt.conf.d drop-in parses without a panic, and
// the settings it yields are text of the file, not made up.
func FuzzParseAptConf(f *testing.F) {
	for _, s := range []string{
		`APT::Default-Release "stable";`,
		"APT { Architecture \"amd64\"; Default-Release \"bookworm\"; };",
		"// c\n/* x \"y\" */ APT::Architecture \"arm64\"; # z",
		"APT { { } } } ; \"",
		`APT::Default-Release "a // not a comment";`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg aptConfig
		parseAptConf(data, &cfg)
		for _, v := range []string{cfg.defaultRelease, cfg.architecture} {
			if v != "" && !bytes.Contains(data, []byte(v)) {
				t.Fatalf("parseAptConf(%q) found %q, which the file does not hold", data, v)
			}
		}
		var again aptConfig
		parseAptConf(data, &again)
		if again != cfg {
			t.Fatalf("parseAptConf(%q) gave %+v, then %+v", data, cfg, again)
		}
	})
}
