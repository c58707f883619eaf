package groups

import "testing"

func FuzzParseGroup(f *testing.F) {
	f.Add([]byte("root:x:0:\nvideo:x:44:alice,bob\nrender:x:109:\n+nis\n"))
	f.Add([]byte("video:x:44:alice\nrender:x:1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		groups, _ := ParseGroup(data)
		for _, g := range groups {
			if g.Name == "" || g.Members == nil {
				t.Fatalf("group %+v", g)
			}
		}
	})
}

func FuzzParsePasswd(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\nubuntu:x:1000:1000:Ubuntu:/home/ubuntu:/bin/bash\n"))
	f.Add([]byte("bad:x:1003"))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, _ := ParsePasswd(data)
		for _, u := range users {
			if u.Name == "" {
				t.Fatalf("user %+v", u)
			}
		}
	})
}
