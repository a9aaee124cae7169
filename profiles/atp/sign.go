package atp

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonical is the RFC 8785 (JCS) canonical form of a JSON text.
func Canonical(raw []byte) ([]byte, error) {
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("atp: JCS: %w", err)
	}
	return c, nil
}

// B64 is the binding's encoding of signatures and keys: base64url without
// padding.
var B64 = base64.RawURLEncoding

// SignedBytes is what an intent's signature covers: the JCS form of the
// intent object without its "signature" member.
func SignedBytes(intent []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(intent, &members); err != nil {
		return nil, fmt.Errorf("atp: the intent is not a JSON object: %w", err)
	}
	delete(members, "signature")
	raw, err := json.Marshal(members)
	if err != nil {
		return nil, err
	}
	return Canonical(raw)
}

// SignIntent signs an intent object (its "signature" member, if any, is
// replaced) and returns it with the signature.
func SignIntent(intent []byte, key ed25519.PrivateKey) ([]byte, error) {
	msg, err := SignedBytes(intent)
	if err != nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(intent, &members); err != nil {
		return nil, err
	}
	sig, _ := json.Marshal(B64.EncodeToString(ed25519.Sign(key, msg)))
	members["signature"] = sig
	return json.Marshal(members)
}

// VerifyIntent checks an intent's signature against the agent's key.
func VerifyIntent(intent []byte, pub ed25519.PublicKey) error {
	var s struct {
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(intent, &s); err != nil {
		return fmt.Errorf("atp: the intent is not a JSON object: %w", err)
	}
	sig, err := B64.DecodeString(s.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return errors.New("atp: the intent's signature is not 64 bytes of base64url")
	}
	msg, err := SignedBytes(intent)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, sig) {
		return errors.New("atp: the intent's signature does not verify")
	}
	return nil
}

// PublicKey decodes a JWK of an Ed25519 public key.
func PublicKey(k JWK) (ed25519.PublicKey, error) {
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return nil, fmt.Errorf("atp: key %q is %s/%s, not OKP/Ed25519", k.Kid, k.Kty, k.Crv)
	}
	x, err := B64.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("atp: key %q: x is not 32 bytes of base64url", k.Kid)
	}
	return ed25519.PublicKey(x), nil
}

// NewJWK encodes an Ed25519 public key as a JWK.
func NewJWK(kid string, pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", Kid: kid, X: B64.EncodeToString(pub)}
}

// VerifyReceipt checks a receipt document against a key set, with nothing
// but the site's public keys (§4: "with no shared secret"). It returns the
// receipt's parsed body.
func VerifyReceipt(doc []byte, keys JWKSet) (ReceiptBody, error) {
	var r Receipt
	var body ReceiptBody
	if err := json.Unmarshal(doc, &r); err != nil {
		return body, fmt.Errorf("atp: the receipt is not a JSON object: %w", err)
	}
	if len(r.Body) == 0 || r.Body[0] != '{' {
		return body, errors.New("atp: the receipt has no body object")
	}
	if r.Alg != "Ed25519" {
		return body, fmt.Errorf("atp: the receipt's alg is %q, not Ed25519", r.Alg)
	}
	var key ed25519.PublicKey
	for _, k := range keys.Keys {
		if k.Kid == r.Kid || (r.Kid == "" && len(keys.Keys) == 1) {
			pk, err := PublicKey(k)
			if err != nil {
				return body, err
			}
			key = pk
			break
		}
	}
	if key == nil {
		return body, fmt.Errorf("atp: no site key with kid %q", r.Kid)
	}
	sig, err := B64.DecodeString(r.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return body, errors.New("atp: the receipt's signature is not 64 bytes of base64url")
	}
	msg, err := Canonical(r.Body)
	if err != nil {
		return body, err
	}
	if !ed25519.Verify(key, msg, sig) {
		return body, errors.New("atp: the receipt's signature does not verify over the JCS form of its body")
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return body, fmt.Errorf("atp: the receipt's body: %w", err)
	}
	return body, nil
}

// SignReceipt signs a receipt body with the site key (for tests and the
// harness's tampering; the reference server signs with its own code).
func SignReceipt(body []byte, kid string, key ed25519.PrivateKey) ([]byte, error) {
	msg, err := Canonical(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Receipt{Body: json.RawMessage(bytes.TrimSpace(body)), Alg: "Ed25519", Kid: kid, Signature: B64.EncodeToString(ed25519.Sign(key, msg))})
}
