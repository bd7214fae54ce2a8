"""Schemathesis hooks that steer fuzzed requests onto the server's success paths.

Without them nearly every generated request stops at 403 (a random subject.tenant never
matches the API key's tenant), at 400 (random subject values outside the charset the server
enforces) or at 404 (random reservation / evidence ids), so the success-response schemas
would barely be exercised. The hooks only rewrite those identity fields; everything else
stays as generated, including deliberately invalid (negative) values.
"""

import json
import os
import random
import re
import urllib.request
import uuid
from typing import Any

import schemathesis

URL = os.environ["CYCLES_URL"]
KEY = os.environ.get("CYCLES_API_KEY", "cycles-local-key")
LEVELS = ("tenant", "workspace", "app", "workflow", "agent", "toolset")
_rng = random.Random(7)


def _post(path: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        URL + path,
        data=json.dumps(body).encode(),
        headers={"X-Cycles-API-Key": KEY, "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def _fresh_reservation() -> Any:
    body = {
        "idempotency_key": str(uuid.uuid4()),
        "subject": {"tenant": "acme"},
        "action": {"kind": "llm.completion", "name": "fidelity"},
        "estimate": {"unit": "USD_MICROCENTS", "amount": 1},
        "ttl_ms": 3_600_000,
    }
    return _post("/v1/reservations", body)


def _sanitize_subject(subject: object) -> None:
    if not isinstance(subject, dict):
        return
    for level in LEVELS:
        value = subject.get(level)
        if isinstance(value, str):
            clean = re.sub(r"[^A-Za-z0-9_.-]", "", value)[:128]
            subject[level] = clean or "x"
    if "tenant" in subject and isinstance(subject["tenant"], str):
        subject["tenant"] = "acme"


@schemathesis.hook
def map_case(
    context: schemathesis.HookContext, case: schemathesis.Case[Any]
) -> schemathesis.Case[Any]:
    body = case.body
    if isinstance(body, dict):
        _sanitize_subject(body.get("subject"))
        # Generated keys collide a lot ("0", "a"), which turns most requests into 409
        # IDEMPOTENCY_MISMATCH; keep some collisions, make most keys fresh.
        key = body.get("idempotency_key")
        if isinstance(key, str) and key and _rng.random() < 0.6:
            body["idempotency_key"] = str(uuid.uuid4())
        # A fuzzed header key rarely equals the body key; keep them consistent most of the time.
        headers = case.headers
        if isinstance(headers, dict) and "X-Idempotency-Key" in headers and _rng.random() < 0.8:
            if isinstance(body.get("idempotency_key"), str):
                headers["X-Idempotency-Key"] = body["idempotency_key"]
    query = case.query
    if isinstance(query, dict) and query.get("tenant") is not None and _rng.random() < 0.8:
        query["tenant"] = "acme"
    params = case.path_parameters
    if isinstance(params, dict) and _rng.random() < 0.7:
        try:
            if "reservation_id" in params:
                params["reservation_id"] = _fresh_reservation()["reservation_id"]
            elif "evidence_id" in params:
                params["evidence_id"] = _fresh_reservation()["cycles_evidence"]["evidence_id"]
        except Exception:  # the server under test may be mid-failure; keep the generated id
            pass
    return case
