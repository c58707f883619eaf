package version

import (
	"strings"
	"testing"
)

func TestCompareDebian(t *testing.T) {
	checkOrder(t, "CompareDebian", CompareDebian, []comparison{
		{"535.309.01-0+deb12u1", "535.309.01-0+deb12u1", 0},
		{"535.309.01-0+deb12u1", "535.261.03-1", 1},
		{"535.309.01-0+deb12u1", "535.309.01-1", -1},
		{"535.309.01-0+deb12u1", "535.309.01-0+deb12u2", -1},
		{"535.309.01-0+deb12u1", "535.309.01", 1},
		{"570.124.06-1", "570.26-1", 1},
		{"11.8.89~11.8.0-5~deb12u1", "11.8.89-1", -1},
		{"11.8.89~11.8.0-5~deb12u1", "11.8.89~11.8.0-5", -1},
		{"11.8.89~11.8.0-5~deb12u1", "11.8.88-9", 1},
		{"1:2.0-1", "3.0-1", 1},
		{"1:2.0-1", "2:1.0-1", -1},
		{"0:2.0-1", "2.0-1", 0},
		{"1.13.1+dfsg-4", "1.13.1-4", 1},
		{"1.13.1+dfsg-4", "1.13.1+dfsg-10", -1},
		{"1.0~rc1-1", "1.0-1", -1},
		{"1.0-1~bpo12+1", "1.0-1", -1},
	})
}

func TestCompareDebianErrors(t *testing.T) {
	tests := []struct {
		a, b, err string
	}{
		{"", "1.0", `invalid debian version "": version string is empty`},
		{"1.0", "", `invalid debian version "": version string is empty`},
		{"x:1.0", "1.0", `invalid debian version "x:1.0": epoch`},
		{"1.0", "v1.0", `invalid debian version "v1.0": version number does not start with digit`},
		{"1 0", "1.0", `embedded spaces`},
		{"1.0-a_b", "1.0", `invalid character in revision number`},
	}
	for _, tt := range tests {
		_, err := CompareDebian(tt.a, tt.b)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("CompareDebian(%q, %q) error = %v, want %q", tt.a, tt.b, err, tt.err)
		}
	}
}

func TestFromDebian(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"535.309.01-0+deb12u1", "535.309.01"},
		{"11.8.89~11.8.0-5~deb12u1", "11.8.89"},
		{"1:2.0-1", "2.0"},
		{"1.13.1+dfsg-4", "1.13.1"},
		{"550.54.15-1", "550.54.15"},
		{"9.1.0.70-1", "9.1.0.70"},
		{"12.4.127-1", "12.4.127"},
		{"3:535.261.03", "535.261.03"},
		{"2.5.1.a-1", "2.5.1"},
		{"10-2", "10"},
		{"2.36-9+deb12u4", "2.36"},
		{"1.0-1-2", "1.0"},
	}
	for _, tt := range tests {
		v, err := FromDebian(tt.in)
		if err != nil {
			t.Errorf("FromDebian(%q): %v", tt.in, err)
			continue
		}
		if v.String() != tt.want || !v.Equal(MustParse(tt.want)) {
			t.Errorf("FromDebian(%q) = %q, want %q", tt.in, v, tt.want)
		}
	}
	// The point of FromDebian: package versions meet spec constraints.
	v, _ := FromDebian("535.309.01-0+deb12u1")
	if !MustParseConstraint(">= 535, < 536").Check(v) || MustParseConstraint("535.261.03").Check(v) {
		t.Errorf("%s checked wrongly against driver constraints", v)
	}
}

func TestFromDebianErrors(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{"", `invalid debian version "": version string is empty`},
		{"1:", `invalid debian version "1:": nothing after colon`},
		{"abc-1", `invalid debian version "abc-1": version number does not start with digit`},
		{"1:abc", `does not start with digit`},
		{"99999999999999999999.1-1", `debian version "99999999999999999999.1-1": invalid version "99999999999999999999.1": part "99999999999999999999" is out of range`},
	}
	for _, tt := range tests {
		_, err := FromDebian(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("FromDebian(%q) error = %v, want %q", tt.in, err, tt.err)
		}
	}
}

func TestCheckDebian(t *testing.T) {
	for _, v := range []string{"535.309.01-0+deb12u1", "1:2.0~rc1-1", "11.8.89~11.8.0-5~deb12u1", "550.127.05-0ubuntu1", "1.0", "2:1.0:1-1"} {
		if err := CheckDebian(v); err != nil {
			t.Errorf("CheckDebian(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", "-1", "-oAPT::Get::Trivial=1", "1.0 foo", " 1.0", "1.0\n", "a1.0", "1.0-", "1:", "1.0-1_2", "1.0/1"} {
		if err := CheckDebian(v); err == nil {
			t.Errorf("CheckDebian(%q) accepted", v)
		}
	}
}

func TestCheckRPM(t *testing.T) {
	for _, v := range []string{"550.54.15-1.el9", "3:550.54.15-1.el9", "12.4.1-1", "1.0~rc1^git1-2", "1.0"} {
		if err := CheckRPM(v); err != nil {
			t.Errorf("CheckRPM(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", "-1", "--setopt=x", "1.0-1 x", "1.0-1-2", "1:", ":1.0-1", "1.0-"} {
		if err := CheckRPM(v); err == nil {
			t.Errorf("CheckRPM(%q) accepted", v)
		}
	}
}
