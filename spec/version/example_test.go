package version_test

import (
	"fmt"

	"github.com/gpuenv/gpuenv/spec/version"
)

func ExampleParseConstraint() {
	c := version.MustParseConstraint(">= 535, < 560")
	for _, s := range []string{"535.261.03", "550.54.15", "560.35.03"} {
		fmt.Println(s, c.Check(version.MustParse(s)))
	}
	// Output:
	// 535.261.03 true
	// 550.54.15 true
	// 560.35.03 false
}

func ExampleConstraint_Check_prefix() {
	// A bare version admits every version it is a prefix of.
	cuda := version.MustParseConstraint("12.4")
	fmt.Println(cuda.Check(version.MustParse("12.4.1")), cuda.Check(version.MustParse("12.5")))
	// Output: true false
}

func ExampleConstraint_Check_python() {
	// Local labels are ignored unless named; pre-releases need naming.
	torch := version.MustParseConstraint("2.5.1")
	fmt.Println(torch.Check(version.MustParse("2.5.1+cu124")))
	fmt.Println(version.MustParseConstraint(">= 2.0").Check(version.MustParse("2.1.0rc1")))
	fmt.Println(version.MustParseConstraint(">= 2.1.0.dev0").Check(version.MustParse("2.1.0.dev20230801+cu121")))
	// Output:
	// true
	// false
	// true
}

func ExampleConstraint_Satisfiable() {
	for _, s := range []string{">= 560, < 550", "550.*, 560.*", "~8.9.7, >= 8.9.7.29"} {
		fmt.Println(s, version.MustParseConstraint(s).Satisfiable())
	}
	// Output:
	// >= 560, < 550 false
	// 550.*, 560.* false
	// ~8.9.7, >= 8.9.7.29 true
}

func ExampleVersion_Compare() {
	a, b := version.MustParse("570.124.06"), version.MustParse("570.26")
	fmt.Println(a.Compare(b), a)
	fmt.Println(version.MustParse("12.4").Equal(version.MustParse("12.4.0")))
	// Output:
	// 1 570.124.06
	// true
}

func ExampleFromDebian() {
	v, err := version.FromDebian("11.8.89~11.8.0-5~deb12u1")
	if err != nil {
		panic(err)
	}
	fmt.Println(v, version.MustParseConstraint("~11.8").Check(v))
	// Output: 11.8.89 true
}
