package ids

import (
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// commandDoc is the body of GET /commands/{command_id}.
type commandDoc struct {
	CommandID      string  `json:"command_id"`
	TenantID       string  `json:"tenant_id"`
	IdempotencyKey string  `json:"idempotency_key"`
	Status         string  `json:"status"`
	OutcomeRef     *string `json:"outcome_ref"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
	TTLExpiresAt   *string `json:"ttl_expires_at"`
}

// getCommand answers the status of a command by its original command_id.
// command_id is the sender's and not unique across tenants (nor, for a
// careless sender, across keys): the newest record wins; an optional
// ?tenant_id= narrows the lookup to one tenant.
func (s *Server) getCommand(w http.ResponseWriter, r *http.Request) error {
	id, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/commands/"))
	if err != nil || id == "" {
		return prob(404, codeNotFound, "no such command")
	}
	var x commandDoc
	var ref sql.NullString
	var created, updated int64
	var ttl sql.NullInt64
	err = s.st.rCommand.QueryRowContext(r.Context(), id, r.URL.Query().Get("tenant_id")).Scan(&x.CommandID, &x.TenantID,
		&x.IdempotencyKey, &x.Status, &ref, &created, &updated, &ttl)
	if errors.Is(err, sql.ErrNoRows) {
		return prob(404, codeNotFound, "no command has the original command_id "+id)
	}
	if err != nil {
		return err
	}
	if ref.Valid {
		x.OutcomeRef = &ref.String
	}
	x.CreatedAt, x.UpdatedAt = fmtTime(created), fmtTime(updated)
	if ttl.Valid {
		t := fmtTime(ttl.Int64)
		x.TTLExpiresAt = &t
	}
	writeJSON(w, 200, x)
	return nil
}

type evidenceItem struct {
	EvidenceID        string        `json:"evidence_id"`
	Decision          string        `json:"decision"`
	Executed          bool          `json:"executed"`
	CommandID         string        `json:"command_id"`
	OriginalCommandID string        `json:"original_command_id"`
	IdempotencyKey    string        `json:"idempotency_key"`
	OutcomeRef        *string       `json:"outcome_ref"`
	At                string        `json:"at"`
	Fingerprints      *fingerprints `json:"fingerprints"`
}

type fingerprints struct {
	Stored   string `json:"stored"`
	Received string `json:"received"`
}

func (s *Server) getEvidence(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	tenant, key := q.Get("tenant_id"), q.Get("idempotency_key")
	if tenant == "" || key == "" {
		return prob(400, codeInvalidRequest, "tenant_id and idempotency_key are required query parameters")
	}
	rows, err := s.st.rEvidence.QueryContext(r.Context(), s.scope(tenant), key)
	if err != nil {
		return err
	}
	defer rows.Close()
	items := []evidenceItem{}
	for rows.Next() {
		var it evidenceItem
		var ref, fs, fr sql.NullString
		var at int64
		if err := rows.Scan(&it.EvidenceID, &it.Decision, &it.Executed, &it.CommandID, &it.OriginalCommandID, &it.IdempotencyKey,
			&ref, &at, &fs, &fr); err != nil {
			return err
		}
		if ref.Valid {
			it.OutcomeRef = &ref.String
		}
		if fs.Valid && fr.Valid {
			it.Fingerprints = &fingerprints{fs.String, fr.String}
		}
		it.At = fmtTime(at)
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	writeJSON(w, 200, map[string][]evidenceItem{"evidence": items})
	return nil
}

type confirmationRequest struct {
	TenantID       string `json:"tenant_id"`
	ActorID        string `json:"actor_id"`
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
}

type confirmationDoc struct {
	Token          string `json:"token"`
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
	ExpiresAt      string `json:"expires_at"`
}

// postConfirmation issues a token for one command_id and key: 32 random
// bytes, stored as their SHA-256 (a leaked database yields no token).
func (s *Server) postConfirmation(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return prob(400, codeInvalidRequest, err.Error())
	}
	var req confirmationRequest
	if err := decodeStrict(body, &req); err != nil {
		return prob(400, codeInvalidRequest, err.Error())
	}
	for _, f := range []struct{ name, v string }{{"tenant_id", req.TenantID}, {"actor_id", req.ActorID},
		{"command_id", req.CommandID}, {"idempotency_key", req.IdempotencyKey}} {
		if err := checkLen(f.name, f.v, 1, 128); err != nil {
			return prob(400, codeInvalidRequest, err.Error())
		}
	}
	var b [32]byte
	rand.Read(b[:])
	token := "cft_" + base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock()
	exp := now.Add(s.dur(confirmationTTL)).UnixNano()
	if _, err := s.w.Submit(r.Context(), func(tx *sql.Tx) (any, error) {
		_, err := tx.Stmt(s.st.insertToken).Exec(tokenHash(token), req.TenantID, req.ActorID, req.CommandID, req.IdempotencyKey,
			now.UnixNano(), exp)
		return nil, err
	}); err != nil {
		return err
	}
	writeJSON(w, 201, confirmationDoc{token, req.CommandID, req.IdempotencyKey, fmtTime(exp)})
	return nil
}
