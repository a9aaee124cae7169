package rundir

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"regexp"
)

// A run's own nonce, its run ID, is drawn for every run (NewRunID) and
// recorded in its directory (chaos.json, result.json): every key, id and
// unique value a run sends is drawn through Fresh, which mixes it in, so
// that a replay against a live target never meets an earlier run's state,
// while the seed still fixes every choice and its order. The run ID given
// back (--run-id) repeats a run's keys and ids exactly (against a fresh
// target, offline).

// NewRunID draws a fresh run ID: 8 hex digits from crypto/rand, never
// from the seed.
func NewRunID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var runIDPattern = regexp.MustCompile(`^[0-9a-z]{1,16}$`)

// CheckRunID says why s cannot be a run ID ("": it can): 1 to 16 lower-case
// letters and digits, so that it fits in every key format.
func CheckRunID(s string) error {
	if !runIDPattern.MatchString(s) {
		return fmt.Errorf("run ID %q: want 1 to 16 lower-case letters and digits, as a run directory records it", s)
	}
	return nil
}

// Uint64Source is what Fresh draws from: the run's seeded *rand.Rand.
type Uint64Source interface{ Uint64() uint64 }

// Fresh returns the random source of one fresh key, id or unique value of
// run runID: it draws one number from rnd (the seed's, so that the seed
// still fixes every choice and its order) and mixes the run ID in, so
// that two runs of one seed draw other values. The same seed and run ID
// draw the same values.
func Fresh(runID string, rnd Uint64Source) *mrand.Rand {
	h := fnv.New64a()
	h.Write([]byte(runID))
	return mrand.New(mrand.NewPCG(rnd.Uint64(), h.Sum64()^0x5f1c_7e3a_9b2d_4c61))
}
