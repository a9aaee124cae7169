package atp

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The ATP checks (seed 000, docs/atp-binding.md) over a chaos run of the ATP
// profile. They read what the ATP chaos workload records:
//
//   - History: every POST /api/atp/authorize and POST /api/atp/execute as
//     an OpPublish, every GET /api/atp/intents/{id} as an OpStatus. Key is
//     ATPKey(intent_id, idempotency_key): the intent_id, a space, the key
//     (an intent_id has no space). Input.Body is the route ("authorize",
//     "execute"; "get" for a status read). Output.Status is the HTTP
//     status; Output.State the row's state when the answer carries a
//     transaction; Output.ID the row the answer names (ATPKey of its
//     intent_id and idempotency_key); Output.Body ATPRowAnswer (the digests
//     of the row's body and receipt members, compacted, never re-encoded)
//     or ATPErrorAnswer (the error code), "" for anything else.
//   - Ledger: the rail's charges net of refunds: one Effect per charge the
//     rail made and did not refund, Key the ATP intent_id it was made for,
//     Intent the payment intent, Worker the charge id. A refunded charge is
//     not in the ledger (the rail counts money net of refunds); the record
//     keeps every charge.
//   - ATPRecord (ATPRowsFile, ATPRecordFile): every transaction's row as
//     read after the reconciliation wait, the site's key set, the bytes of
//     every receipt an answer carried (by digest), the rail's charges,
//     calls and callbacks.
//
// Each check judges one rule and names it: an anomaly's Kind is the rule ID.

// The anomaly kinds of the ATP checks: each is the ID of the one rule it
// breaks (rules.go).
const (
	ATPNoSecondEffect        checker.AnomalyKind = RuleNoSecondEffect
	ATPRetryVerbatim         checker.AnomalyKind = RuleRetryVerbatim
	ATPSignedBySiteKey       checker.AnomalyKind = RuleSignedBySiteKey
	ATPSettlementSigned      checker.AnomalyKind = RuleSettlementSigned
	ATPCompensationReceipt   checker.AnomalyKind = RuleCompensationReceipt
	ATPNeverSpeculative      checker.AnomalyKind = RuleNeverSpeculative
	ATPExpiredNoReceipt      checker.AnomalyKind = RuleExpiredNoReceipt
	ATPMonotonic             checker.AnomalyKind = RuleMonotonic
	ATPNoExecutingAuthorized checker.AnomalyKind = RuleNoExecutingAuthorized
	ATPReconciliation        checker.AnomalyKind = RuleReconciliation
)

// Model names of the ATP checks in Report.Models.
const (
	ModelATPEffects        = "atp-effects"        // ATP-2-no-second-effect: charges per intent at the rail
	ModelATPVerbatim       = "atp-verbatim"       // ATP-2-retry-verbatim: one row's answers carry the same bytes
	ModelATPReceipts       = "atp-receipts"       // ATP-0-signed-by-site-key, ATP-4-settlement-signed, ATP-4-compensation-receipt
	ModelATPSpeculative    = "atp-speculative"    // ATP-4-never-speculative, ATP-4-expired-no-receipt
	ModelATPStates         = "atp-states"         // ATP-1-monotonic (porcupine model ATPStateModel)
	ModelATPReconciliation = "atp-reconciliation" // ATP-6-reconciliation: final rows against the rail
)

// The routes an operation's Input.Body names.
const (
	ATPRouteAuthorize = "authorize"
	ATPRouteExecute   = "execute"
	ATPRouteGet       = "get"
)

// The files of an ATP run directory besides history and ledger.
const (
	ATPRowsFile   = "atp-rows.jsonl"  // the final rows, one per line
	ATPRecordFile = "atp-record.json" // keys, receipts, rail, reconciliation
)

// ATPKey is a transaction's key in a history: intent_id, a space,
// idempotency_key.
func ATPKey(intentID, idempotencyKey string) string { return intentID + " " + idempotencyKey }

// ATPSplitKey splits an ATPKey.
func ATPSplitKey(key string) (intentID, idempotencyKey string) {
	intentID, idempotencyKey, _ = strings.Cut(key, " ")
	return intentID, idempotencyKey
}

// ATPDigest is the digest of a JSON member as sent: its bytes with
// insignificant whitespace removed (json.Compact: nothing re-encoded, no
// member reordered), SHA-256, the first 16 bytes in hex. Bytes that are not
// JSON are digested as they are.
func ATPDigest(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		raw = b.Bytes()
	}
	s := sha256.Sum256(raw)
	return hex.EncodeToString(s[:16])
}

// ATPNoReceipt is the receipt digest of a row without a receipt.
const ATPNoReceipt = "null"

// ATPReceiptDigest is ATPDigest of a receipt member, ATPNoReceipt when it
// is absent or null.
func ATPReceiptDigest(raw []byte) string {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return ATPNoReceipt
	}
	return ATPDigest(raw)
}

// ATPRowAnswer is Output.Body of an answer that carries a transaction.
func ATPRowAnswer(body, receipt []byte) string {
	return "row body=" + ATPDigest(body) + " receipt=" + ATPReceiptDigest(receipt)
}

// ATPErrorAnswer is Output.Body of an error answer.
func ATPErrorAnswer(code string) string { return "error=" + code }

type atpAnswer struct {
	row           bool
	body, receipt string // digests
	code          string
}

func parseATPAnswer(s string) atpAnswer {
	if rest, ok := strings.CutPrefix(s, "row "); ok {
		a := atpAnswer{row: true}
		for _, f := range strings.Fields(rest) {
			switch k, v, _ := strings.Cut(f, "="); k {
			case "body":
				a.body = v
			case "receipt":
				a.receipt = v
			}
		}
		if a.receipt == "" {
			a.receipt = ATPNoReceipt
		}
		return a
	}
	if code, ok := strings.CutPrefix(s, "error="); ok {
		return atpAnswer{code: code}
	}
	return atpAnswer{}
}

// ATPRecord is what the ATP workload knows at the end of a run besides its
// history and ledger.
type ATPRecord struct {
	// Start is the run's start: operation times count from it.
	Start time.Time `json:"start"`
	// ReconcileInterval is the site's declared reconciliation interval on
	// the harness's clock (reconcile_interval_seconds / time scale);
	// ReconcileBound how long the workload was ready to wait after the
	// drain for rows to leave executing (2 intervals and a slack);
	// ReconcileWait how long it waited. ReconcileCutShort: the wait ended
	// before its bound with rows still executing (the run's context
	// ended): those rows are undecided, not stuck.
	ReconcileInterval time.Duration `json:"reconcile_interval_ns"`
	ReconcileBound    time.Duration `json:"reconcile_bound_ns"`
	ReconcileWait     time.Duration `json:"reconcile_wait_ns"`
	ReconcileCutShort bool          `json:"reconcile_cut_short,omitempty"`
	// Keys is GET /api/atp/keys after the run (nil: not read, KeysErr
	// says why).
	Keys    *JWKSet `json:"keys"`
	KeysErr string  `json:"keys_err,omitempty"`
	// Receipts are the bytes of every receipt an answer carried, by
	// ATPReceiptDigest.
	Receipts map[string]json.RawMessage `json:"receipts"`
	// Rows are the final rows (ATPRowsFile).
	Rows      []ATPRow      `json:"-"`
	Charges   []ATPCharge   `json:"charges"`
	RailCalls []ATPRailCall `json:"rail_calls"`
	Callbacks []ATPCallback `json:"callbacks"`
}

// ATPRow is one transaction as read after the reconciliation wait (GET
// /api/atp/intents/{id} with its key).
type ATPRow struct {
	Key            string `json:"key"` // ATPKey
	IntentID       string `json:"intent_id"`
	IdempotencyKey string `json:"idempotency_key"`
	AgentID        string `json:"agent_id,omitempty"`
	// Purpose is what the workload meant the transaction for: "pay",
	// "decline", "expire", "replay" (the signed intent under another key),
	// "reuse-key" (a key already used on another intent), "dedup" (a
	// duplicate action_dedup_key), "precondition", "storm".
	Purpose   string `json:"purpose,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
	// Status is the status of the final read: 200 a row, 404 none, 0 no
	// answer (Err says why).
	Status  int             `json:"status"`
	Err     string          `json:"err,omitempty"`
	State   string          `json:"state,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
	Receipt json.RawMessage `json:"receipt,omitempty"`
	At      int64           `json:"at"` // when the read returned (ns since Start)
}

// Read reports whether the final read answered (a row or 404).
func (r ATPRow) Read() bool { return r.Status == 200 && r.State != "" || r.Status == 404 }

// ATPCharge is one charge of the rail (refunded ones too).
type ATPCharge struct {
	Seq           int    `json:"seq"`
	PaymentIntent string `json:"payment_intent"`
	IntentID      string `json:"intent_id"`
	ChargeID      string `json:"charge_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	At            int64  `json:"at"`
	Refunded      bool   `json:"refunded,omitempty"`
	LostReply     bool   `json:"lost_reply,omitempty"`
}

// ATPRailCall is one call the site made to the rail.
type ATPRailCall struct {
	Seq           int    `json:"seq"`
	Op            string `json:"op"`
	PaymentIntent string `json:"payment_intent,omitempty"`
	IntentID      string `json:"intent_id,omitempty"`
	Status        int    `json:"status"`
	At            int64  `json:"at"`
}

// ATPCallback is one callback of the rail to the site (or one it dropped).
type ATPCallback struct {
	PaymentIntent string `json:"payment_intent"`
	IntentID      string `json:"intent_id"`
	Type          string `json:"type"`
	Dropped       bool   `json:"dropped,omitempty"`
	Status        int    `json:"status"`
	Err           string `json:"err,omitempty"`
	At            int64  `json:"at"`
}

func atpEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // receipts and bodies are kept byte for byte
	return enc
}

// WriteATPRows writes the final rows as JSON Lines.
func WriteATPRows(w io.Writer, rows []ATPRow) error {
	bw := bufio.NewWriter(w)
	enc := atpEncoder(bw)
	for i := range rows {
		if err := enc.Encode(&rows[i]); err != nil {
			return fmt.Errorf("write atp rows: %d: %w", i, err)
		}
	}
	return bw.Flush()
}

// ReadATPRows parses what WriteATPRows wrote.
func ReadATPRows(r io.Reader) ([]ATPRow, error) {
	var out []ATPRow
	err := checker.ReadJSONL(r, func(line []byte, n int) error {
		var row ATPRow
		if err := json.Unmarshal(line, &row); err != nil {
			return fmt.Errorf("read atp rows: line %d: %w", n, err)
		}
		if row.Key == "" {
			return fmt.Errorf("read atp rows: line %d: no key", n)
		}
		out = append(out, row)
		return nil
	})
	return out, err
}

// WriteATPRecord writes the record but its rows as one JSON document.
func WriteATPRecord(w io.Writer, rec ATPRecord) error {
	return atpEncoder(w).Encode(&rec)
}

// ReadATPRecord parses what WriteATPRecord wrote (no rows).
func ReadATPRecord(r io.Reader) (ATPRecord, error) {
	var rec ATPRecord
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return rec, fmt.Errorf("read atp record: %w", err)
	}
	return rec, nil
}

// ATPFiles renders a record as the files of a run directory (ATPRowsFile,
// ATPRecordFile).
func ATPFiles(rec ATPRecord) (map[string][]byte, error) {
	var rows, doc bytes.Buffer
	if err := WriteATPRows(&rows, rec.Rows); err != nil {
		return nil, err
	}
	if err := WriteATPRecord(&doc, rec); err != nil {
		return nil, err
	}
	return map[string][]byte{ATPRowsFile: rows.Bytes(), ATPRecordFile: doc.Bytes()}, nil
}

// ReadATPFiles reads a record back from the files ATPFiles wrote.
func ReadATPFiles(files map[string][]byte) (ATPRecord, error) {
	raw, ok := files[ATPRecordFile]
	if !ok {
		return ATPRecord{}, fmt.Errorf("read atp record: no %s", ATPRecordFile)
	}
	rec, err := ReadATPRecord(bytes.NewReader(raw))
	if err != nil {
		return rec, err
	}
	rows, ok := files[ATPRowsFile]
	if !ok {
		return rec, fmt.Errorf("read atp rows: no %s", ATPRowsFile)
	}
	rec.Rows, err = ReadATPRows(bytes.NewReader(rows))
	return rec, err
}

// ATPOptions bound the ATP checks.
type ATPOptions struct {
	// Timeout bounds porcupine on each transaction's operations (default
	// 10 s); running out makes the state check UNKNOWN, never a pass.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// MaxExamples bounds the anomalies kept with evidence per kind
	// (default 20); Counts hold the totals.
	MaxExamples int `json:"max_examples,omitempty"`
}

// maxATPAnomalyOps bounds the operations one anomaly carries (a storm has
// hundreds per transaction).
const maxATPAnomalyOps = 16

// atpRun is what the checks share.
type atpRun struct {
	h       checker.History
	rec     ATPRecord
	opts    ATPOptions
	byKey   map[string][]int // transaction key -> its ops, in call order
	keysOf  map[string][]string
	rows    map[string]*ATPRow          // transaction key -> final row
	effects map[string][]checker.Effect // intent -> net charges
	charges map[string][]ATPCharge
	add     func(checker.Anomaly)
}

// CheckATP runs the ATP checks over a run and sums them up in a Report
// (Queue: Attempted transactions, Acknowledged ones some answer showed a
// row of, Effected intents charged, Fulfilled rows settled at the end,
// Dead rows compensated, Expired rows expired, Duplicated intents charged
// more than once, Unexpected intents charged that no row names, Pending
// rows still executing when the wait was cut short). It is pure.
func CheckATP(h checker.History, l checker.Ledger, rec ATPRecord, opts ATPOptions) checker.Report {
	if opts.MaxExamples <= 0 {
		opts.MaxExamples = 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	rep := checker.Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[checker.AnomalyKind]int{}}
	r := &atpRun{h: h, rec: rec, opts: opts, byKey: map[string][]int{}, keysOf: map[string][]string{},
		rows: map[string]*ATPRow{}, effects: map[string][]checker.Effect{}, charges: map[string][]ATPCharge{}}
	r.add = func(a checker.Anomaly) {
		rep.Counts[a.Kind]++
		if rep.Counts[a.Kind] <= opts.MaxExamples {
			rep.Anomalies = append(rep.Anomalies, a)
		}
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Key == "" || (op.Kind != checker.OpPublish && op.Kind != checker.OpStatus) {
			continue
		}
		r.byKey[op.Key] = append(r.byKey[op.Key], i)
	}
	for _, idx := range r.byKey {
		sort.SliceStable(idx, func(a, b int) bool { return h.Ops[idx[a]].Call < h.Ops[idx[b]].Call })
	}
	for i := range rec.Rows {
		row := &rec.Rows[i]
		r.rows[row.Key] = row
	}
	for k := range r.byKey {
		r.noteKey(k)
	}
	for k := range r.rows {
		if _, ok := r.byKey[k]; !ok {
			r.noteKey(k)
		}
	}
	for _, ks := range r.keysOf {
		sort.Strings(ks)
	}
	for _, e := range l.Effects {
		r.effects[e.Key] = append(r.effects[e.Key], e)
	}
	for _, c := range rec.Charges {
		r.charges[c.IntentID] = append(r.charges[c.IntentID], c)
	}
	effects, q := r.checkEffects()
	rep.Models = []checker.ModelCheck{effects, r.checkVerbatim(), r.checkReceipts(), r.checkSpeculative(), r.checkStates(), r.checkReconciliation()}
	rep.Queue = q
	for k := range rep.Counts {
		if rep.Counts[k] == 0 {
			delete(rep.Counts, k)
		}
	}
	return rep
}

func (r *atpRun) noteKey(k string) {
	intent, _ := ATPSplitKey(k)
	r.keysOf[intent] = append(r.keysOf[intent], k)
}

// observed reports whether op is an answer that showed a row in a state
// of the machine (2xx, whole, with a transaction).
func atpObserved(op *checker.Operation) bool {
	return op.Effective() == verdict.OutcomeOK && op.Output.Status >= 200 && op.Output.Status < 300 &&
		Rank(op.Output.State) >= 0
}

func atpRoute(op *checker.Operation) string {
	if op.Kind == checker.OpStatus {
		return ATPRouteGet
	}
	if op.Input.Body != "" {
		return op.Input.Body
	}
	return "post"
}

// describeATPOp renders one operation as evidence.
func describeATPOp(op *checker.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s) by client %d at %s", atpRoute(op), op.Key, op.ClientID, checker.FormatNs(op.Call))
	if op.Effective() == verdict.OutcomeUnknown {
		b.WriteString(" → unknown")
		return b.String()
	}
	fmt.Fprintf(&b, " → %d", op.Output.Status)
	if op.Output.State != "" {
		b.WriteString(" " + op.Output.State)
	}
	a := parseATPAnswer(op.Output.Body)
	switch {
	case a.row:
		fmt.Fprintf(&b, " body %s receipt %s", shortText(a.body), shortText(a.receipt))
	case a.code != "":
		b.WriteString(" " + a.code)
	}
	fmt.Fprintf(&b, " (returned %s)", checker.FormatNs(op.Return))
	return b.String()
}

// evidence returns at most maxATPAnomalyOps operations: the ones named
// first, then the transactions' answers that showed a row, in call order.
func (r *atpRun) evidence(keys []string, named ...checker.Operation) []checker.Operation {
	out := append([]checker.Operation(nil), named...)
	var rest []checker.Operation
	for _, k := range keys {
		for _, i := range r.byKey[k] {
			op := r.h.Ops[i]
			if atpObserved(&op) || op.Output.Status == 409 || op.Output.Status == 410 {
				rest = append(rest, op)
			}
		}
	}
	for _, op := range rest {
		if len(out) >= maxATPAnomalyOps {
			break
		}
		if !slices.ContainsFunc(out, func(o checker.Operation) bool {
			return o.ClientID == op.ClientID && o.Call == op.Call && o.Key == op.Key
		}) {
			out = append(out, op)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Call < out[b].Call })
	return out
}

func describeCharges(cs []ATPCharge) string {
	var parts []string
	for _, c := range cs {
		s := fmt.Sprintf("%s (payment intent %s, %d %s", c.ChargeID, c.PaymentIntent, c.Amount, c.Currency)
		if c.Refunded {
			s += ", refunded"
		}
		if c.LostReply {
			s += ", reply lost"
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func describeEffects(es []checker.Effect) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s (payment intent %s)", e.Worker, e.Intent))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// charged describes an intent's net charges, with the refunded ones the
// record holds.
func (r *atpRun) charged(intent string) string {
	s := fmt.Sprintf("%d net charge(s): %s", len(r.effects[intent]), describeEffects(r.effects[intent]))
	var refunded []ATPCharge
	for _, c := range r.charges[intent] {
		if c.Refunded {
			refunded = append(refunded, c)
		}
	}
	if len(refunded) > 0 {
		s += "; refunded: " + describeCharges(refunded)
	}
	return s
}

func (r *atpRun) describeRows(intent string) string {
	var parts []string
	for _, k := range r.keysOf[intent] {
		row := r.rows[k]
		switch {
		case row == nil:
			parts = append(parts, fmt.Sprintf("key %q not read", keyOf(k)))
		case row.Status == 200:
			parts = append(parts, fmt.Sprintf("key %q %s", keyOf(k), row.State))
		case row.Status == 404:
			parts = append(parts, fmt.Sprintf("key %q no row (404)", keyOf(k)))
		default:
			parts = append(parts, fmt.Sprintf("key %q unread (%d %s)", keyOf(k), row.Status, row.Err))
		}
	}
	return strings.Join(parts, ", ")
}

func keyOf(k string) string {
	_, key := ATPSplitKey(k)
	return key
}

// observedStates returns the states an intent's answers and final rows
// showed, and the operations that showed each first.
func (r *atpRun) observedStates(intent string) (map[string]bool, map[string]checker.Operation) {
	states, first := map[string]bool{}, map[string]checker.Operation{}
	for _, k := range r.keysOf[intent] {
		for _, i := range r.byKey[k] {
			op := r.h.Ops[i]
			if atpObserved(&op) {
				if !states[op.Output.State] {
					first[op.Output.State] = op
				}
				states[op.Output.State] = true
			}
		}
		if row := r.rows[k]; row != nil && row.Status == 200 && row.State != "" {
			states[row.State] = true
		}
	}
	return states, first
}

func atpFail(mc *checker.ModelCheck, key string) {
	mc.Result = checker.LinIllegal
	mc.FailingTotal++
	if len(mc.Failing) < 100 {
		mc.Failing = append(mc.Failing, key)
	}
}

// checkEffects judges ATP-2-no-second-effect per intent at the rail: at
// most one net charge; exactly one when a row of it was seen settled;
// none when its rows ended compensated or expired; none for an intent the
// site never showed a row of.
func (r *atpRun) checkEffects() (checker.ModelCheck, checker.QueueStats) {
	mc := checker.ModelCheck{Model: ModelATPEffects, Result: checker.LinOk, Ops: len(r.effects)}
	var q checker.QueueStats
	for k, idx := range r.byKey {
		if !slices.ContainsFunc(idx, func(i int) bool { return r.h.Ops[i].Kind == checker.OpPublish }) {
			continue
		}
		q.Attempted++
		if slices.ContainsFunc(idx, func(i int) bool { return atpObserved(&r.h.Ops[i]) }) {
			q.Acknowledged++
		}
		if row := r.rows[k]; row != nil && row.Status == 200 {
			switch row.State {
			case StateSettled:
				q.Fulfilled++
			case StateCompensated:
				q.Dead++
			case StateExpired:
				q.Expired++
			case StateExecuting:
				if r.rec.ReconcileCutShort {
					q.Pending++
				}
			}
		}
	}
	intents := map[string]bool{}
	for i := range r.keysOf {
		intents[i] = true
	}
	for i := range r.effects {
		intents[i] = true
	}
	undecided := false
	for _, intent := range slices.Sorted(maps.Keys(intents)) {
		es := r.effects[intent]
		mc.Partitions++
		if len(es) > 0 {
			q.Effected++
		}
		keys := r.keysOf[intent]
		states, first := r.observedStates(intent)
		fail := func(why string, ops ...checker.Operation) {
			atpFail(&mc, intent)
			r.add(checker.Anomaly{Kind: ATPNoSecondEffect, Key: intent,
				Explanation: fmt.Sprintf("%s: intent %s (%s): %s", RuleNoSecondEffect, intent, r.describeRows(intent), why),
				Ops:         r.evidence(keys, ops...), Effects: es})
		}
		if len(keys) == 0 {
			q.Unexpected++
			fail(fmt.Sprintf("the rail holds %s for an intent no request of the run names: a charge nobody asked for", r.charged(intent)))
			continue
		}
		if len(es) > 0 && len(states) == 0 {
			// No answer and no final read showed a row of it.
			allRead := true
			for _, k := range keys {
				if row := r.rows[k]; row == nil || !row.Read() {
					allRead = false
				}
			}
			if !allRead {
				undecided = true
				continue
			}
			q.Unexpected++
			fail(fmt.Sprintf("the rail holds %s, but the site never showed a row of it (every final read answered 404): a charge for an intent the site never authorized", r.charged(intent)))
			continue
		}
		var finals []string
		allFinalRead := len(keys) > 0
		for _, k := range keys {
			row := r.rows[k]
			switch {
			case row == nil || !row.Read():
				allFinalRead = false
			case row.Status == 200:
				finals = append(finals, row.State)
			}
		}
		switch {
		case len(es) > 1:
			q.Duplicated++
			fail(fmt.Sprintf("charged %d times at the rail: %s; one intent is paid once however often its steps are retried",
				len(es), r.charged(intent)))
		case states[StateSettled] && len(es) == 0:
			op, seen := first[StateSettled]
			var ev []checker.Operation
			where := "its final row"
			if seen {
				ev, where = []checker.Operation{op}, describeATPOp(&op)
			}
			fail(fmt.Sprintf("a row was settled (%s) and the rail holds no net charge for it (%s): a settled row has exactly one", where, r.charged(intent)), ev...)
		case len(es) == 1 && !states[StateSettled] && allFinalRead && len(finals) > 0 &&
			!slices.ContainsFunc(finals, func(s string) bool { return s != StateCompensated && s != StateExpired }):
			fail(fmt.Sprintf("its rows ended %s and the rail holds %s: a compensated or expired transaction has no net charge",
				strings.Join(finals, ", "), r.charged(intent)))
		}
	}
	if undecided && mc.Result == checker.LinOk {
		mc.Result = checker.LinUnknown
	}
	return mc, q
}

// checkVerbatim judges ATP-2-retry-verbatim per transaction: every answer
// that carries its row names that row and carries the same body bytes;
// every one that carries a receipt, the same receipt bytes (the final row
// read after the run too).
func (r *atpRun) checkVerbatim() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelATPVerbatim, Result: checker.LinOk}
	for _, k := range slices.Sorted(maps.Keys(r.byKey)) {
		var rows []checker.Operation
		for _, i := range r.byKey[k] {
			if op := r.h.Ops[i]; atpObserved(&op) && parseATPAnswer(op.Output.Body).row {
				rows = append(rows, op)
			}
		}
		if len(rows) == 0 {
			continue
		}
		mc.Partitions++
		mc.Ops += len(rows)
		fail := func(why string, ops ...checker.Operation) {
			atpFail(&mc, k)
			r.add(checker.Anomaly{Kind: ATPRetryVerbatim, Key: k,
				Explanation: fmt.Sprintf("%s: intent %s key %q: %s", RuleRetryVerbatim, ATPKeyIntent(k), keyOf(k), why), Ops: ops})
		}
		var firstBody, firstReceipt *checker.Operation
		bad := false
		for i := range rows {
			op := &rows[i]
			a := parseATPAnswer(op.Output.Body)
			if op.Output.ID != "" && op.Output.ID != k {
				fail(fmt.Sprintf("an answer carries another row (%q): %s", op.Output.ID, describeATPOp(op)), *op)
				bad = true
				break
			}
			if firstBody == nil {
				firstBody = op
			} else if fb := parseATPAnswer(firstBody.Output.Body); fb.body != a.body {
				fail(fmt.Sprintf("two answers carry different body bytes (digest %s, then %s): %s; %s. A retry returns the stored row verbatim",
					fb.body, a.body, describeATPOp(firstBody), describeATPOp(op)), *firstBody, *op)
				bad = true
				break
			}
			if a.receipt == ATPNoReceipt {
				continue
			}
			if firstReceipt == nil {
				firstReceipt = op
			} else if fr := parseATPAnswer(firstReceipt.Output.Body); fr.receipt != a.receipt {
				fail(fmt.Sprintf("two answers carry different receipts (%s, then %s): %s; %s. A retry returns the same receipt and signature bytes%s",
					fr.receipt, a.receipt, describeATPOp(firstReceipt), describeATPOp(op), r.receiptDiff(fr.receipt, a.receipt)), *firstReceipt, *op)
				bad = true
				break
			}
		}
		if bad {
			continue
		}
		if row := r.rows[k]; row != nil && row.Status == 200 && row.State != "" {
			if d := ATPDigest(row.Body); firstBody != nil && d != parseATPAnswer(firstBody.Output.Body).body {
				fail(fmt.Sprintf("the final read carries body bytes %s, not %s as %s did", d, parseATPAnswer(firstBody.Output.Body).body, describeATPOp(firstBody)), *firstBody)
			} else if d := ATPReceiptDigest(row.Receipt); firstReceipt != nil && d != ATPNoReceipt && d != parseATPAnswer(firstReceipt.Output.Body).receipt {
				fr := parseATPAnswer(firstReceipt.Output.Body).receipt
				fail(fmt.Sprintf("the final read carries receipt %s, not %s as %s did%s", d, fr, describeATPOp(firstReceipt), r.receiptDiff(fr, d)), *firstReceipt)
			}
		}
	}
	return mc
}

// ATPKeyIntent is the intent_id of an ATPKey.
func ATPKeyIntent(k string) string {
	intent, _ := ATPSplitKey(k)
	return intent
}

// receiptDiff shows two receipts' bytes when the record holds them.
func (r *atpRun) receiptDiff(a, b string) string {
	ra, rb := r.receiptBytes(a, ""), r.receiptBytes(b, "")
	if ra == nil || rb == nil {
		return ""
	}
	return fmt.Sprintf(" (%s vs %s)", clip(ra, 300), clip(rb, 300))
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// receiptBytes returns the bytes of a receipt by digest: from the record's
// table, else from a final row with that digest.
func (r *atpRun) receiptBytes(digest, key string) []byte {
	if b, ok := r.rec.Receipts[digest]; ok {
		return b
	}
	if row := r.rows[key]; row != nil && ATPReceiptDigest(row.Receipt) == digest {
		return row.Receipt
	}
	for i := range r.rec.Rows {
		if ATPReceiptDigest(r.rec.Rows[i].Receipt) == digest {
			return r.rec.Rows[i].Receipt
		}
	}
	return nil
}

// atpSighting is one receipt seen on one transaction in one state.
type atpSighting struct {
	key, state, receipt string
}

// checkReceipts judges the receipts every answer and final row carried,
// with the site's public key set alone (VerifyReceipt):
// ATP-0-signed-by-site-key (each verifies; and a copy with one byte of its
// body changed does not: the verifier's self-check), ATP-4-settlement-
// signed (a settled row carries a settlement receipt; what its body says
// of its transaction, its type, state, intent_id and key, is this row's:
// the text asks for no member), ATP-4-compensation-receipt (a compensated
// row carries a compensation receipt referencing its intent, and what
// else it says of it is this row's). Receipts on rows in other states are
// judged by checkSpeculative.
func (r *atpRun) checkReceipts() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelATPReceipts, Result: checker.LinOk}
	sightings := map[atpSighting]*checker.Operation{}
	var order []atpSighting
	see := func(s atpSighting, op *checker.Operation) {
		if _, ok := sightings[s]; !ok {
			sightings[s] = op
			order = append(order, s)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.byKey)) {
		for _, i := range r.byKey[k] {
			op := &r.h.Ops[i]
			if !atpObserved(op) {
				continue
			}
			a := parseATPAnswer(op.Output.Body)
			if !a.row {
				continue
			}
			if st := op.Output.State; st == StateSettled || st == StateCompensated {
				see(atpSighting{k, st, a.receipt}, op)
			}
		}
	}
	for i := range r.rec.Rows {
		row := &r.rec.Rows[i]
		if row.Status == 200 && (row.State == StateSettled || row.State == StateCompensated) {
			see(atpSighting{row.Key, row.State, ATPReceiptDigest(row.Receipt)}, nil)
		}
	}
	cache := map[string]atpVerified{}
	unknown := false
	for _, s := range order {
		op := sightings[s]
		mc.Partitions++
		intent, key := ATPSplitKey(s.key)
		var ev []checker.Operation
		where := "the final read"
		if op != nil {
			ev, where = []checker.Operation{*op}, describeATPOp(op)
		}
		kind, rule := ATPSettlementSigned, RuleSettlementSigned
		wantType := ReceiptSettlement
		if s.state == StateCompensated {
			kind, rule, wantType = ATPCompensationReceipt, RuleCompensationReceipt, ReceiptCompensation
		}
		fail := func(kind checker.AnomalyKind, rule, why string) {
			atpFail(&mc, s.key)
			r.add(checker.Anomaly{Kind: kind, Key: s.key,
				Explanation: fmt.Sprintf("%s: intent %s key %q, %s row (%s): %s", rule, intent, key, s.state, where, why), Ops: ev})
		}
		if s.receipt == ATPNoReceipt {
			fail(kind, rule, fmt.Sprintf("the row carries no receipt: a %s row carries its signed %s receipt", s.state, wantType))
			continue
		}
		raw := r.receiptBytes(s.receipt, s.key)
		if raw == nil || r.rec.Keys == nil {
			unknown = true
			continue
		}
		res, ok := cache[s.receipt]
		if !ok {
			res = verifyATPReceipt(raw, *r.rec.Keys)
			cache[s.receipt] = res
		}
		switch {
		case res.Err != nil:
			fail(ATPSignedBySiteKey, RuleSignedBySiteKey, fmt.Sprintf("receipt %s does not verify with the site's published keys (%s): %v; receipt: %s",
				s.receipt, describeKeys(*r.rec.Keys), res.Err, clip(raw, 400)))
			continue
		case res.TamperedVerifies:
			fail(ATPSignedBySiteKey, RuleSignedBySiteKey, fmt.Sprintf("receipt %s verifies, and so does a copy with one byte of its body changed (%s): the signature does not bind the body",
				s.receipt, res.Tamper))
			continue
		}
		// The text asks of a settlement receipt only that it be signed by
		// the site key (Ed25519 over the JCS form of its body), and of a
		// compensation receipt that it reference the original intent_id:
		// the binding's other members are its example. What a body says
		// of its transaction, when it says it, is this row's.
		b := res.Body
		var wrong []string
		if b.Type != "" && b.Type != wantType {
			wrong = append(wrong, fmt.Sprintf("type %q, not %q", b.Type, wantType))
		}
		if b.State != "" && b.State != s.state {
			wrong = append(wrong, fmt.Sprintf("state %q, not %q", b.State, s.state))
		}
		if s.state == StateCompensated && b.ReferencesIntentID != intent {
			wrong = append(wrong, fmt.Sprintf("references_intent_id %q, not %q", b.ReferencesIntentID, intent))
		}
		if b.IntentID != "" && b.IntentID != intent {
			wrong = append(wrong, fmt.Sprintf("intent_id %q, not %q", b.IntentID, intent))
		}
		if b.IdempotencyKey != "" && b.IdempotencyKey != key {
			wrong = append(wrong, fmt.Sprintf("idempotency_key %q, not %q", b.IdempotencyKey, key))
		}
		if len(wrong) > 0 {
			fail(kind, rule, fmt.Sprintf("its receipt %s verifies but its body says %s: the receipt is not this row's %s receipt; body: %s",
				s.receipt, strings.Join(wrong, ", "), wantType, clip(res.RawBody, 400)))
		}
	}
	if unknown && mc.Result == checker.LinOk {
		mc.Result = checker.LinUnknown
	}
	return mc
}

// atpVerified is what verifying one receipt found.
type atpVerified struct {
	Body    ReceiptBody
	RawBody json.RawMessage
	Err     error
	// TamperedVerifies: a copy whose body differs in one byte verified
	// too (Tamper says which byte): the verifier's self-check failed.
	TamperedVerifies bool
	Tamper           string
}

func verifyATPReceipt(raw []byte, keys JWKSet) atpVerified {
	var res atpVerified
	res.Body, res.Err = VerifyReceipt(raw, keys)
	if res.Err != nil {
		return res
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		res.Err = err
		return res
	}
	res.RawBody = doc["body"]
	tampered, where, ok := tamperOneByte(doc["body"])
	if !ok {
		return res // a body with no string value or digit to change: VerifyReceipt would not have parsed it
	}
	doc["body"] = tampered
	copyRaw, _ := json.Marshal(doc)
	if _, err := VerifyReceipt(copyRaw, keys); err == nil {
		res.TamperedVerifies, res.Tamper = true, where
	}
	return res
}

// tamperOneByte changes one byte of a JSON object's first string value (or
// else of any string, or else its first digit) so that its JCS form
// changes, keeping it JSON.
func tamperOneByte(body []byte) ([]byte, string, bool) {
	out := append([]byte(nil), body...)
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	flip := func(i int) ([]byte, string, bool) {
		c := out[i]
		out[i] = c ^ 1 // stays a plain character inside a string
		return out, fmt.Sprintf("byte %d %q → %q", i, c, out[i]), true
	}
	// The first alphanumeric byte of a value string, else of any string.
	anyString := -1
	var stack []byte
	inString, escaped, isValue := false, false, false
	lastSig := byte(0)
	hex := 0 // hex digits of a \uXXXX escape still to skip
	for i, c := range out {
		switch {
		case inString && hex > 0:
			hex--
		case inString && escaped:
			escaped = false
			if c == 'u' {
				hex = 4
			}
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
			lastSig = c
		case inString && alnum(c):
			if isValue {
				return flip(i)
			}
			if anyString < 0 {
				anyString = i
			}
		case inString:
		case c == '"':
			top := byte(0)
			if len(stack) > 0 {
				top = stack[len(stack)-1]
			}
			inString, isValue = true, !(top == '{' && (lastSig == '{' || lastSig == ','))
		case c == '{' || c == '[':
			stack = append(stack, c)
			lastSig = c
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			lastSig = c
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			lastSig = c
		}
	}
	if anyString >= 0 {
		return flip(anyString)
	}
	for i, c := range out {
		if c >= '1' && c <= '8' {
			out[i] = c + 1
			return out, fmt.Sprintf("byte %d %q → %q", i, c, out[i]), true
		}
	}
	return nil, "", false
}

func describeKeys(k JWKSet) string {
	var kids []string
	for _, j := range k.Keys {
		kids = append(kids, fmt.Sprintf("%q", j.Kid))
	}
	return fmt.Sprintf("%d key(s), kid %s", len(k.Keys), strings.Join(kids, ", "))
}

// checkSpeculative judges ATP-4-never-speculative (no answer and no final
// row shows a receipt on a row created, authorized, executing or
// executed) and ATP-4-expired-no-receipt (nor on an expired row). One
// anomaly per transaction: its first such answer.
func (r *atpRun) checkSpeculative() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelATPSpeculative, Result: checker.LinOk}
	keys := map[string]bool{}
	for k := range r.byKey {
		keys[k] = true
	}
	for k := range r.rows {
		keys[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		mc.Partitions++
		intent, key := ATPSplitKey(k)
		var bad *checker.Operation
		badState, badReceipt := "", ""
		for _, i := range r.byKey[k] {
			op := &r.h.Ops[i]
			mc.Ops++
			if !atpObserved(op) || Terminal(op.Output.State) && op.Output.State != StateExpired {
				continue
			}
			if a := parseATPAnswer(op.Output.Body); a.row && a.receipt != ATPNoReceipt {
				bad, badState, badReceipt = op, op.Output.State, a.receipt
				break
			}
		}
		where := ""
		if bad != nil {
			where = describeATPOp(bad)
		} else if row := r.rows[k]; row != nil && row.Status == 200 && Rank(row.State) >= 0 &&
			(!Terminal(row.State) || row.State == StateExpired) && ATPReceiptDigest(row.Receipt) != ATPNoReceipt {
			where, badState, badReceipt = "the final read", row.State, ATPReceiptDigest(row.Receipt)
		}
		if where == "" {
			continue
		}
		atpFail(&mc, k)
		var ev []checker.Operation
		if bad != nil {
			ev = []checker.Operation{*bad}
		}
		raw := r.receiptBytes(badReceipt, k)
		if badState == StateExpired {
			r.add(checker.Anomaly{Kind: ATPExpiredNoReceipt, Key: k, Ops: ev,
				Explanation: fmt.Sprintf("%s: intent %s key %q: an expired row carries receipt %s (%s): an expired intent has none; receipt: %s",
					RuleExpiredNoReceipt, intent, key, badReceipt, where, clip(raw, 300))})
			continue
		}
		r.add(checker.Anomaly{Kind: ATPNeverSpeculative, Key: k, Ops: ev,
			Explanation: fmt.Sprintf("%s: intent %s key %q: a row in state %s carries receipt %s (%s): receipts are issued only on entry to settled or compensated; receipt: %s",
				RuleNeverSpeculative, intent, key, badState, badReceipt, where, clip(raw, 300))})
	}
	return mc
}

// ATPStateModel is the state machine of one transaction (§1) as a
// checker.Model: partitioned by transaction, each answer that shows the
// row observed its state at some instant in [call, return]; the model's
// state is the row's state, and it accepts an observation equal to it or
// later in the machine (Rank), never an earlier one (so no
// executing → authorized), never another terminal state.
type ATPStateModel struct{}

var _ checker.Model = ATPStateModel{}

// Name is ModelATPStates.
func (ATPStateModel) Name() string { return ModelATPStates }

// Partition is the transaction of an answer that showed a row.
func (ATPStateModel) Partition(op *checker.Operation) (string, bool) {
	return op.Key, op.Key != "" && (op.Kind == checker.OpPublish || op.Kind == checker.OpStatus) && atpObserved(op)
}

// atpFollows reports whether a row in state cur may next be observed in
// state next.
func atpFollows(cur, next string) bool {
	return next == cur || Rank(next) > Rank(cur)
}

// Porcupine is the model for porcupine.
func (ATPStateModel) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, input, _ any) (bool, any) {
			cur := state.(string)
			next := input.(*checker.Operation).Output.State
			if !atpFollows(cur, next) {
				return false, cur
			}
			return true, next
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return describeATPOp(input.(*checker.Operation)) },
		DescribeState: func(state any) string {
			if s := state.(string); s != "" {
				return s
			}
			return "no row seen"
		},
	}
}

// Checks is the exact search for a pair of answers that shows a row going
// back, named after ATP-1-monotonic.
func (ATPStateModel) Checks() []checker.NamedCheck {
	return []checker.NamedCheck{{Rule: RuleMonotonic, Check: func(ops []checker.Operation) (bool, string) {
		a, b := ATPRegression(ops)
		if a == nil {
			return true, ""
		}
		return false, regressionWhy(a, b)
	}}}
}

// ATPRegression finds two answers of one transaction that no order of the
// state machine explains: b was sent after a returned and shows an
// earlier state (or another terminal state), or two different terminal
// states at all. nil when there is none. Answers that showed no row are
// ignored.
func ATPRegression(ops []checker.Operation) (a, b *checker.Operation) {
	var seen []*checker.Operation
	for i := range ops {
		if atpObserved(&ops[i]) {
			seen = append(seen, &ops[i])
		}
	}
	// The pair that went back the furthest from the latest state.
	for _, x := range seen {
		for _, y := range seen {
			if x.Return < y.Call && !atpFollows(x.Output.State, y.Output.State) &&
				(a == nil || Rank(x.Output.State) > Rank(a.Output.State) ||
					Rank(x.Output.State) == Rank(a.Output.State) && Rank(y.Output.State) < Rank(b.Output.State)) {
				a, b = x, y
			}
		}
	}
	if a != nil {
		return a, b
	}
	for _, x := range seen {
		for _, y := range seen {
			if Terminal(x.Output.State) && Terminal(y.Output.State) && x.Output.State != y.Output.State {
				if y.Call < x.Call {
					x, y = y, x
				}
				return x, y
			}
		}
	}
	return nil, nil
}

func regressionWhy(a, b *checker.Operation) string {
	if Terminal(a.Output.State) && Terminal(b.Output.State) {
		return fmt.Sprintf("the row was seen %s (%s) and %s (%s): a transaction ends in one terminal state",
			a.Output.State, describeATPOp(a), b.Output.State, describeATPOp(b))
	}
	return fmt.Sprintf("the row was seen %s (%s), then, in a request sent %s after that answer, %s (%s): once a row leaves a state it does not return",
		a.Output.State, describeATPOp(a), checker.FormatNs(b.Call-a.Return), b.Output.State, describeATPOp(b))
}

// atpReduce keeps, of one transaction's answers (idx into ops), for each
// state observed, the answer sent last and the one that returned first.
// Under ATPStateModel the answers that observed one state form one
// stretch of any linearization, so the answers linearize iff no answer
// returned before another was sent that observed an earlier (or another
// terminal) state; for each pair of states, the last-sent answer of the
// one and the first-returned of the other decide it. The reduction (at
// most two answers per state) linearizes iff the transaction's answers
// do, and keeps porcupine fast on a storm's hundreds of concurrent
// answers.
func atpReduce(ops []checker.Operation, idx []int) []int {
	lastCall, firstReturn := map[string]int{}, map[string]int{}
	var states []string
	for _, i := range idx {
		s := ops[i].Output.State
		j, ok := lastCall[s]
		if !ok {
			states = append(states, s)
			lastCall[s], firstReturn[s] = i, i
			continue
		}
		if ops[i].Call > ops[j].Call {
			lastCall[s] = i
		}
		if ops[i].Return < ops[firstReturn[s]].Return {
			firstReturn[s] = i
		}
	}
	var out []int
	for _, s := range states {
		out = append(out, lastCall[s])
		if firstReturn[s] != lastCall[s] {
			out = append(out, firstReturn[s])
		}
	}
	sort.Ints(out)
	return out
}

// checkStates judges ATP-1-monotonic (and ATP-1-no-executing-to-authorized
// when that is the edge seen) per transaction with porcupine over
// ATPStateModel, on the answers atpReduce keeps; a transaction porcupine
// runs out of time on makes the result UNKNOWN. The evidence is the pair
// of answers ATPRegression finds among all of them.
func (r *atpRun) checkStates() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelATPStates, Result: checker.LinOk}
	m := ATPStateModel{}
	pm := m.Porcupine()
	for _, k := range slices.Sorted(maps.Keys(r.byKey)) {
		var idx []int
		for _, i := range r.byKey[k] {
			if _, ok := m.Partition(&r.h.Ops[i]); ok {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		mc.Partitions++
		mc.Ops += len(idx)
		switch porcupine.CheckOperationsTimeout(pm, checker.PorcupineOps(nil, r.h.Ops, atpReduce(r.h.Ops, idx), false), r.opts.Timeout) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			if mc.Result == checker.LinOk {
				mc.Result = checker.LinUnknown
			}
			continue
		}
		atpFail(&mc, k)
		ops := make([]checker.Operation, len(idx))
		for j, i := range idx {
			ops[j] = r.h.Ops[i]
		}
		intent, key := ATPSplitKey(k)
		a, b := ATPRegression(ops)
		if a == nil {
			r.add(checker.Anomaly{Kind: ATPMonotonic, Key: k, Ops: r.evidence([]string{k}),
				Explanation: fmt.Sprintf("%s: intent %s key %q: no order of the %d answers that showed the row follows the state machine (created → authorized → executing → executed → settled | compensated | expired)",
					RuleMonotonic, intent, key, len(idx))})
			continue
		}
		kind, rule := ATPMonotonic, RuleMonotonic
		if a.Output.State == StateExecuting && b.Output.State == StateAuthorized {
			kind, rule = ATPNoExecutingAuthorized, RuleNoExecutingAuthorized
		}
		r.add(checker.Anomaly{Kind: kind, Key: k, Ops: []checker.Operation{*a, *b},
			Explanation: fmt.Sprintf("%s: intent %s key %q: %s", rule, intent, key, regressionWhy(a, b))})
	}
	return mc
}

// checkReconciliation judges ATP-6-reconciliation over the final rows, read
// after waiting up to two reconciliation intervals and a slack: no row is
// still executing (undecided when the wait was cut short), and each
// intent's rows agree with the rail: a settled row and a net charge, or
// neither (more than one charge is ATP-2-no-second-effect's).
func (r *atpRun) checkReconciliation() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelATPReconciliation, Result: checker.LinOk, Ops: len(r.rec.Rows)}
	if len(r.rec.Rows) == 0 {
		if len(r.byKey) > 0 {
			mc.Result = checker.LinUnknown // no final rows recorded: nothing to judge
		}
		return mc
	}
	unknown := false
	byIntent := map[string][]*ATPRow{}
	for i := range r.rec.Rows {
		row := &r.rec.Rows[i]
		byIntent[row.IntentID] = append(byIntent[row.IntentID], row)
	}
	waited := fmt.Sprintf("after waiting %s for rows to leave executing (interval %s, bound %s)",
		r.rec.ReconcileWait.Round(time.Millisecond), r.rec.ReconcileInterval, r.rec.ReconcileBound.Round(time.Millisecond))
	for _, intent := range slices.Sorted(maps.Keys(byIntent)) {
		rows := byIntent[intent]
		mc.Partitions++
		es := r.effects[intent]
		settled, read := false, true
		var keys []string
		for _, row := range rows {
			keys = append(keys, row.Key)
			if !row.Read() {
				read = false
				continue
			}
			switch row.State {
			case StateSettled:
				settled = true
			case StateExecuting:
				if r.rec.ReconcileCutShort {
					unknown = true
					continue
				}
				atpFail(&mc, row.Key)
				r.add(checker.Anomaly{Kind: ATPReconciliation, Key: row.Key, Ops: r.evidence([]string{row.Key}), Effects: es,
					Explanation: fmt.Sprintf("%s: intent %s key %q is still executing %s: the rail callback or the reconciliation sweep resolves an executing row to settled or compensated (the rail: %s; payment intents %s)",
						RuleReconciliation, intent, row.IdempotencyKey, waited, r.charged(intent), r.paymentIntents(intent))})
			}
		}
		if !read {
			unknown = true
			continue
		}
		switch {
		case settled && len(es) == 0:
			atpFail(&mc, intent)
			r.add(checker.Anomaly{Kind: ATPReconciliation, Key: intent, Ops: r.evidence(keys),
				Explanation: fmt.Sprintf("%s: intent %s ended settled (%s) %s, and the rail holds no net charge for it (%s): the row does not agree with the rail",
					RuleReconciliation, intent, r.describeRows(intent), waited, r.charged(intent))})
		case !settled && len(es) > 0 && !slices.ContainsFunc(rows, func(row *ATPRow) bool { return row.State == StateExecuting }):
			atpFail(&mc, intent)
			r.add(checker.Anomaly{Kind: ATPReconciliation, Key: intent, Ops: r.evidence(keys), Effects: es,
				Explanation: fmt.Sprintf("%s: the rail charged intent %s (%s), and its rows ended %s %s: a charged transaction is settled",
					RuleReconciliation, intent, r.charged(intent), r.describeRows(intent), waited)})
		}
	}
	if unknown && mc.Result == checker.LinOk {
		mc.Result = checker.LinUnknown
	}
	return mc
}

// paymentIntents lists the payment intents the site called the rail about
// for an intent.
func (r *atpRun) paymentIntents(intent string) string {
	seen := map[string]bool{}
	var out []string
	for _, c := range r.rec.RailCalls {
		if c.IntentID == intent && c.PaymentIntent != "" && !seen[c.PaymentIntent] {
			seen[c.PaymentIntent] = true
			out = append(out, c.PaymentIntent)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// shortText abbreviates an ID or a body for a one-line description.
func shortText(s string) string {
	if len(s) > 10 {
		return s[:8] + "…"
	}
	return s
}
