package atp

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"net/http"
	"strings"
)

type jwkDoc struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

type agentDoc struct {
	AgentID   string `json:"agent_id"`
	PublicKey jwkDoc `json:"public_key"`
}

// putAgent is PUT /api/atp/agents/{agent_id}: 201 for a new agent, 200 for
// the same key again, 409 when the agent holds another key.
func (s *Server) putAgent(w http.ResponseWriter, r *http.Request) error {
	id := strings.TrimPrefix(r.URL.Path, pathAgents)
	if !idChars.MatchString(id) {
		return errorf(400, codeInvalidRequest, "agent_id %q does not match %s", id, idChars)
	}
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	_, m, err := objectMembers(b)
	if err != nil {
		return errorf(400, codeInvalidRequest, `the body is {"public_key": {"kty": "OKP", "crv": "Ed25519", "x": "…"}}: %v`, err)
	}
	raw, ok := m["public_key"]
	if !ok {
		return errorf(400, codeInvalidRequest, "public_key is required")
	}
	_, k, err := objectMembers(raw)
	if err != nil {
		return errorf(400, codeInvalidRequest, "public_key is not a JWK object: %v", err)
	}
	kty, _, err1 := stringMember(k, "kty")
	crv, _, err2 := stringMember(k, "crv")
	x, _, err3 := stringMember(k, "x")
	if err1 != nil || err2 != nil || err3 != nil || kty != "OKP" || crv != "Ed25519" {
		return errorf(400, codeInvalidRequest, "public_key is not an OKP/Ed25519 JWK")
	}
	pub, err := b64.DecodeString(x)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return errorf(400, codeInvalidRequest, "public_key.x is not 32 bytes of base64url without padding")
	}
	x = b64.EncodeToString(pub)
	now := fmtTime(s.clock())
	v, err := s.w.Submit(r.Context(), func(tx *sql.Tx) (any, error) {
		var stored string
		err := tx.Stmt(s.st.getAgent).QueryRow(id).Scan(&stored)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err := tx.Stmt(s.st.insertAgent).Exec(id, x, now)
			return 201, err
		case err != nil:
			return nil, err
		case stored == x:
			return 200, nil
		}
		return 409, nil
	})
	if err != nil {
		return err
	}
	if v.(int) == 409 {
		return errorf(409, codeAgentKeyConflict, "agent %s holds another key", id)
	}
	s.agentMu.Lock()
	s.agents[id] = ed25519.PublicKey(pub)
	s.agentMu.Unlock()
	writeJSON(w, v.(int), agentDoc{id, jwkDoc{"OKP", "Ed25519", x}})
	return nil
}

// agentKey is the registered key of an agent (nil when unknown). A key
// never changes once registered, so it is cached.
func (s *Server) agentKey(ctx context.Context, id string) (ed25519.PublicKey, error) {
	s.agentMu.RLock()
	pub := s.agents[id]
	s.agentMu.RUnlock()
	if pub != nil {
		return pub, nil
	}
	var x string
	err := s.st.rAgent.QueryRowContext(ctx, id).Scan(&x)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := b64.DecodeString(x)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("atp: a stored agent key is not 32 bytes")
	}
	s.agentMu.Lock()
	s.agents[id] = ed25519.PublicKey(b)
	s.agentMu.Unlock()
	return ed25519.PublicKey(b), nil
}
