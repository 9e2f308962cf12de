package solver

import "testing"

// TestSizeClasses checks that every request gets a class at most a
// quarter larger than it, that classes grow with the request, and that a
// released buffer serves requests of its class.
func TestSizeClasses(t *testing.T) {
	last := -1
	for n := 0; n <= 1<<20; n++ {
		c, size := classOf(n)
		if size < n || (n > 8 && 4*size > 5*n+4) || classSize(c) != size || c < last || c >= numClasses {
			t.Fatalf("classOf(%d) = %d, %d (classSize %d, previous class %d)", n, c, size, classSize(c), last)
		}
		last = c
	}
	if c, _ := classOf(1 << 40); c >= numClasses {
		t.Fatalf("classOf(1<<40) = %d, want < %d", c, numClasses)
	}
	var l freeList[int]
	// A buffer of a class's size, as the arena allocates, serves every
	// request of its class; one of another size (5000) serves those of
	// the class below it.
	for _, tc := range []struct{ put, take int }{{10, 9}, {112, 97}, {1024, 1000}, {5000, 4096}} {
		b := make([]int, tc.put)
		l.put(b)
		got := l.take(tc.take)
		if len(got) != tc.take || &got[:1][0] != &b[:1][0] {
			t.Errorf("put cap %d, take %d: got a new buffer (len %d)", tc.put, tc.take, len(got))
		}
		l.put(got)
		if got := l.take(2*tc.put + 1); cap(got) == tc.put {
			t.Errorf("put cap %d: a request for %d took it", tc.put, 2*tc.put+1)
		}
	}
}
