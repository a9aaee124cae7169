package atp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// siteKeys are the site's receipt keys: the one it signs with, and every
// public key the site ever signed with, on any replica (a stored receipt
// is replayed byte for byte, so its key stays published). The keys are
// the store's: a replica that meets a kid it does not know, or is asked
// for the key set, reads them again.
type siteKeys struct {
	kid  string
	priv ed25519.PrivateKey

	mu   sync.RWMutex
	pubs map[string]ed25519.PublicKey // kid → key
	jwks []byte                       // GET /api/atp/keys
}

// siteSeed is the seed of the site key: the configured one, or one
// derived from Seed (the same seed, the same key).
func siteSeed(seed []byte, n uint64) []byte {
	if len(seed) == ed25519.SeedSize {
		return seed
	}
	h := sha256.Sum256([]byte("idscheck sut/atp site key, seed " + strconv.FormatUint(n, 10)))
	return h[:]
}

// loadSiteKeys registers the configured key in site_keys (under kid
// site-1 in a new database, site-N after N-1 other keys: one operation of
// the writer, so that replicas starting together with different keys
// number them apart) and loads every key.
func (s *Server) loadSiteKeys(ctx context.Context, seed []byte, n uint64, now time.Time) (*siteKeys, error) {
	priv := ed25519.NewKeyFromSeed(siteSeed(seed, n))
	x := b64.EncodeToString(priv.Public().(ed25519.PublicKey))
	k := &siteKeys{priv: priv}
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		var kid string
		err := tx.QueryRow(s.q(`SELECT kid FROM site_keys WHERE x = ?`), x).Scan(&kid)
		if err == nil || !errors.Is(err, sql.ErrNoRows) {
			return kid, err
		}
		var count int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM site_keys`).Scan(&count); err != nil {
			return nil, err
		}
		kid = "site-" + strconv.Itoa(count+1)
		_, err = tx.Exec(s.q(`INSERT INTO site_keys(kid, x, created_at) VALUES(?,?,?)`), kid, x, fmtTime(now))
		return kid, err
	})
	if err != nil {
		return nil, fmt.Errorf("site keys: %w", err)
	}
	k.kid = v.(string)
	if err := s.reloadKeys(ctx, k); err != nil {
		return nil, err
	}
	return k, nil
}

// reloadKeys reads every site key from the store into k.
func (s *Server) reloadKeys(ctx context.Context, k *siteKeys) error {
	order := "rowid"
	if s.dialect == dialectPostgres {
		order = "seq"
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT kid, x FROM site_keys ORDER BY `+order)
	if err != nil {
		return fmt.Errorf("site keys: %w", err)
	}
	defer rows.Close()
	type jwk struct {
		Kty string `json:"kty"`
		Crv string `json:"crv"`
		Kid string `json:"kid"`
		X   string `json:"x"`
		Use string `json:"use"`
		Alg string `json:"alg"`
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	pubs := map[string]ed25519.PublicKey{}
	for rows.Next() {
		var kid, x string
		if err := rows.Scan(&kid, &x); err != nil {
			return fmt.Errorf("site keys: %w", err)
		}
		pub, err := b64.DecodeString(x)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return fmt.Errorf("site keys: key %s is not 32 bytes of base64url", kid)
		}
		pubs[kid] = ed25519.PublicKey(pub)
		set.Keys = append(set.Keys, jwk{"OKP", "Ed25519", kid, x, "sig", "EdDSA"})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("site keys: %w", err)
	}
	if _, ok := pubs[k.kid]; !ok {
		return fmt.Errorf("site keys: the signing key %s is not in the store", k.kid)
	}
	b, _ := json.Marshal(set)
	k.mu.Lock()
	k.pubs, k.jwks = pubs, b
	k.mu.Unlock()
	return nil
}

// keySet is GET /api/atp/keys: every key in the store (what this replica
// read last when the store does not answer).
func (s *Server) keySet(ctx context.Context) []byte {
	if err := s.reloadKeys(ctx, s.site); err != nil {
		s.log.Warn("site keys: reload", "err", err)
	}
	s.site.mu.RLock()
	defer s.site.mu.RUnlock()
	return s.site.jwks
}

// siteKey is the public key of kid (no kid: the only key, when there is
// one), read again from the store when this replica does not know it; an
// error when it does not know it and the store does not answer (another
// replica may have signed with a key of its own: "no such key" would be
// an answer it cannot give).
func (s *Server) siteKey(ctx context.Context, kid string, hasKid bool) (string, ed25519.PublicKey, bool, error) {
	look := func() (string, ed25519.PublicKey, bool) {
		s.site.mu.RLock()
		defer s.site.mu.RUnlock()
		if !hasKid && len(s.site.pubs) == 1 {
			for k, pub := range s.site.pubs {
				return k, pub, true
			}
		}
		pub, ok := s.site.pubs[kid]
		return kid, pub, ok
	}
	if k, pub, ok := look(); ok {
		return k, pub, true, nil
	}
	if err := s.reloadKeys(ctx, s.site); err != nil {
		s.log.Warn("site keys: reload", "err", err)
		return kid, nil, false, err
	}
	k, pub, ok := look()
	return k, pub, ok, nil
}

// Receipt types and reasons.
const (
	receiptSettlement   = "atp.settlement"
	receiptCompensation = "atp.compensation"
)

// receiptBody is the signed body of a receipt (docs/atp-binding.md,
// "Receipts"), in the page's member order; empty optional members are left
// out.
type receiptBody struct {
	Type               string `json:"type"`
	IntentID           string `json:"intent_id"`
	IdempotencyKey     string `json:"idempotency_key"`
	AgentID            string `json:"agent_id"`
	Amount             int64  `json:"amount"`
	Currency           string `json:"currency"`
	Payee              string `json:"payee"`
	RailReference      string `json:"rail_reference,omitempty"`
	ReferencesIntentID string `json:"references_intent_id,omitempty"`
	Reason             string `json:"reason,omitempty"`
	State              string `json:"state"`
	IssuedAt           string `json:"issued_at"`
}

// receiptDoc is a receipt: its body and the site's signature over the JCS
// form of the body.
type receiptDoc struct {
	Body      json.RawMessage `json:"body"`
	Alg       string          `json:"alg"`
	Kid       string          `json:"kid"`
	Signature string          `json:"signature"`
}

// settlementBody is the body of the settlement receipt of x, charged by
// payment intent pi.
func settlementBody(x *row, pi string, at time.Time) receiptBody {
	return receiptBody{Type: receiptSettlement, IntentID: x.intentID, IdempotencyKey: x.key, AgentID: x.agentID,
		Amount: x.amount, Currency: x.currency, Payee: x.payee, RailReference: pi, State: stateSettled, IssuedAt: fmtTime(at)}
}

// compensationBody is the body of the compensation receipt of x: "a
// separate document referencing the original intent_id". pi is named
// (rail_reference) only when money moved and was refunded.
func compensationBody(x *row, reason, refundedPI string, at time.Time) receiptBody {
	return receiptBody{Type: receiptCompensation, IntentID: x.intentID, IdempotencyKey: x.key, AgentID: x.agentID,
		Amount: x.amount, Currency: x.currency, Payee: x.payee, RailReference: refundedPI, ReferencesIntentID: x.intentID,
		Reason: reason, State: stateCompensated, IssuedAt: fmtTime(at)}
}

// sign makes the receipt document of body: Ed25519 by the site key over
// the JCS form of body (§4).
func (s *Server) sign(body receiptBody) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	msg, err := canonicalBytes(raw)
	if err != nil {
		return nil, err
	}
	if s.mutant == MutantNonCanonicalSignature {
		// The bug: the bytes signed are the encoder's (member order of the
		// struct, indented), not the JCS form the receipt promises.
		msg, _ = json.MarshalIndent(body, "", " ")
	}
	return json.Marshal(receiptDoc{Body: raw, Alg: "Ed25519", Kid: s.site.kid,
		Signature: b64.EncodeToString(ed25519.Sign(s.site.priv, msg))})
}

// verifyReceipt checks a receipt document with the site's public keys
// alone; it returns the kid, or why the receipt does not verify, or an
// error when it cannot tell (the store holding the keys does not answer).
func (s *Server) verifyReceipt(ctx context.Context, doc []byte) (kid, reason string, err error) {
	_, m, err := objectMembers(doc)
	if err != nil {
		return "", "the receipt is not a JSON object", nil
	}
	body, ok := m["body"]
	if !ok || len(body) == 0 || body[0] != '{' {
		return "", "the receipt has no body object", nil
	}
	alg, _, err := stringMember(m, "alg")
	if err != nil || alg != "Ed25519" {
		return "", "alg is not Ed25519", nil
	}
	kid, hasKid, err := stringMember(m, "kid")
	if err != nil {
		return "", "kid is not a string", nil
	}
	kid, pub, ok, err := s.siteKey(ctx, kid, hasKid)
	if err != nil {
		return "", "", err
	}
	if !ok {
		return "", "no site key with kid " + strconv.Quote(kid), nil
	}
	sigText, _, err := stringMember(m, "signature")
	if err != nil {
		return "", "signature is not a string", nil
	}
	sig, err := b64.DecodeString(sigText)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", "the signature is not 64 bytes of base64url without padding", nil
	}
	msg, err := canonicalBytes(body)
	if err != nil {
		return "", "the body has no JCS form: " + err.Error(), nil
	}
	if !ed25519.Verify(pub, msg, sig) {
		return "", "the signature does not verify over the JCS form of the body", nil
	}
	return kid, "", nil
}

type verifyAnswer struct {
	Valid  bool   `json:"valid"`
	Kid    string `json:"kid,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// postVerify is POST /api/atp/receipts/verify: for anyone, no credentials.
func (s *Server) postVerify(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	if s.mutant == MutantVerifyAcceptsAnything {
		writeJSON(w, 200, verifyAnswer{Valid: true, Kid: s.site.kid})
		return nil
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errorf(400, codeInvalidRequest, "the body is the receipt document")
	}
	if s.mutant == MutantVerifyByLookup {
		// The bug: "valid" means "a receipt we stored, byte for byte".
		var c bytes.Buffer
		var one int
		if json.Compact(&c, b) != nil || s.rdb.QueryRowContext(r.Context(), s.q(`SELECT 1 FROM transactions WHERE receipt = ? LIMIT 1`), c.String()).Scan(&one) != nil {
			writeJSON(w, 200, verifyAnswer{Valid: false, Reason: "not a receipt this site issued"})
			return nil
		}
		writeJSON(w, 200, verifyAnswer{Valid: true, Kid: s.site.kid})
		return nil
	}
	kid, reason, err := s.verifyReceipt(r.Context(), b)
	if err != nil {
		return err // the store did not answer: a 503, never a verdict
	}
	if reason != "" {
		writeJSON(w, 200, verifyAnswer{Valid: false, Reason: reason})
		return nil
	}
	writeJSON(w, 200, verifyAnswer{Valid: true, Kid: kid})
	return nil
}
