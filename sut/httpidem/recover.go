package httpidem

import (
	"context"
	"database/sql"
	"fmt"
)

// recover runs at Open, before the handler serves: it forgets the expired
// results and resolves against the sink every key a previous process left
// in_progress or unknown (no request of this process can hold one yet).
// The sink has the effect: the payment is committed and the key answers
// 201 with it. It has not: the reservation is deleted (a retry executes).
// The sink does not answer: the key is left unknown, and the next request
// with it resolves it first.
func (s *Server) recover(ctx context.Context) error {
	now := s.clock()
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		_, err := tx.Stmt(s.st.purge).Exec(now.UnixNano())
		return nil, err
	}); err != nil {
		return fmt.Errorf("purge: %w", err)
	}
	rows, err := s.st.rOpen.QueryContext(ctx)
	if err != nil {
		return fmt.Errorf("open keys: %w", err)
	}
	var open []*row
	for rows.Next() {
		x, err := scanRow(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("open keys: %w", err)
		}
		open = append(open, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open keys: %w", err)
	}
	sinkDown := false
	for _, x := range open {
		found, err := false, error(nil)
		if sinkDown {
			err = errNoAnswer
		} else {
			found, err = s.sink.get(ctx, x.caller+":"+x.key)
		}
		switch {
		case err != nil:
			// After the first failure the sink is not asked again: every
			// other key waits for its next request.
			sinkDown = true
			if x.state != stateUnknown {
				err = s.setState(ctx, x.caller, x.key, x.paymentID, x.state, stateUnknown)
			} else {
				err = nil
			}
		case found:
			s.log.Info("recovery: the sink made the payment; committing it", "key", x.key, "payment", x.paymentID)
			err = s.complete(ctx, x.caller, x.key, x.paymentID, x.caller, x.request.Reference, 201, x.doc(), true)
		default:
			s.log.Info("recovery: the sink made no payment; releasing the key", "key", x.key)
			_, err = s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
				return nil, affected1(tx.Stmt(s.st.del).Exec(x.caller, x.key, x.paymentID, x.state))
			})
		}
		if err != nil {
			return fmt.Errorf("recover key %q: %w", x.key, err)
		}
	}
	return nil
}
