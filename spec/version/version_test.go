package version

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in    string
		parts []uint64
		local string
		pre   bool
	}{
		{"535.261.03", []uint64{535, 261, 3}, "", false},
		{"12.4", []uint64{12, 4}, "", false},
		{"12.4.1", []uint64{12, 4, 1}, "", false},
		{"9.1.0.70", []uint64{9, 1, 0, 70}, "", false},
		{"8.9.7.29", []uint64{8, 9, 7, 29}, "", false},
		{"550", []uint64{550}, "", false},
		{"11.8.89", []uint64{11, 8, 89}, "", false},
		{"0", []uint64{0}, "", false},
		{"007.08", []uint64{7, 8}, "", false},
		{"1.2.3.4.5.6.7.8", []uint64{1, 2, 3, 4, 5, 6, 7, 8}, "", false},
		{"18446744073709551615", []uint64{18446744073709551615}, "", false},
		{"2.5.1+cu124", []uint64{2, 5, 1}, "cu124", false},
		{"2.5.1+cpu", []uint64{2, 5, 1}, "cpu", false},
		{"2.3.0+rocm6.1.0", []uint64{2, 3, 0}, "rocm6.1.0", false},
		{"1.13.0a0", []uint64{1, 13, 0}, "", true},
		{"1.0b2", []uint64{1, 0}, "", true},
		{"2.0.0rc1", []uint64{2, 0, 0}, "", true},
		{"2.1.0.dev20230801+cu121", []uint64{2, 1, 0}, "cu121", true},
		{"1.0.post1", []uint64{1, 0}, "", false},
		{"1.0rc1.post2.dev3+abc.7", []uint64{1, 0}, "abc.7", true},
	}
	for _, tt := range tests {
		v, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if v.String() != tt.in {
			t.Errorf("Parse(%q).String() = %q", tt.in, v.String())
		}
		if !slices.Equal(v.Parts(), tt.parts) {
			t.Errorf("Parse(%q).Parts() = %v, want %v", tt.in, v.Parts(), tt.parts)
		}
		if v.Local() != tt.local {
			t.Errorf("Parse(%q).Local() = %q, want %q", tt.in, v.Local(), tt.local)
		}
		if v.IsPrerelease() != tt.pre {
			t.Errorf("Parse(%q).IsPrerelease() = %v, want %v", tt.in, v.IsPrerelease(), tt.pre)
		}
		if v.IsZero() {
			t.Errorf("Parse(%q).IsZero() = true", tt.in)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{"", `invalid version "": empty`},
		{"v1", `invalid version "v1": must start with a digit`},
		{"V1.2", `invalid version "V1.2": must start with a digit`},
		{"-1", `invalid version "-1": must start with a digit`},
		{".1", `invalid version ".1": must start with a digit`},
		{" 1.2", `invalid version " 1.2": must start with a digit`},
		{"1.2 ", `invalid version "1.2 ": unexpected " " after "1.2"`},
		{"1..2", `invalid version "1..2": empty part after "1"`},
		{"1.", `invalid version "1.": trailing dot`},
		{"1.2.", `invalid version "1.2.": trailing dot`},
		{"5.x", `invalid version "5.x": unexpected ".x" after "5"`},
		{"5.*", `invalid version "5.*": unexpected ".*" after "5"`},
		{"1.2.3-rc", `invalid version "1.2.3-rc": unexpected "-rc" after "1.2.3"`},
		{"1.2.3-1", `invalid version "1.2.3-1": unexpected "-1" after "1.2.3"`},
		{"535.309.01-0+deb12u1", `unexpected "-0+deb12u1"`},
		{"1:2.0", `unexpected ":2.0"`},
		{"1.0rc", `invalid version "1.0rc": "rc" needs a number`},
		{"1.0a", `"a" needs a number`},
		{"1.0.post", `"post" needs a number`},
		{"1.0.devx", `"dev" needs a number`},
		{"1.0c1", `unexpected "c1" after "1.0"`},
		{"1.0.dev1.post1", `unexpected ".post1" after "1.0.dev1"`},
		{"1.0+", `empty local label`},
		{"1.0+cu124.", `empty segment in local label "cu124."`},
		{"1.0+a..b", `empty segment`},
		{"1.0+CU124", `local label "CU124" may hold only lowercase letters, digits and dots`},
		{"1.0+cu-124", `may hold only`},
		{"18446744073709551616", `part "18446744073709551616" is out of range`},
		{"1.99999999999999999999", `part "99999999999999999999" is out of range`},
		{"1.0rc99999999999999999999", `out of range`},
		{"1.2.3 || 1.2.4", `unexpected " || 1.2.4"`},
		{"1\x00", `unexpected "\x00"`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error %q", tt.in, tt.err)
			continue
		}
		if !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.in, err, tt.err)
		}
	}
}

func TestMustPanics(t *testing.T) {
	for call, f := range map[string]func(){
		`MustParse("v1")`:           func() { MustParse("v1") },
		`MustParseConstraint(">=")`: func() { MustParseConstraint(">=") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", call)
				}
			}()
			f()
		}()
	}
}

func TestCompare(t *testing.T) {
	tests := []comparison{
		{"570.124.06", "570.26", 1},
		{"570.124.06", "570.124.6", 0},
		{"535.261.03", "535.261.3", 0},
		{"12.4", "12.4.0", 0},
		{"12.4", "12.4.0.0", 0},
		{"12.4", "12.4.1", -1},
		{"12.10", "12.9", 1},
		{"550", "549.999.999", 1},
		{"9.1.0.70", "9.1.0.8", 1},
		{"8.9.7.29", "9", -1},
		{"0", "0.0.0", 0},
		{"18446744073709551615", "18446744073709551614.9", 1},
		// PEP 440 pre, post and dev releases.
		{"1.13.0a0", "1.13.0", -1},
		{"1.13.0a0", "1.13", -1},
		{"1.13.0a0", "1.12.9", 1},
		{"1.0a1", "1.0a2", -1},
		{"1.0a9", "1.0b1", -1},
		{"1.0b9", "1.0rc1", -1},
		{"2.0.0rc1", "2.0.0", -1},
		{"2.0.0rc1", "2.0.0rc1", 0},
		{"1.0.dev1", "1.0a1", -1},
		{"1.0.dev1", "1.0.dev2", -1},
		{"1.0a1.dev1", "1.0a1", -1},
		{"1.0a1", "1.0a1.post1.dev1", -1},
		{"1.0a1.post1.dev1", "1.0a1.post1", -1},
		{"1.0", "1.0.post1.dev1", -1},
		{"1.0.post1.dev1", "1.0.post1", -1},
		{"1.0.post1", "1.0.post2", -1},
		{"1.0.post1", "1.0.1", -1},
		{"2.1.0.dev20230801", "2.1.0.dev20230802", -1},
		{"2.1.0.dev20230801+cu121", "2.1.0", -1},
		{"2.1.0.dev20230801+cu121", "2.0.1", 1},
		// PEP 440 local labels: none < any; numbers above names.
		{"2.5.1", "2.5.1+cu124", -1},
		{"2.5.1+cpu", "2.5.1+cu124", -1},
		{"2.5.1+cu121", "2.5.1+cu124", -1},
		{"2.5.1+cu124", "2.5.1+cu124", 0},
		{"2.5.1+cu124", "2.5.1.0+cu124", 0},
		{"2.5.1+cu124", "2.5.1.post1", -1},
		{"2.5.1+cu124", "2.5.2", -1},
		{"1.0+abc", "1.0+abc.1", -1},
		{"1.0+1", "1.0+abc", 1},
		{"1.0+9", "1.0+10", -1},
		{"1.0+010", "1.0+10", 0},
		{"1.0+1.a", "1.0+1.1", -1},
		{"1.0+abc", "1.0+abd", -1},
	}
	checkOrder(t, "Compare", func(a, b string) (int, error) { return MustParse(a).Compare(MustParse(b)), nil }, tests)
	for _, tt := range tests {
		if got := MustParse(tt.a).Equal(MustParse(tt.b)); got != (tt.want == 0) {
			t.Errorf("%s.Equal(%s) = %v", tt.a, tt.b, got)
		}
	}
}

// comparison is two versions and how the first compares with the second.
type comparison struct {
	a, b string
	want int
}

// checkOrder checks that compare orders each pair of tests as it says,
// and the pair swapped the other way round.
func checkOrder(t *testing.T, name string, compare func(a, b string) (int, error), tests []comparison) {
	t.Helper()
	for _, tt := range tests {
		for _, c := range []comparison{tt, {tt.b, tt.a, -tt.want}} {
			if got, err := compare(c.a, c.b); err != nil || got != c.want {
				t.Errorf("%s(%q, %q) = %d, %v; want %d", name, c.a, c.b, got, err, c.want)
			}
		}
	}
}

// TestCompareOrder checks that Compare is a total order over a list in
// PEP 440's documented order, for every pair.
func TestCompareOrder(t *testing.T) {
	order := []string{
		"0", "0.0.1", "0.1", "1.0.dev456", "1.0a1", "1.0a2.dev456",
		"1.0a12.dev456", "1.0a12", "1.0b1.dev456", "1.0b2",
		"1.0b2.post345.dev456", "1.0b2.post345", "1.0rc1.dev456", "1.0rc1",
		"1.0", "1.0+abc.5", "1.0+abc.7", "1.0+5", "1.0.post456.dev34",
		"1.0.post456", "1.0.15", "1.1.dev1", "1.1", "12.4", "12.4.0.1",
		"12.4.1", "535.261.03", "570.26", "570.124.06",
	}
	vs := make([]Version, len(order))
	for i, s := range order {
		vs[i] = MustParse(s)
	}
	for i := range vs {
		for j := range vs {
			want := cmpInt(i, j)
			if got := vs[i].Compare(vs[j]); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", vs[i], vs[j], got, want)
			}
		}
	}
}

func TestZero(t *testing.T) {
	var z Version
	if !z.IsZero() || z.String() != "" || z.Parts() != nil || z.Major() != 0 || z.Minor() != 0 || z.Local() != "" {
		t.Errorf("zero Version = %#v", z)
	}
	if z.Compare(MustParse("0")) != -1 || MustParse("0").Compare(z) != 1 || z.Compare(Version{}) != 0 {
		t.Error("the zero Version should sort below every parsed version")
	}
}

func TestMajorMinor(t *testing.T) {
	tests := []struct {
		in           string
		major, minor uint64
	}{
		{"535.261.03", 535, 261},
		{"12.4", 12, 4},
		{"550", 550, 0},
		{"2.5.1+cu124", 2, 5},
	}
	for _, tt := range tests {
		v := MustParse(tt.in)
		if v.Major() != tt.major || v.Minor() != tt.minor {
			t.Errorf("%s: Major, Minor = %d, %d; want %d, %d", tt.in, v.Major(), v.Minor(), tt.major, tt.minor)
		}
	}
}

func TestPartsIsACopy(t *testing.T) {
	v := MustParse("12.4.1")
	v.Parts()[0] = 99
	if v.Major() != 12 {
		t.Error("changing Parts() changed the version")
	}
}

func TestTrunc(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"12.4.1", 2, "12.4"},
		{"12.4.1", 1, "12"},
		{"12.4.1", 3, "12.4.1"},
		{"12.4.1", 5, "12.4.1"},
		{"12.4.1", 0, ""},
		{"12.4.1", -1, ""},
		{"535.261.03", 3, "535.261.03"},
		{"535.261.03", 2, "535.261"},
		{"9.1.0.70", 3, "9.1.0"},
		{"2.5.1+cu124", 3, "2.5.1"},
		{"2.5.1+cu124", 2, "2.5"},
		{"1.13.0a0", 3, "1.13.0"},
		{"2.1.0.dev20230801+cu121", 2, "2.1"},
		{"1.0.post1", 2, "1.0"},
	}
	for _, tt := range tests {
		got := MustParse(tt.in).Trunc(tt.n)
		if got.String() != tt.want {
			t.Errorf("%s.Trunc(%d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
		if tt.want == "" {
			if !got.IsZero() {
				t.Errorf("%s.Trunc(%d) is not the zero Version", tt.in, tt.n)
			}
			continue
		}
		if want := MustParse(tt.want); !got.Equal(want) || !slices.Equal(got.Parts(), want.Parts()) || got.Local() != "" || got.IsPrerelease() {
			t.Errorf("%s.Trunc(%d) = %#v, want %#v", tt.in, tt.n, got, want)
		}
		// A truncated version truncates again like a parsed one.
		if again := got.Trunc(1).String(); again != MustParse(tt.want).Trunc(1).String() {
			t.Errorf("%s.Trunc(%d).Trunc(1) = %q", tt.in, tt.n, again)
		}
	}
	if !(Version{}).Trunc(2).IsZero() {
		t.Error("Version{}.Trunc(2) is not zero")
	}
}

func TestVersionJSON(t *testing.T) {
	type doc struct {
		Driver Version            `json:"driver"`
		CUDA   Version            `json:"cuda,omitzero"`
		ByName map[string]Version `json:"by_name"`
	}
	in := doc{
		Driver: MustParse("535.261.03"),
		ByName: map[string]Version{"torch": MustParse("2.5.1+cu124"), "cudnn": MustParse("9.1.0.70")},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"driver":"535.261.03","by_name":{"cudnn":"9.1.0.70","torch":"2.5.1+cu124"}}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Driver.String() != "535.261.03" || !out.Driver.Equal(in.Driver) || !out.CUDA.IsZero() ||
		out.ByName["torch"].Local() != "cu124" || !out.ByName["cudnn"].Equal(in.ByName["cudnn"]) {
		t.Errorf("round trip = %#v", out)
	}

	var z Version
	if err := json.Unmarshal([]byte(`""`), &z); err != nil || !z.IsZero() {
		t.Errorf(`Unmarshal("") = %v, %v; want the zero Version`, z, err)
	}
	err = json.Unmarshal([]byte(`{"driver":"5.x"}`), &out)
	if err == nil || !strings.Contains(err.Error(), `invalid version "5.x"`) {
		t.Errorf("Unmarshal of a bad version: %v", err)
	}
}
