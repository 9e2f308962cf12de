package recycle

import (
	"runtime"
	"testing"
	"time"
)

func TestKeeper(t *testing.T) {
	var k Keeper[int]
	if k.Take() != nil {
		t.Fatal("a zero Keeper gave a value")
	}
	v := new(int)
	k.Put(v)
	if got := k.Take(); got != v {
		t.Fatalf("Take after Put = %p, want %p", got, v)
	}
	if k.Take() != nil {
		t.Fatal("a value was taken twice")
	}
	// One collection keeps the value; it is dropped after two.
	k.Put(v)
	collect(t, &k, 1)
	if got := k.Take(); got != v {
		t.Fatalf("after one collection Take = %p, want %p", got, v)
	}
	k.Put(v)
	collect(t, &k, 2)
	if got := k.Take(); got != nil {
		t.Fatalf("after two collections Take = %p, want nil", got)
	}
}

// collect runs garbage collections until k has aged n more times.
func collect(t *testing.T, k *Keeper[int], n int) {
	t.Helper()
	ages := func() int {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.ages
	}
	for range n {
		before := ages()
		deadline := time.Now().Add(10 * time.Second)
		for ages() == before {
			if time.Now().After(deadline) {
				t.Fatal("no collection reached the keeper")
			}
			runtime.GC()
			// The cleanup runs on its own goroutine soon after.
			for wait := time.Now().Add(time.Second); ages() == before && time.Now().Before(wait); {
				time.Sleep(time.Millisecond)
			}
		}
	}
}
