package b

import "testing"

func TestFails(t *testing.T) {
	t.Log("before the subtests")
	t.Run("bad", func(t *testing.T) { t.Error("the answer is 41") })
	t.Run("good", func(t *testing.T) {})
	t.Log("after the subtests")
}

func TestPasses(t *testing.T) {}
