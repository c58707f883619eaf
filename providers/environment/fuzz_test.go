package environment

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte("PATH=\"/usr/local/sbin:/usr/bin\"\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n"))
	f.Add([]byte("[Manager]\nDefaultEnvironment=\"CUDA_VISIBLE_DEVICES=0,1\" NVIDIA_DRIVER_CAPABILITIES=compute\\ x 'PATH=/a b\n"))
	f.Add([]byte("# Written by gpuenv\nCUDA_VISIBLE_DEVICES=4,MIG-0c4b2a1e-3f3e-5a6d-8b9c-0d1e2f3a4b5c\r\nexport X=1\n"))
	f.Add([]byte("if [ -d /x ]; then\n    export LD_LIBRARY_PATH=\"/x${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\"\nfi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		as, _ := ParseEnvironmentFile("/etc/environment", data)
		as = append(as, ParseShell("/etc/profile.d/x.sh", data)...)
		as = append(as, ParseSystemd("/etc/systemd/system.conf", data)...)
		// A team file's settings are what the profile script exports:
		// one line each, of the one variable it reads.
		teams, _ := ParseTeamFile(TeamFile("vision"), "vision", data)
		for _, a := range teams {
			if a.Name != teamVariable || a.Group != "vision" || strings.ContainsAny(a.Value, "\n") {
				t.Fatalf("team setting %+v", a)
			}
		}
		as = append(as, teams...)
		for _, a := range as {
			if !Interesting(a.Name) || a.Line < 1 {
				t.Fatalf("assignment %+v", a)
			}
		}
	})
}
