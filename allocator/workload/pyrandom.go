package workload

// pyRandom reproduces CPython's random.Random bit for bit for the calls
// Gavel's generator makes (seed with an int, random, uniform, choice), so
// that a Gavel seed gives the workload Gavel simulated. CPython's generator
// is MT19937 (Matsumoto and Nishimura, 1998: init_genrand, init_by_array and
// genrand_int32 of their mt19937ar.c), wrapped as described in CPython's
// Modules/_randommodule.c and Lib/random.py:
//   - seed(n) for an int n calls init_by_array with the 32-bit words of |n|,
//     least significant first (one word 0 for n = 0);
//   - random() builds a 53-bit float from two outputs: (a>>5)*2^26 + (b>>6),
//     divided by 2^53;
//   - getrandbits(k), k <= 32, is one output shifted right by 32-k;
//   - choice(seq) is seq[_randbelow(len(seq))], which draws getrandbits(k),
//     k = len(seq).bit_length(), until the value is below len(seq);
//   - uniform(a, b) is a + (b-a)*random().
type pyRandom struct {
	mt  [mtN]uint32
	idx int
}

const (
	mtN       = 624
	mtM       = 397
	mtMatrixA = 0x9908b0df
	mtUpper   = 0x80000000
	mtLower   = 0x7fffffff
)

// newPyRandom is random.Random(n) for a non-negative int n.
func newPyRandom(n uint64) *pyRandom {
	key := []uint32{uint32(n)}
	if hi := uint32(n >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.idx = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// uint32 is genrand_int32: the next tempered output.
func (r *pyRandom) uint32() uint32 {
	if r.idx >= mtN {
		mag := func(y uint32) uint32 { return (y >> 1) ^ (mtMatrixA * (y & 1)) }
		k := 0
		for ; k < mtN-mtM; k++ {
			r.mt[k] = r.mt[k+mtM] ^ mag((r.mt[k]&mtUpper)|(r.mt[k+1]&mtLower))
		}
		for ; k < mtN-1; k++ {
			r.mt[k] = r.mt[k+mtM-mtN] ^ mag((r.mt[k]&mtUpper)|(r.mt[k+1]&mtLower))
		}
		r.mt[mtN-1] = r.mt[mtM-1] ^ mag((r.mt[mtN-1]&mtUpper)|(r.mt[0]&mtLower))
		r.idx = 0
	}
	y := r.mt[r.idx]
	r.idx++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// random is random.random(): a float in [0, 1) with 53 random bits.
func (r *pyRandom) random() float64 {
	a, b := r.uint32()>>5, r.uint32()>>6
	return (float64(a)*67108864 + float64(b)) * (1.0 / 9007199254740992)
}

// uniform is random.uniform(a, b).
func (r *pyRandom) uniform(a, b float64) float64 { return a + (b-a)*r.random() }

// below is random._randbelow(n) for 0 < n < 2^32: the index choice(seq)
// uses for a sequence of length n.
func (r *pyRandom) below(n int) int {
	k := 0
	for v := n; v > 0; v >>= 1 {
		k++
	}
	for {
		if v := int(r.uint32() >> (32 - k)); v < n {
			return v
		}
	}
}
