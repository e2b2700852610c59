"""DSSE envelopes verified with code nobody at ALP wrote (issue 20 item 3): Debian's python3-cryptography
(Ed25519) and the Python standard library, following the DSSE v1 protocol
(github.com/secure-systems-lab/dsse/blob/v1.0.0/protocol.md) and nothing of ALP's.

stdin:  {"public_key": base64 raw Ed25519 key, "fingerprint": "sha256:<hex>", "envelopes": [envelope, ...]}
stdout: one JSON list, per envelope {"ok": true, "statement": <decoded payload>} or {"ok": false, "error": "..."}
"""
import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def b64decode(text):
    # The protocol lets signers use the standard or the URL-safe alphabet; verifiers accept both.
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def pae(payload_type, body):
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(body), body)


def verify(envelope, key):
    body = b64decode(envelope["payload"])
    message = pae(envelope["payloadType"], body)
    verified = False
    # keyid is an unauthenticated hint: every signature is tried against the pinned key.
    for signature in envelope["signatures"]:
        try:
            key.verify(b64decode(signature["sig"]), message)
            verified = True
            break
        except InvalidSignature:
            continue
    if not verified:
        return {"ok": False, "error": "no signature verifies"}
    if envelope["payloadType"] != PAYLOAD_TYPE:
        return {"ok": False, "error": "unsupported payloadType " + envelope["payloadType"]}
    return {"ok": True, "statement": json.loads(body)}


def main():
    request = json.load(sys.stdin)
    raw = b64decode(request["public_key"])
    if "sha256:" + hashlib.sha256(raw).hexdigest() != request["fingerprint"]:
        raise SystemExit("the public key does not match its fingerprint")
    key = Ed25519PublicKey.from_public_bytes(raw)
    json.dump([verify(e, key) for e in request["envelopes"]], sys.stdout)


if __name__ == "__main__":
    main()
