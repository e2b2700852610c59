#!/usr/bin/env python3
"""
An independent verifier of ALP audit chains, written from docs/audit-format.md alone: it shares no
code with ALP. It reads the metadata store directly:

    python3 scripts/verify-audit.py PATH/alp.db                                   # embedded (SQLite)
    python3 scripts/verify-audit.py 'dynamodb://TABLE?region=R&endpoint=URL'      # distributed (boto3)

(DynamoDB credentials from the usual AWS_* environment variables.) Prints one JSON document
{"artifacts": N, "entries": N, "segments": N, "findings": [...]} and exits 0 when every hot chain
verifies, 1 when there is a finding. Chains with packed history segments are verified from their first
hot entry, linked to the last segment's recorded hash (the segments live in the content store; this
script reads only the metadata) and counted in "segments".
"""
import decimal
import hashlib
import json
import re
import sqlite3
import sys
import urllib.parse

AUDIT_TYPES = {"transition", "approval", "execution", "execution_output", "execution_finish", "provenance", "compensation", "alias"}
VIEW_FIELDS = {
    "execution": {"status", "exit_code", "finished_at", "outputs", "archive_objects"},
    "compensation": {"state", "GSI1PK", "GSI1SK", "updated_at"},
}
RESERVATION_PREFIX = "reserved:"
MOVED_FROM_SK = "moved_from_sk"
# The key moves a migration may have made (docs/audit-format.md section 2, "Moved entries"): old SK -> new SK.
LEGACY_EXECUTION_SK = re.compile(r"^EXEC#([^#]+)#(?:OUTPUT#([^#]+)|(FINISH))$")


def moved_sk(legacy_sk):
    m = LEGACY_EXECUTION_SK.match(legacy_sk)
    if not m:
        return None
    return "FINISH#" + m.group(1) if m.group(3) else "OUTPUT#" + m.group(1) + "#" + m.group(2)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def js_number(x):
    """ECMAScript Number::toString of a finite number (what JSON.stringify prints)."""
    if isinstance(x, int):
        return str(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("non-finite number")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + js_number(-x)
    _, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    n = len(digits) + exp  # the decimal point's position after the first digit
    s = "".join(map(str, digits)).rstrip("0") or "0"
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + s
    e = n - 1
    mantissa = s if k == 1 else s[0] + "." + s[1:]
    return mantissa + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def js_string(s):
    out = json.dumps(s, ensure_ascii=False)
    # JSON.stringify escapes a lone surrogate as \\udxxx (lowercase hex).
    return LONE_SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group(0)), out)


def canonical(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, str):
        return js_string(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v.keys(), key=lambda k: k.encode("utf-16-be"))  # UTF-16 code unit order
        return "{" + ",".join(js_string(k) + ":" + canonical(v[k]) for k in keys) + "}"
    raise TypeError("not a JSON value: %r" % (v,))


def audit_hash(item):
    view = VIEW_FIELDS.get(item.get("type"), set())
    hashed = {k: x for k, x in item.items() if k != "hash" and k not in view and not k.startswith(RESERVATION_PREFIX)}
    old = item.get(MOVED_FROM_SK)
    if isinstance(old, str) and moved_sk(old) == item.get("SK"):
        # A moved entry is hashed under the key it was written with.
        hashed["SK"] = old
        del hashed[MOVED_FROM_SK]
    text = canonical(hashed).encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(text).hexdigest()


def sqlite_items(db_path):
    """Every ART# item of an embedded installation: the attrs JSON plus the key columns."""
    con = sqlite3.connect("file:%s?mode=ro" % db_path, uri=True)
    try:
        for pk, sk, g1pk, g1sk, attrs in con.execute("SELECT PK, SK, GSI1PK, GSI1SK, attrs FROM items WHERE PK LIKE 'ART#%'"):
            item = json.loads(attrs)
            item["PK"], item["SK"] = pk, sk
            if g1pk is not None:
                item["GSI1PK"] = g1pk
            if g1sk is not None:
                item["GSI1SK"] = g1sk
            yield item
    finally:
        con.close()


def plain(v):
    """boto3's DynamoDB values as JSON values (numbers come back as Decimal)."""
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def dynamodb_items(url):
    """Every ART# item of a distributed installation (a consistent scan of the base table)."""
    import boto3
    from boto3.dynamodb.types import TypeDeserializer

    parsed = urllib.parse.urlparse(url)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    client = boto3.client("dynamodb", region_name=query.get("region", "us-east-1"), endpoint_url=query.get("endpoint"))
    des = TypeDeserializer()
    args = {"TableName": parsed.netloc, "ConsistentRead": True}
    while True:
        page = client.scan(**args)
        for raw in page.get("Items", []):
            item = plain({k: des.deserialize(v) for k, v in raw.items()})
            if item.get("PK", "").startswith("ART#"):
                yield item
        if "LastEvaluatedKey" not in page:
            break
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def main(source):
    items = dynamodb_items(source) if source.startswith("dynamodb://") else sqlite_items(source)
    chains, heads, segments = {}, {}, {}
    for item in items:
        pk, sk = item["PK"], item["SK"]
        if sk == "HEAD" and item.get("type") == "head":
            heads[pk] = item
        elif item.get("type") == "history_segment":
            segments.setdefault(pk, []).append(item)
        elif item.get("type") in AUDIT_TYPES:
            chains.setdefault(pk, []).append(item)
    findings, entries = [], 0

    def finding(pk, seq, what):
        findings.append({"artifact": pk[4:], "seq": seq, "finding": what})

    for pk, head in heads.items():
        chain = sorted(chains.get(pk, []), key=lambda i: i["seq"])
        segs = sorted(segments.get(pk, []), key=lambda s: s.get("last_seq", 0))
        packed = segs[-1].get("last_seq", 0) if segs else 0
        expected_seq = packed + 1
        # The first hot entry after packed history links to the last packed entry's hash.
        prev = segs[-1].get("last_hash") if segs else None
        for item in chain:
            if item["seq"] <= packed:
                continue  # also in a segment (a crash between commit and removal): not re-verified here
            entries += 1
            if item["seq"] != expected_seq:
                finding(pk, item["seq"], "sequence gap: expected %d" % expected_seq)
            if audit_hash(item) != item.get("hash"):
                finding(pk, item["seq"], "hash mismatch")
            if item["seq"] == 1 and item.get("prev_hash") is not None:
                finding(pk, 1, "genesis prev_hash is not null")
            elif item["seq"] > 1 and item.get("prev_hash") != prev:
                finding(pk, item["seq"], "prev_hash does not link to the previous entry")
            prev = item.get("hash")
            expected_seq = item["seq"] + 1
        # The last entry is the last hot one, or the last packed one when every later entry is packed.
        if head.get("audit_seq") != expected_seq - 1:
            finding(pk, head.get("audit_seq"), "HEAD audit_seq is not the last entry's seq")
        if head.get("audit_head_hash") != prev:
            finding(pk, head.get("audit_seq"), "HEAD audit_head_hash is not the last entry's hash")
    for pk in chains:
        if pk not in heads:
            finding(pk, None, "audit entries without a HEAD")
    print(json.dumps({"artifacts": len(heads), "entries": entries, "segments": sum(map(len, segments.values())), "findings": findings}))
    return 1 if findings else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: verify-audit.py PATH/alp.db | dynamodb://TABLE?region=R&endpoint=URL\n")
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
