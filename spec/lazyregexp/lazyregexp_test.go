package lazyregexp

import (
	"sync"
	"testing"
)

func TestCompiledOnFirstUse(t *testing.T) {
	r := New(`^v(\d+)$`)
	if r.rx != nil {
		t.Fatal("compiled before use")
	}
	if !r.MatchString("v12") || r.MatchString("w12") {
		t.Error("MatchString disagrees with the expression")
	}
	if m := r.FindStringSubmatch("v7"); len(m) != 2 || m[1] != "7" {
		t.Errorf("FindStringSubmatch = %q", m)
	}
	if r.String() != `^v(\d+)$` {
		t.Errorf("String = %q", r.String())
	}
}

func TestConcurrentFirstUse(t *testing.T) {
	r := New(`a+`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.MatchString("baa") {
				t.Error("no match")
			}
		}()
	}
	wg.Wait()
}

func TestInvalidPanicsOnUse(t *testing.T) {
	r := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("an invalid expression did not panic when used")
		}
	}()
	r.MatchString("x")
}
