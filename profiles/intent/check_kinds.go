package intent

import "github.com/idscheck/idscheck/checker"

// The Intent Protocol's operation kinds beyond OpPublish and OpStatus
// (seed 004 §7).
const (
	// OpClaim is POST /claim. Key = the intent id claimed (empty when the
	// answer was 204 or unknown); Output carries token, attempts and lease.
	OpClaim checker.OpKind = "claim"
	// OpExtend is POST /extend_claim/<id> (Key = intent id, Input.Token,
	// Input.ExtendNs = requested seconds as a duration).
	OpExtend checker.OpKind = "extend"
	// OpFulfill is POST /fulfill/<id> (Key = intent id, Input.Token).
	OpFulfill checker.OpKind = "fulfill"
	// OpFail is POST /fail/<id> (Key = intent id, Input.Token).
	OpFail checker.OpKind = "fail"
)

// Intent states as the Intent Protocol names them (seed 004 §3.1), plus
// StateGone for a 404 on a status read (purged, expired or never existed).
const (
	StateOpen      = "open"
	StateClaimed   = "claimed"
	StateFulfilled = "fulfilled"
	StateDead      = "dead"
)
