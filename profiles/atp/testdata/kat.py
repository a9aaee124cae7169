#!/usr/bin/env python3
"""Known-answer vectors of the ATP binding (docs/atp-binding.md), worked out
without idscheck's code: the canonical form with Python's json module (for
these objects, integers and strings only, it is RFC 8785 JCS: members sorted,
no whitespace, UTF-8), the Ed25519 signatures with OpenSSL. Run:
    python3 profiles/atp/testdata/kat.py > profiles/atp/testdata/kat.json
"""
import base64, json, os, subprocess, tempfile

# RFC 8032 §7.1 test 1 (the agent) and test 2 (the site).
AGENT_SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
SITE_SEED = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"

def pem(seed_hex):
    der = bytes.fromhex("302e020100300506032b657004220420" + seed_hex)
    return "-----BEGIN PRIVATE KEY-----\n" + base64.b64encode(der).decode() + "\n-----END PRIVATE KEY-----\n"

def run(args, data=None):
    return subprocess.run(args, input=data, capture_output=True, check=True).stdout

def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

def public(seed_hex):
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(pem(seed_hex))
    der = run(["openssl", "pkey", "-in", f.name, "-pubout", "-outform", "DER"])
    os.unlink(f.name)
    return der[-32:]

def sign(seed_hex, msg):
    with tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False) as f:
        f.write(pem(seed_hex))
    with tempfile.NamedTemporaryFile("wb", delete=False) as m:
        m.write(msg)
    sig = run(["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", f.name, "-in", m.name])
    os.unlink(f.name); os.unlink(m.name)
    return sig

def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

intents = [
    {"intent_id": "int_abc", "agent_id": "agt_1", "nonce": "n1", "expires_at": "2026-05-25T12:00:00Z",
     "amount": 1250, "currency": "EUR", "payee": "merchant_42"},
    {"intent_id": "int_def", "agent_id": "agt_1", "nonce": "n2", "expires_at": "2026-05-25T12:05:00Z",
     "amount": 99, "currency": "USD", "payee": "merchant_42", "action_dedup_key": "cart:9e1f:user_17:2026-05-25T12:04",
     "precondition": {"intent_settled": "int_abc"}},
    {"intent_id": "int_ü€", "agent_id": "agt_1", "nonce": "n3", "expires_at": "2026-05-25T12:10:00Z",
     "amount": 1000000000000, "currency": "JPY", "payee": "mérchant"},
]
receipts = [
    {"type": "atp.settlement", "intent_id": "int_abc", "idempotency_key": "6f1d0b3e-6a0e-4a39-9a8c-4c1f0b2d9e77",
     "agent_id": "agt_1", "amount": 1250, "currency": "EUR", "payee": "merchant_42",
     "rail_reference": "pi_0001", "state": "settled", "issued_at": "2026-05-25T11:58:02.391Z"},
    {"type": "atp.compensation", "intent_id": "int_def", "idempotency_key": "0123456789abcdef",
     "agent_id": "agt_1", "amount": 99, "currency": "USD", "payee": "merchant_42",
     "references_intent_id": "int_def", "reason": "declined", "state": "compensated",
     "issued_at": "2026-05-25T12:01:00Z"},
]

out = {
    "agent": {"seed": AGENT_SEED, "public_key": public(AGENT_SEED).hex(), "x": b64u(public(AGENT_SEED))},
    "site": {"seed": SITE_SEED, "public_key": public(SITE_SEED).hex(), "x": b64u(public(SITE_SEED)), "kid": "site-1"},
    "intents": [], "receipts": [],
}
for i in intents:
    c = canonical(i)
    out["intents"].append({"intent": i, "canonical": c.decode("utf-8"), "signature": b64u(sign(AGENT_SEED, c))})
for r in receipts:
    c = canonical(r)
    out["receipts"].append({"body": r, "canonical": c.decode("utf-8"), "signature": b64u(sign(SITE_SEED, c))})
print(json.dumps(out, indent=1, ensure_ascii=False))
