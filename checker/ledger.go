package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Effect is one side effect observed where it lands: an execution by one of
// the harness's workers, or one call to the harness-hosted effect sink. Key
// is the unit of work the effect belongs to, spelled as the publishing
// operation's Key (the workload carries it in the payload), so effects and
// publishes meet on it.
type Effect struct {
	Key    string `json:"key"`              // the publish Key this effect serves
	Intent string `json:"intent,omitempty"` // the instance of the unit executed (its id), when the profile has one
	Worker string `json:"worker,omitempty"` // who performed it
	Token  string `json:"token,omitempty"`  // the lease token held while executing, when the profile leases units
	At     int64  `json:"at"`               // ns on the harness's clock since the run started
}

// Ledger is every effect observed in a run, in any order.
type Ledger struct {
	Effects []Effect `json:"effects"`
}

// WriteJSONL writes l as JSON Lines, one effect per line, parseable by
// ReadLedger.
func (l Ledger) WriteJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range l.Effects {
		if err := enc.Encode(&l.Effects[i]); err != nil {
			return fmt.Errorf("write ledger: effect %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	return nil
}

// ReadLedger parses JSON Lines written by Ledger.WriteJSONL. Blank lines and
// lines starting with '#' are skipped.
func ReadLedger(r io.Reader) (Ledger, error) {
	var l Ledger
	err := ReadJSONL(r, func(line []byte, n int) error {
		var e Effect
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("read ledger: line %d: %w", n, err)
		}
		if e.Key == "" {
			return fmt.Errorf("read ledger: line %d: effect without key", n)
		}
		l.Effects = append(l.Effects, e)
		return nil
	})
	return l, err
}
