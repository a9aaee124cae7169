package rundir

import (
	mrand "math/rand/v2"
	"testing"
)

// TestFresh: the same seed and run ID draw the same values; another run ID
// other values; and the seed's own stream is consumed alike whatever the
// run ID (one draw per value), so every later choice stays the seed's.
func TestFresh(t *testing.T) {
	draw := func(runID string) (uint64, uint64) {
		rnd := mrand.New(mrand.NewPCG(7, 7))
		v := Fresh(runID, rnd).Uint64()
		return v, rnd.Uint64()
	}
	a, na := draw("aa11")
	b, nb := draw("aa11")
	c, nc := draw("bb22")
	if a != b {
		t.Errorf("same seed and run ID: %x then %x", a, b)
	}
	if a == c {
		t.Errorf("run IDs aa11 and bb22 drew the same value %x", a)
	}
	if na != nb || na != nc {
		t.Errorf("the seed's next choice depends on the run ID: %x %x %x", na, nb, nc)
	}
	if NewRunID() == NewRunID() {
		t.Error("two run IDs drawn alike")
	}
	if err := CheckRunID(NewRunID()); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "ABC", "a-b", "12345678901234567"} {
		if CheckRunID(bad) == nil {
			t.Errorf("run ID %q accepted", bad)
		}
	}
}
