package intent

// A zone is what the lease model knows about time at one point of a
// linearization: difference bounds (a DBM, as in timed automata) over three
// clocks, the origin 0, the instant l at which the last operation placed
// took effect, and the instant e at which the current lease expires, all on
// the harness's clock. m[i][j] bounds x_i - x_j from above; the zone is kept
// closed (every bound as tight as the others imply), so two zones are equal
// iff they hold the same instants, and each step is exact: an operation
// placed next takes effect at an instant t in its [Call, Return] with t >= l,
// and what it needs of the lease (t < e to hold it, t >= e to find it
// expired) is one more bound.
//
// With l and e both kept, a later fact bounds an earlier instant too: a read
// that must follow a claim bounds the claim's instant, and with it the
// lease's expiry, from above.
type zone struct {
	m [3][3]int64
}

const (
	z0 = 0 // the origin
	zl = 1 // the instant of the last operation placed
	ze = 2 // the current lease's expiry
)

// zinf is "no bound"; every bound is below it and sums saturate at it.
const zinf = int64(1) << 62

func zadd(a, b int64) int64 {
	if a >= zinf || b >= zinf {
		return zinf
	}
	s := a + b
	if s >= zinf {
		return zinf
	}
	if s <= -zinf {
		return -zinf + 1
	}
	return s
}

// zoneAny is the zone of nothing known: l anywhere, no lease.
func zoneAny() zone {
	var z zone
	for i := range 3 {
		for j := range 3 {
			if i != j {
				z.m[i][j] = zinf
			}
		}
	}
	return z
}

// ok reports whether the zone holds any instant (a closed DBM is empty iff
// a diagonal bound went negative).
func (z *zone) ok() bool {
	return z.m[0][0] >= 0 && z.m[1][1] >= 0 && z.m[2][2] >= 0
}

// bound adds x_i - x_j <= c and closes the zone again; it reports whether
// the zone still holds an instant.
func (z *zone) bound(i, j int, c int64) bool {
	if c >= z.m[i][j] {
		return z.ok()
	}
	for a := range 3 {
		for b := range 3 {
			if v := zadd(zadd(z.m[a][i], c), z.m[j][b]); v < z.m[a][b] {
				z.m[a][b] = v
			}
		}
	}
	return z.ok()
}

// advance places the next operation: it takes effect at an instant t with
// call <= t <= ret and t >= l; t becomes l. It reports whether such an
// instant exists.
func (z *zone) advance(call, ret int64) bool {
	// t as a fourth clock: t - 0 <= ret, 0 - t <= -call, l - t <= 0.
	var toT, fromT [3]int64 // toT[i]: x_i - t <= ; fromT[j]: t - x_j <=
	direct := [3]int64{-call, 0, zinf}
	directFrom := [3]int64{ret, zinf, zinf}
	for i := range 3 {
		toT[i], fromT[i] = zinf, zinf
		for k := range 3 {
			toT[i] = min(toT[i], zadd(z.m[i][k], direct[k]))
			fromT[i] = min(fromT[i], zadd(directFrom[k], z.m[k][i]))
		}
	}
	if zadd(fromT[0], toT[0]) < 0 { // t - 0 + 0 - t < 0: no instant
		return false
	}
	for k := range 3 {
		if zadd(toT[k], fromT[k]) < 0 {
			return false
		}
	}
	// the old pairs, tightened through t, then l := t
	var n [3][3]int64
	for i := range 3 {
		for j := range 3 {
			n[i][j] = min(z.m[i][j], zadd(toT[i], fromT[j]))
		}
	}
	if n[0][0] < 0 || n[1][1] < 0 || n[2][2] < 0 {
		return false
	}
	z.m[z0][zl], z.m[zl][z0] = toT[z0], fromT[z0]
	z.m[ze][zl], z.m[zl][ze] = toT[ze], fromT[ze]
	z.m[z0][ze], z.m[ze][z0] = n[z0][ze], n[ze][z0]
	z.m[zl][zl] = 0
	return z.ok()
}

// lease starts a lease at l lasting between lo and hi (hi = zinf: unknown).
func (z *zone) lease(lo, hi int64) {
	z.m[ze][zl], z.m[zl][ze] = hi, -lo
	z.m[ze][z0] = zadd(hi, z.m[zl][z0])
	z.m[z0][ze] = zadd(z.m[z0][zl], -lo)
}

// shift moves the expiry later by between lo and hi.
func (z *zone) shift(lo, hi int64) {
	for j := range 3 {
		if j != ze {
			z.m[ze][j] = zadd(z.m[ze][j], hi)
			z.m[j][ze] = zadd(z.m[j][ze], -lo)
		}
	}
}

// noLease forgets the expiry: no lease is current.
func (z *zone) noLease() {
	for j := range 3 {
		if j != ze {
			z.m[ze][j], z.m[j][ze] = zinf, zinf
		}
	}
}

// within reports whether every instant of z is one of o's.
func (z *zone) within(o *zone) bool {
	for i := range 3 {
		for j := range 3 {
			if z.m[i][j] > o.m[i][j] {
				return false
			}
		}
	}
	return true
}

// earliest and latest bound the instant of the last operation placed.
func (z *zone) earliest() int64 { return -z.m[z0][zl] }
func (z *zone) latest() int64   { return z.m[zl][z0] }

// expiry bounds the current lease's expiry.
func (z *zone) expiry() (lo, hi int64) { return -z.m[z0][ze], z.m[ze][z0] }
