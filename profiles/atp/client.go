package atp

// The ATP agent client (docs/atp-binding.md): it registers an agent's
// Ed25519 key, signs intents (SignIntent), and sends authorize, execute and
// status reads under an idempotency key, plus the site's config, key set
// and receipt verification. Every request goes through a client.Client, so
// exchanges are recorded when its Options carry a Recorder and the site's
// API key is sent as X-API-Key when configured.
//
// Policy is the text's retry policy (§5, §6): a pure, tested value whose
// Do drives one step (authorize or execute) until an answer is final,
// polling a row that is executing instead of re-executing it.

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/verdict"
)

// ErrCutShort is the transport error of an answer whose body was cut short:
// the request may have been applied (the outcome is unknown).
var ErrCutShort = errors.New("atp: the answer's body was cut short")

// Answer is what one request got back. Tx is the transaction when the body
// is one (a JSON object with a "state" member), Error the error document
// when it is one (an "error" member); Body is the raw body, as sent.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
	Tx     *Transaction
	Error  *Error
	// Outcome is the exchange's outcome: ok when an answer came back whole,
	// unknown when the request may have been applied (a timeout, a reset,
	// a body cut short), fail when it certainly never reached the site.
	Outcome      verdict.Outcome
	Call, Return time.Time
}

// State is the transaction's state, "" when the answer carries none.
func (a Answer) State() string {
	if a.Tx == nil {
		return ""
	}
	return a.Tx.State
}

// Code is the error document's code, "" when there is none.
func (a Answer) Code() string {
	if a.Error == nil {
		return ""
	}
	return a.Error.Error
}

// Site talks to one ATP site.
type Site struct {
	c *client.Client
}

// NewSite returns a Site over c (its base URL, API key, recorder and timeout).
func NewSite(c *client.Client) *Site { return &Site{c: c} }

// Client is the underlying recording client.
func (s *Site) Client() *client.Client { return s.c }

// do sends one request and parses its answer. err is the transport error
// (nil when an answer came back whole; ErrCutShort when its body was cut
// short, with the status kept).
func (s *Site) do(ctx context.Context, req client.Request) (Answer, error) {
	a := Answer{Call: time.Now()}
	resp, err := s.c.Do(ctx, req)
	a.Return = time.Now()
	if err != nil {
		a.Outcome = client.TransportOutcome(err)
		return a, err
	}
	a.Status, a.Header, a.Body = resp.Status, resp.Header, resp.Body
	a.Outcome = verdict.OutcomeOK
	if resp.Exchange.Err != "" {
		a.Outcome = verdict.OutcomeUnknown
		return a, fmt.Errorf("%w: %s", ErrCutShort, resp.Exchange.Err)
	}
	parseInto(&a)
	return a, nil
}

// parseInto sets a.Tx and a.Error from a.Body: a transaction when the body
// is a JSON object with a "state" member, an error document when it has an
// "error" member.
func parseInto(a *Answer) {
	var probe struct {
		State *string `json:"state"`
		Error *string `json:"error"`
	}
	if json.Unmarshal(a.Body, &probe) != nil {
		return
	}
	if probe.State != nil {
		var tx Transaction
		if json.Unmarshal(a.Body, &tx) == nil {
			a.Tx = &tx
		}
	}
	if probe.Error != nil {
		var e Error
		if json.Unmarshal(a.Body, &e) == nil {
			a.Error = &e
		}
	}
}

// spread names the logical request a delivery belongs to (its step, its
// key, what it carries): with replicas, each delivery of one goes to
// another replica, so a retry never lands where its original did.
func spread(step, key string, what []byte) string {
	h := sha256.Sum256(what)
	return step + "\x00" + key + "\x00" + hex.EncodeToString(h[:8])
}

func keyHeader(key string) http.Header {
	return http.Header{HeaderKey: {key}}
}

// Authorize sends POST /api/atp/authorize with a signed intent (its bytes
// as they are) under an idempotency key.
func (s *Site) Authorize(ctx context.Context, intent []byte, key string) (Answer, error) {
	return s.do(ctx, client.Request{Method: http.MethodPost, Path: PathAuthorize, Header: keyHeader(key), Body: intent,
		Spread: spread("authorize", key, intent)})
}

// Execute sends POST /api/atp/execute {"intent_id"} under an idempotency key.
func (s *Site) Execute(ctx context.Context, intentID, key string) (Answer, error) {
	body, _ := json.Marshal(Execute{IntentID: intentID})
	return s.do(ctx, client.Request{Method: http.MethodPost, Path: PathExecute, Header: keyHeader(key), Body: body,
		Spread: spread("execute", key, []byte(intentID))})
}

// Get reads GET /api/atp/intents/{intent_id} with the transaction's key.
func (s *Site) Get(ctx context.Context, intentID, key string) (Answer, error) {
	return s.do(ctx, client.Request{Method: http.MethodGet, Path: PathIntents + url.PathEscape(intentID), Header: keyHeader(key),
		Spread: spread("get", key, []byte(intentID))})
}

// Config reads GET /api/atp/config.
func (s *Site) Config(ctx context.Context) (Config, Answer, error) {
	var c Config
	a, err := s.do(ctx, client.Request{Method: http.MethodGet, Path: PathConfig})
	if err == nil {
		err = decode200(a, &c)
	}
	return c, a, err
}

// Keys reads GET /api/atp/keys (no credentials: a third party's read).
func (s *Site) Keys(ctx context.Context) (JWKSet, Answer, error) {
	var k JWKSet
	a, err := s.do(ctx, client.Request{Method: http.MethodGet, Path: PathKeys, NoAPIKey: true})
	if err == nil {
		err = decode200(a, &k)
	}
	return k, a, err
}

// Verify sends a receipt document to POST /api/atp/receipts/verify, with no
// credentials (§4: "with no shared secret"). A 4xx is an answer (a receipt
// that does not verify), not an error.
func (s *Site) Verify(ctx context.Context, receipt []byte) (VerifyAnswer, Answer, error) {
	var v VerifyAnswer
	a, err := s.do(ctx, client.Request{Method: http.MethodPost, Path: PathVerify, Body: receipt, NoAPIKey: true})
	if err == nil && a.Status == http.StatusOK {
		if jerr := json.Unmarshal(a.Body, &v); jerr != nil {
			err = fmt.Errorf("atp: POST %s: %w", PathVerify, jerr)
		}
	}
	return v, a, err
}

func decode200(a Answer, into any) error {
	if a.Status != http.StatusOK {
		return fmt.Errorf("atp: status %d: %s", a.Status, truncate(a.Body))
	}
	if err := json.Unmarshal(a.Body, into); err != nil {
		return fmt.Errorf("atp: %w", err)
	}
	return nil
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// Agent is one agent: an ID and an Ed25519 key, talking to a site.
type Agent struct {
	*Site
	ID  string
	Key ed25519.PrivateKey
}

// NewAgent returns the agent id with key on site.
func NewAgent(site *Site, id string, key ed25519.PrivateKey) *Agent {
	return &Agent{Site: site, ID: id, Key: key}
}

// KeyFromSeed derives an agent key from 32 bytes read from r (a seeded
// source makes a run's agents the same for the same seed).
func KeyFromSeed(r io.Reader) (ed25519.PrivateKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(r, seed); err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// JWK is the agent's public key as the binding registers it.
func (a *Agent) JWK() JWK {
	return NewJWK("", a.Key.Public().(ed25519.PublicKey))
}

// Register sends PUT /api/atp/agents/{agent_id} with the agent's public key
// (201 new, 200 the same key again, 409 another key).
func (a *Agent) Register(ctx context.Context) (Answer, error) {
	body, _ := json.Marshal(AgentRegistration{PublicKey: a.JWK()})
	return a.do(ctx, client.Request{Method: http.MethodPut, Path: PathAgents + url.PathEscape(a.ID), Body: body})
}

// IntentParams are the members of an intent besides its agent and
// signature.
type IntentParams struct {
	IntentID       string
	Nonce          string
	ExpiresAt      time.Time
	Amount         int64
	Currency       string
	Payee          string
	ActionDedupKey string        // "" : none
	Precondition   *Precondition // nil: none
}

// NewIntent builds the agent's intent and signs it: the bytes to send, as
// they will be sent on every retry.
func (a *Agent) NewIntent(p IntentParams) ([]byte, error) {
	in := Intent{IntentID: p.IntentID, AgentID: a.ID, Nonce: p.Nonce, ExpiresAt: FormatTime(p.ExpiresAt),
		Amount: p.Amount, Currency: p.Currency, Payee: p.Payee, ActionDedupKey: p.ActionDedupKey, Precondition: p.Precondition}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return SignIntent(raw, a.Key)
}
