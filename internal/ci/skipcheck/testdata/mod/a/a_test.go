package a

import "testing"

func TestPasses(t *testing.T) { t.Log("not printed: the test passed") }

func TestSkipsWithoutATool(t *testing.T) { t.Skip("frobnicate is not installed") }

func TestHelperProcess(t *testing.T) { t.Skip("helper process for TestPasses") }

func TestSubtests(t *testing.T) {
	t.Run("passes", func(t *testing.T) {})
	t.Run("skips", func(t *testing.T) { t.Skip("only on a Tuesday") })
}
