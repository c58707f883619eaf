package environment

import "testing"

func FuzzParse(f *testing.F) {
	f.Add([]byte("PATH=\"/usr/local/sbin:/usr/bin\"\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n"))
	f.Add([]byte("[Manager]\nDefaultEnvironment=\"CUDA_VISIBLE_DEVICES=0,1\" NVIDIA_DRIVER_CAPABILITIES=compute\\ x 'PATH=/a b\n"))
	f.Add([]byte("if [ -d /x ]; then\n    export LD_LIBRARY_PATH=\"/x${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\"\nfi\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		as, _ := ParseEnvironmentFile("/etc/environment", data)
		as = append(as, ParseShell("/etc/profile.d/x.sh", data)...)
		as = append(as, ParseSystemd("/etc/systemd/system.conf", data)...)
		for _, a := range as {
			if !Interesting(a.Name) || a.Line < 1 {
				t.Fatalf("assignment %+v", a)
			}
		}
	})
}
