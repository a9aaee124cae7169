#!/usr/bin/env python3
"""Known-answer vectors of Intent Protocol v2.1 request signing (seed 004 §5.2).

Regenerate with:

    python3 profiles/intent/testdata/hmac_kat.py > profiles/intent/testdata/hmac_kat.json

The expected CANONICAL_PATHs below were worked out by hand from §5.2 and the
binding written in profiles/intent/hmac.go (segments percent-decoded and re-encoded with
RFC 3986, '/' inside a segment as %2F, query parameters sorted by key on the
decoded bytes, '+' in a query is a space, a parameter without '=' has a blank
value, empty parameters between '&&' are dropped). This script checks each of
them against a third implementation written here with urllib (neither Go
implementation is involved), then signs the signing string

    METHOD \n CANONICAL_PATH \n TIMESTAMP \n NONCE \n BODY

with Python's hmac module and checks every digest again with the openssl
command line (when openssl is installed):

    printf '%s' "$SIGNING_STRING" | openssl dgst -sha256 -hmac "$KEY"

Repeated parameters sent out of value order have two expected canonical
paths, one per reading of the decision "query-repeated-order": by-value
(sorted by key, then value) and as-sent (stable sort by key).
"""

import hashlib
import hmac
import json
import shutil
import subprocess
import sys
import urllib.parse

# name, key, method, escaped path, raw query, timestamp, nonce, body,
# hand-worked canonical path by-value, as-sent (None: same as by-value)
VECTORS = [
    ("get-no-query", "test-secret", "GET", "/status/0190f3c2a1b2c3d4e5f60718293a4b5c", "",
     "1700000000", "n-0001", "",
     "/status/0190f3c2a1b2c3d4e5f60718293a4b5c", None),
    ("post-json-body", "tk_3f2a9c0d1e4b5a6978877665544332211", "POST", "/intent", "",
     "1700000123", "5b8e1c0f-7a2d-4c1e-9f3a-0d6b2e4c8a11",
     '{"goal": "send_notification",\n  "payload": {"message": "Gr\u00fc\u00dfe", "to": ["a@example.com"]}, "priority": 100}',
     "/intent", None),
    ("post-empty-body", "test-secret", "POST", "/fulfill/abc123", "",
     "1700000200", "nonce-empty", "",
     "/fulfill/abc123", None),
    ("query-keys-out-of-order", "test-secret", "POST", "/claim",
     "worker_id=w-1&namespace=jobs&goal=send_email&capabilities=gpu,ssd",
     "1700000300", "n-0004", "",
     "/claim?capabilities=gpu%2Cssd&goal=send_email&namespace=jobs&worker_id=w-1", None),
    ("repeated-keys-in-value-order", "test-secret", "POST", "/claim",
     "tag=alpha&namespace=x&tag=beta&tag=beta",
     "1700000400", "n-0005", "",
     "/claim?namespace=x&tag=alpha&tag=beta&tag=beta", None),
    ("repeated-keys-out-of-value-order", "test-secret", "POST", "/claim",
     "tag=zeta&namespace=x&tag=alpha&tag=mu",
     "1700000500", "n-0006", "",
     "/claim?namespace=x&tag=alpha&tag=mu&tag=zeta",
     "/claim?namespace=x&tag=zeta&tag=alpha&tag=mu"),
    ("repeated-keys-blank-out-of-order", "test-secret", "GET", "/status/abc",
     "goal=b&goal=&goal=a",
     "1700000550", "n-0006b", "",
     "/status/abc?goal=&goal=a&goal=b",
     "/status/abc?goal=b&goal=&goal=a"),
    ("blank-values", "test-secret", "POST", "/claim",
     "publisher=&namespace=default&goal=&worker_id&&",
     "1700000600", "n-0007", "",
     "/claim?goal=&namespace=default&publisher=&worker_id=", None),
    ("query-escapes-space-unicode", "test-secret", "POST", "/claim",
     "goal=hello%20world&note=a+b&city=M%c3%bcnchen&raw=caf\u00e9&path=a/b&marks=!*'()&tilde=%7E",
     "1700000700", "n-0008", "",
     "/claim?city=M%C3%BCnchen&goal=hello%20world&marks=%21%2A%27%28%29&note=a%20b&path=a%2Fb&raw=caf%C3%A9&tilde=~", None),
    ("keys-sorted-on-decoded-bytes", "test-secret", "POST", "/claim",
     "b=2&B=1&%C3%A9=3&~=4&a=5",
     "1700000800", "n-0009", "",
     "/claim?B=1&a=5&b=2&~=4&%C3%A9=3", None),
    ("path-escapes", "test-secret", "GET", "/get/my%20key%2Fsub%2fdir+plus%7e%41", "",
     "1700000900", "n-0010", "",
     "/get/my%20key%2Fsub%2Fdir%2Bplus~A", None),
    ("path-unicode-lowercase-escapes", "tk_0123456789abcdef", "POST", "/set/%e2%82%ac_price.v1", "",
     "1700001000", "n-0011", '{"value":"\u20ac 10","ttl":600}',
     "/set/%E2%82%AC_price.v1", None),
]


def enc(b):
    return urllib.parse.quote_from_bytes(b, safe="")


def py_canonical(path, query, as_sent):
    segs = [enc(urllib.parse.unquote_to_bytes(s)) for s in path.split("/")]
    out = "/".join(segs)
    params = []
    for part in query.split("&"):
        if part == "":
            continue
        k, _, v = part.partition("=")
        params.append((urllib.parse.unquote_to_bytes(k.replace("+", " ")),
                       urllib.parse.unquote_to_bytes(v.replace("+", " "))))
    if not params:
        return out
    if as_sent:
        params.sort(key=lambda kv: kv[0])  # Python's sort is stable
    else:
        params.sort()
    return out + "?" + "&".join(enc(k) + "=" + enc(v) for k, v in params)


def signing_string(method, cp, ts, nonce, body):
    return "\n".join([method.upper(), cp, ts, nonce, body]).encode("utf-8")


def sign(key, msg):
    return hmac.new(key.encode("utf-8"), msg, hashlib.sha256).hexdigest()


def openssl_sign(key, msg):
    out = subprocess.run(["openssl", "dgst", "-sha256", "-hmac", key], input=msg,
                         capture_output=True, check=True).stdout.decode()
    return out.strip().split()[-1]


def main():
    have_openssl = shutil.which("openssl") is not None
    vectors = []
    for name, key, method, path, query, ts, nonce, body, by_value, as_sent in VECTORS:
        if as_sent is None:
            as_sent = by_value
        for reading, want in (("by-value", by_value), ("as-sent", as_sent)):
            got = py_canonical(path, query, reading == "as-sent")
            if got != want:
                sys.exit(f"{name} ({reading}): hand-worked {want!r}, urllib {got!r}")
        v = {"name": name, "key": key, "method": method, "path": path, "query": query,
             "timestamp": ts, "nonce": nonce, "body": body,
             "reading_neutral": by_value == as_sent,
             "canonical_path": {}, "signing_string": {}, "signature": {}}
        for reading, cp in (("by-value", by_value), ("as-sent", as_sent)):
            msg = signing_string(method, cp, ts, nonce, body)
            sig = sign(key, msg)
            if have_openssl and openssl_sign(key, msg) != sig:
                sys.exit(f"{name} ({reading}): openssl disagrees with python hmac")
            v["canonical_path"][reading] = cp
            v["signing_string"][reading] = msg.decode("utf-8")
            v["signature"][reading] = sig
        vectors.append(v)
    doc = {
        "about": "Known answers of Intent Protocol v2.1 §5.2 signing, worked out independently of profiles/intent/hmac.go and sut/intent/signature.go.",
        "generated_by": "python3 profiles/intent/testdata/hmac_kat.py > profiles/intent/testdata/hmac_kat.json",
        "signature": "hex(HMAC-SHA256(key, signing_string)), lower case; checked with: printf '%s' \"$SIGNING_STRING\" | openssl dgst -sha256 -hmac \"$KEY\"",
        "openssl_checked": have_openssl,
        "readings": "canonical_path, signing_string and signature are given per reading of decision query-repeated-order (by-value, as-sent); they differ only where reading_neutral is false",
        "vectors": vectors,
    }
    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
