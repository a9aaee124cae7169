#!/usr/bin/env python3
"""Known-answer vectors of the IDS binding's key and fingerprint, worked out
from docs/ids-binding.md with Python's own json and hashlib (not idscheck's
code). For these vectors (integers, strings of the Basic Multilingual Plane)
json.dumps(sort_keys, compact, ensure_ascii=False) is exactly RFC 8785 JCS.

    python3 profiles/ids/testdata/key_kat.py > profiles/ids/testdata/key_kat.json
"""
import hashlib, json

def jcs(o):
    return json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

def h(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()

EPHEMERAL = ("command_id", "idempotency_key", "confirmation_token", "timestamp", "message_id", "trace_id")

def vector(name, envelope, spelled=None):
    """envelope: the envelope as an object; spelled: the same envelope as a
    JSON text spelled otherwise (member order, number form), if any."""
    inputs = {"tenant_id": envelope["tenant_id"],
              "principal": envelope.get("effective_actor_id") or envelope["actor_id"],
              "intent": envelope["intent"], "args": envelope.get("args", {})}
    if "command_kind" in envelope:
        inputs["command_kind"] = envelope["command_kind"]
    fp = {k: v for k, v in envelope.items() if k not in EPHEMERAL}
    fp.setdefault("args", {})
    return {"name": name, "envelope": spelled or json.dumps(envelope, ensure_ascii=False),
            "key_inputs_jcs": jcs(inputs), "key": h(jcs(inputs)),
            "fingerprint_jcs": jcs(fp), "fingerprint": h(jcs(fp))}

base = {"command_id": "cmd-7f3a9c", "tenant_id": "acme", "actor_id": "alice",
        "intent": {"entity": "payment", "action": "capture", "target": "order-42"},
        "args": {"amount_minor": 1250, "currency": "EUR"}, "command_kind": "I3"}
vectors = [
    vector("worked-example", base),
    vector("spelled-otherwise", base,
           '{"args":{"currency":"EUR","amount_minor":1.25e3},"command_kind":"I3","actor_id":"alice",'
           '"intent":{"target":"order-42","action":"capture","entity":"payment"},"tenant_id":"acme","command_id":"cmd-7f3a9c"}'),
    vector("ephemeral-fields", dict(base, command_id="cmd-other", timestamp="2026-11-24T10:00:00Z",
                                    message_id="wamid.1", trace_id="4bf92f3577b34da6", confirmation_token="cft_x")),
    vector("effective-actor", dict(base, actor_id="ops-bot", effective_actor_id="alice")),
    vector("other-tenant", dict(base, tenant_id="globex")),
    vector("no-target-no-kind", {"command_id": "c1", "tenant_id": "acme", "actor_id": "bob",
                                 "intent": {"entity": "note", "action": "add"}, "args": {"text": "café €5"}}),
    vector("empty-args", {"command_id": "c2", "tenant_id": "acme", "actor_id": "bob",
                          "intent": {"entity": "balance", "action": "get"}, "args": {}}),
    vector("nested-args", {"command_id": "c3", "tenant_id": "acme", "actor_id": "bob",
                           "intent": {"entity": "order", "action": "cancel", "target": "o-9"},
                           "args": {"z": [3, 2, 1], "a": {"y": True, "b": None}}}),
]
print(json.dumps({"source": "docs/ids-binding.md, computed by key_kat.py", "vectors": vectors}, indent=1, ensure_ascii=False))
