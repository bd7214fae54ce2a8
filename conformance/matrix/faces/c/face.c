/* The C face of the cross-language matrix (conformance/matrix/PROTOCOL.md): one JSON request
 * per stdin line, one JSON response per stdout line, evaluated through libcycles' public API
 * (cycles.h) only. JSON is read with the C tests' small reader (bindings/c/tests/json.c,
 * compiled in); responses are written with a string builder, values the library returned as
 * JSON text are passed through untouched. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cycles.h>

#include "json.h"

/* Background replay interval of the face's clients: an hour, so that only the action's own
 * settlement (write) or the explicit drain (drain) settles anything. */
#define REPLAY_INTERVAL_MS 3600000

/* ---- output ---------------------------------------------------------------------------- */

typedef struct {
    char *b;
    size_t n, cap;
} sb;

static void put(sb *s, const char *text, size_t n) {
    if (s->n + n + 1 > s->cap) {
        s->cap = (s->n + n + 1) * 2;
        s->b = realloc(s->b, s->cap);
        if (!s->b) abort();
    }
    memcpy(s->b + s->n, text, n);
    s->n += n;
    s->b[s->n] = 0;
}

static void raw(sb *s, const char *text) { put(s, text, strlen(text)); }

/* A JSON value (the reader's dump: numbers keep their text). */
static void val(sb *s, const jv *v) {
    char *d = json_dump(v);
    raw(s, d);
    free(d);
}

/* A JSON string of `n` bytes (NULL: null). */
static void str_n(sb *s, const char *text, size_t n) {
    if (!text) {
        raw(s, "null");
        return;
    }
    jv tmp = { .kind = J_STR, .text = (char *)text, .len = n };
    val(s, &tmp);
}

static void str(sb *s, const char *text) { str_n(s, text, text ? strlen(text) : 0); }

/* An integer in the shared vectors' encoding: beyond 2^53 - 1 in magnitude, a decimal string. */
static void exact_int(sb *s, const jv *v) {
    if (!v || v->kind != J_NUM) {
        if (v) val(s, v);
        else raw(s, "null");
        return;
    }
    const char *digits = v->text[0] == '-' ? v->text + 1 : v->text;
    size_t n = strlen(digits);
    bool big = strspn(digits, "0123456789") == n && (n > 16 || (n == 16 && strcmp(digits, "9007199254740991") > 0));
    if (big) str(s, v->text);
    else raw(s, v->text);
}

static void u64_exact(sb *s, uint64_t x) {
    char t[32];
    snprintf(t, sizeof t, x > 9007199254740991ULL ? "\"%llu\"" : "%llu", (unsigned long long)x);
    raw(s, t);
}

/* ---- one request's result -------------------------------------------------------------- */

typedef struct {
    sb ok;             /* the `ok` value, when neither of the others is set */
    cycles_error *err; /* the API raised this Cycles error */
    char *fail;        /* the request could not be evaluated */
} reply;

static void failf(reply *r, const char *fmt, const char *arg) {
    char m[512];
    snprintf(m, sizeof m, fmt, arg ? arg : "");
    free(r->fail);
    r->fail = strdup(m);
}

/* Calls a cycles_* function; on a failure keeps its error in the reply and returns false. */
#define TRY(call) ((call) == CYCLES_OK)

static const char *sget(const jv *o, const char *k) {
    jv *v = json_get(o, k);
    return v && v->kind == J_STR ? v->text : NULL;
}

/* A string member that must be present; NUL bytes cannot cross the C API. */
static const char *need_str(reply *r, const jv *o, const char *k) {
    jv *v = json_get(o, k);
    if (!v || v->kind != J_STR) {
        failf(r, "missing string member %s", k);
        return NULL;
    }
    if (strlen(v->text) != v->len) {
        failf(r, "%s contains a NUL byte: a C string cannot carry it", k);
        return NULL;
    }
    return v->text;
}

/* A string or null member (NULL for null or absent); false on anything else. */
static bool opt_str(reply *r, const jv *o, const char *k, const char **out) {
    jv *v = json_get(o, k);
    *out = NULL;
    if (!v || v->kind == J_NULL) return true;
    return (*out = need_str(r, o, k)) != NULL;
}

/* An integer in the vectors' encoding (JSON integer or decimal string) as C types. */
static bool need_u64(reply *r, const jv *v, const char *what, uint64_t *out) {
    const char *t = v && (v->kind == J_NUM || v->kind == J_STR) ? v->text : NULL;
    char *end = NULL;
    errno = 0;
    if (t && *t >= '0' && *t <= '9') *out = strtoull(t, &end, 10);
    if (!t || !end || *end || errno) {
        failf(r, "%s does not fit the C API's uint64_t", what);
        return false;
    }
    return true;
}

static bool need_i64(reply *r, const jv *v, const char *what, int64_t *out) {
    const char *t = v && (v->kind == J_NUM || v->kind == J_STR) ? v->text : NULL;
    char *end = NULL;
    errno = 0;
    if (t && (*t == '-' || (*t >= '0' && *t <= '9'))) *out = strtoll(t, &end, 10);
    if (!t || !end || *end || errno) {
        failf(r, "%s does not fit the C API's int64_t", what);
        return false;
    }
    return true;
}

/* Appends library JSON text and frees it. */
static void take(sb *s, char *text) {
    raw(s, text);
    cycles_string_free(text);
}

/* ---- pure ops -------------------------------------------------------------------------- */

static void op_timing(const jv *q, reply *r) {
    const char *fn = need_str(r, q, "fn");
    jv *args = json_get(q, "args");
    if (!fn) return;
    char *a = args ? json_dump(args) : strdup("{}"), *out = NULL;
    if (TRY(cycles_timing_call(fn, a, &out, &r->err))) take(&r->ok, out);
    free(a);
}

static void op_pricing(const jv *q, reply *r) {
    const char *fn = need_str(r, q, "fn");
    jv *args = json_get(q, "args");
    if (!fn) return;
    char *a = args ? json_dump(args) : strdup("{}"), *out = NULL;
    if (TRY(cycles_pricing_call(fn, a, &out, &r->err))) take(&r->ok, out);
    free(a);
}

static void op_primary(const jv *q, reply *r) {
    jv *steps = json_get(q, "steps"), *derive = json_get(q, "derive");
    if (!steps || steps->kind != J_ARR) { failf(r, "steps must be an array", NULL); return; }
    char *timeout = json_dump(json_get(q, "request_timeout_ms") ? json_get(q, "request_timeout_ms") : &(jv){ .kind = J_NULL });
    cycles_primary_planner *p = NULL;
    bool ok = TRY(cycles_primary_planner_new(timeout, derive && derive->kind == J_BOOL && derive->b, &p, &r->err));
    free(timeout);
    raw(&r->ok, "[");
    for (size_t i = 0; ok && i < steps->n; i++) {
        char *step = json_dump(steps->items[i]), *d = NULL, *t = NULL;
        ok = TRY(cycles_primary_planner_step(p, step, &d, &r->err)) &&
             TRY(cycles_primary_planner_attempt_timeout(p, &t, &r->err));
        free(step);
        if (!ok) {
            cycles_string_free(d);
            break;
        }
        raw(&r->ok, i ? ",{\"decision\":" : "{\"decision\":");
        take(&r->ok, d);
        raw(&r->ok, ",\"attempt_timeout_ms\":");
        take(&r->ok, t);
        raw(&r->ok, "}");
    }
    raw(&r->ok, "]");
    cycles_primary_planner_free(p);
}

static void op_fallback(const jv *q, reply *r) {
    jv *create = json_get(q, "create"), *steps = json_get(q, "steps"), *prime = json_get(q, "prime");
    uint64_t ttl, at;
    int64_t expires;
    if (!steps || steps->kind != J_ARR) { failf(r, "steps must be an array", NULL); return; }
    if (!need_u64(r, json_get(q, "requested_ttl_ms"), "requested_ttl_ms", &ttl) ||
        !need_u64(r, json_get(create, "at_us"), "create.at_us", &at) ||
        !need_i64(r, json_get(create, "expires_at_ms"), "create.expires_at_ms", &expires))
        return;
    cycles_fallback_planner *p = NULL;
    char *d = NULL;
    bool ok = TRY(cycles_fallback_planner_new(ttl, at, expires, &p, &r->err)) &&
              TRY(cycles_fallback_planner_first_beat(p, prime && prime->kind == J_BOOL && prime->b, &d, &r->err));
    if (ok) {
        raw(&r->ok, "{\"first\":");
        take(&r->ok, d);
        raw(&r->ok, ",\"steps\":[");
    }
    for (size_t i = 0; ok && i < steps->n; i++) {
        char *step = json_dump(steps->items[i]);
        ok = TRY(cycles_fallback_planner_step(p, step, &d, &r->err));
        free(step);
        if (!ok) break;
        raw(&r->ok, i ? ",{\"decision\":" : "{\"decision\":");
        take(&r->ok, d);
        raw(&r->ok, ",\"regime\":");
        str(&r->ok, cycles_fallback_planner_regime(p));
        raw(&r->ok, "}");
    }
    raw(&r->ok, "]}");
    cycles_fallback_planner_free(p);
}

static void op_journal_names(const jv *q, reply *r) {
    const char *rid = need_str(r, q, "reservation_id");
    char *standard = NULL, *legacy = NULL;
    if (rid && TRY(cycles_journal_file_name(rid, &standard, &r->err)) &&
        TRY(cycles_journal_legacy_file_name(rid, &legacy, &r->err))) {
        raw(&r->ok, "{\"standard\":");
        str(&r->ok, standard);
        raw(&r->ok, ",\"legacy\":");
        str(&r->ok, legacy);
        raw(&r->ok, "}");
    }
    cycles_string_free(standard);
    cycles_string_free(legacy);
}

static void op_fingerprint(const jv *q, reply *r) {
    const char *url = need_str(r, q, "base_url"), *key = url ? need_str(r, q, "api_key") : NULL, *tenant = NULL;
    char *fp = NULL;
    if (key && opt_str(r, q, "tenant", &tenant) && TRY(cycles_journal_fingerprint(url, key, tenant, &fp, &r->err))) {
        str(&r->ok, fp);
        cycles_string_free(fp);
    }
}

static void op_parse_record(const jv *q, reply *r) {
    jv *text = json_get(q, "text");
    if (!text || text->kind != J_STR) { failf(r, "text must be a string", NULL); return; }
    char *out = NULL;
    cycles_error *e = NULL;
    if (cycles_journal_parse_record((const uint8_t *)text->text, text->len, &out, &e) != CYCLES_OK) {
        /* Not a usable record: the library says which kind in the error's details. */
        jv *details = json_parse(cycles_error_details_json(e) ? cycles_error_details_json(e) : "null");
        const char *kind = sget(details, "journal_error");
        if (cycles_error_status(e) == CYCLES_INVALID_ARGUMENT && kind) {
            raw(&r->ok, "{\"ok\":false,\"error\":");
            str(&r->ok, kind);
            raw(&r->ok, "}");
            cycles_error_free(e);
        } else {
            r->err = e;
        }
        json_free(details);
        return;
    }
    jv *rec = json_parse(out);
    cycles_string_free(out);
    if (!rec) { failf(r, "cycles_journal_parse_record returned unparsable JSON", NULL); return; }
    raw(&r->ok, "{\"ok\":true");
    const char *same[] = { "reservation_id", "base_url", "mode", "idempotency_key", "extra_keys" };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        raw(&r->ok, ",\"");
        raw(&r->ok, same[i]);
        raw(&r->ok, "\":");
        val(&r->ok, json_get(rec, same[i]) ? json_get(rec, same[i]) : &(jv){ .kind = J_NULL });
    }
    raw(&r->ok, ",\"recorded_at_ms\":");
    exact_int(&r->ok, json_get(rec, "recorded_at_ms"));
    raw(&r->ok, ",\"not_before_ms\":");
    exact_int(&r->ok, json_get(rec, "not_before_ms"));
    /* The bodies are already the exact wire text (as JSON strings). */
    raw(&r->ok, ",\"commit_body_wire\":");
    val(&r->ok, json_get(rec, "commit_body"));
    raw(&r->ok, ",\"event_fallback_body_wire\":");
    val(&r->ok, json_get(rec, "event_fallback_body"));
    raw(&r->ok, "}");
    json_free(rec);
}

static void op_decode(const jv *q, reply *r) {
    jv *x = json_get(q, "exchange"), *resp = json_get(x, "response");
    jv *body = json_get(resp, "body"), *headers = json_get(resp, "headers");
    uint64_t status;
    const char *op = NULL;
    if (!body || body->kind != J_STR) { failf(r, "exchange.response.body must be a string", NULL); return; }
    if (!opt_str(r, x, "operation", &op) || !need_u64(r, json_get(resp, "status"), "exchange.response.status", &status)) return;
    if (status > UINT16_MAX) { failf(r, "exchange.response.status does not fit the C API's uint16_t", NULL); return; }
    char *h = headers && headers->kind != J_NULL ? json_dump(headers) : NULL, *out = NULL;
    cycles_error *e = NULL;
    if (cycles_decode_captured(op, (uint16_t)status, h, (const uint8_t *)body->text, body->len, &out, &e) == CYCLES_OK) {
        jv *reply_ = json_parse(out);
        cycles_string_free(out);
        if (!reply_) failf(r, "cycles_decode_captured returned unparsable JSON", NULL);
        else {
            raw(&r->ok, "{\"result\":");
            val(&r->ok, json_get(reply_, "body"));
            raw(&r->ok, "}");
        }
        json_free(reply_);
    } else {
        /* The error the client would have raised, with its fields. */
        uint64_t secs;
        raw(&r->ok, "{\"error\":{\"kind\":");
        str(&r->ok, cycles_error_name(e));
        raw(&r->ok, ",\"status\":");
        if (cycles_error_http_status(e)) u64_exact(&r->ok, cycles_error_http_status(e));
        else raw(&r->ok, "null");
        raw(&r->ok, ",\"error_code\":");
        str(&r->ok, cycles_error_server_code(e));
        raw(&r->ok, ",\"request_id\":");
        str(&r->ok, cycles_error_request_id(e));
        raw(&r->ok, cycles_error_retryable(e) ? ",\"retryable\":true" : ",\"retryable\":false");
        raw(&r->ok, ",\"retry_after_ms\":");
        /* core's delay: seconds x 1000, none when that overflows */
        if (cycles_error_retry_after_seconds(e, &secs) && secs <= UINT64_MAX / 1000) u64_exact(&r->ok, secs * 1000);
        else raw(&r->ok, "null");
        raw(&r->ok, "}}");
        cycles_error_free(e);
    }
    free(h);
}

/* ---- journal ops (a client of the orchestrator's server) ------------------------------- */

/* A client of the request's identity on its journal directory; `attempts` 0 keeps the default. */
/* Appends the request's Redis journal (`journal_url`) to an options object being built,
 * when it names one; false (the reply failed) when it is not a string. */
static bool journal_url(reply *r, const jv *q, sb *opts) {
    const char *u = NULL;
    if (!opt_str(r, q, "journal_url", &u)) return false;
    if (u) {
        raw(opts, ",\"journal_url\":");
        str(opts, u);
    }
    return true;
}

static cycles_client *client_of(const jv *q, reply *r, unsigned attempts) {
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL, *tenant = NULL;
    const char *dir = key ? need_str(r, q, "journal_dir") : NULL;
    if (!dir || !opt_str(r, q, "tenant", &tenant)) return NULL;
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    if (!journal_url(r, q, &opts)) {
        free(opts.b);
        return NULL;
    }
    char tail[96];
    snprintf(tail, sizeof tail, ",\"replay_interval_ms\":%d", REPLAY_INTERVAL_MS);
    raw(&opts, tail);
    if (attempts) {
        snprintf(tail, sizeof tail, ",\"settle_max_attempts\":%u", attempts);
        raw(&opts, tail);
    }
    raw(&opts, "}");
    cycles_client *c = NULL;
    if (!TRY(cycles_client_new(url, key, tenant, opts.b, &c, &r->err))) c = NULL;
    free(opts.b);
    return c;
}

/* Copies members of `from` into the spec being built. */
static void member(sb *s, const char *name, const jv *v) {
    raw(s, ",\"");
    raw(s, name);
    raw(s, "\":");
    val(s, v ? v : &(jv){ .kind = J_NULL });
}

static void op_write(const jv *q, reply *r) {
    jv *cs = json_get(q, "case"), *metrics = json_get(cs, "metrics"), *metadata = json_get(cs, "metadata");
    int64_t actual;
    if (!cs || cs->kind != J_OBJ) { failf(r, "case must be an object", NULL); return; }
    if (!need_i64(r, json_get(cs, "actual"), "case.actual (cycles_guard_set_actual)", &actual)) return;
    /* The fewest settlement attempts the configuration allows: one. */
    cycles_client *c = client_of(q, r, 1);
    if (!c) return;
    /* The JSON spec carries the whole case (subject dimensions, the estimate's exact text); it
     * needs an idempotency key, which a caller makes unique: 128 random bits. */
    unsigned char rnd[16];
    FILE *ur = fopen("/dev/urandom", "rb");
    bool got = ur && fread(rnd, 1, sizeof rnd, ur) == sizeof rnd;
    if (ur) fclose(ur);
    if (!got) {
        failf(r, "cannot read /dev/urandom for an idempotency key", NULL);
        cycles_client_free(c);
        return;
    }
    char key[64] = "matrix-c-";
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(key + 9 + 2 * i, 3, "%02x", rnd[i]);
    sb spec = { 0 };
    raw(&spec, "{\"heartbeat\":false,\"idempotency_key\":");
    str(&spec, key);
    member(&spec, "subject", json_get(cs, "subject"));
    member(&spec, "action", json_get(cs, "action"));
    member(&spec, "estimate", json_get(cs, "estimate"));
    raw(&spec, "}");
    cycles_guard *g = NULL;
    char *outcome = NULL, *mt = NULL, *md = NULL;
    if (metrics && metrics->kind != J_NULL) mt = json_dump(metrics);
    if (metadata && metadata->kind != J_NULL) md = json_dump(metadata);
    if (TRY(cycles_guard_begin_json(c, spec.b, &g, &r->err)) && TRY(cycles_guard_set_actual(g, actual, &r->err)) &&
        (!mt || TRY(cycles_guard_set_metrics_json(g, mt, &r->err))) &&
        (!md || TRY(cycles_guard_set_metadata_json(g, md, &r->err))) &&
        TRY(cycles_guard_finish(g, true, NULL, &outcome, &r->err))) {
        jv *o = json_parse(outcome);
        jv *settlement = json_get(o, "settlement");
        const char *name = settlement && settlement->kind == J_OBJ ? sget(settlement, "status") : sget(o, "outcome");
        if (!name) failf(r, "an outcome without a name: %s", outcome);
        else {
            raw(&r->ok, "{\"reservation_id\":");
            str(&r->ok, cycles_guard_reservation_id(g));
            raw(&r->ok, ",\"outcome\":");
            str(&r->ok, name);
            raw(&r->ok, "}");
        }
        json_free(o);
    }
    cycles_string_free(outcome);
    free(mt);
    free(md);
    free(spec.b);
    cycles_guard_free(g);
    /* Closed without a drain: the pending record stays for another face. */
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
}

static size_t count_settled(const jv *outcomes) {
    size_t n = 0;
    for (size_t i = 0; outcomes && i < outcomes->n; i++) {
        const char *st = sget(json_get(outcomes->items[i], "settlement"), "status");
        n += st && (!strcmp(st, "committed") || !strcmp(st, "recovered_via_event"));
    }
    return n;
}

/* What the client's events say it settled and quarantined, from any of its passes. */
typedef struct {
    char **settled; /* distinct reservation ids */
    size_t n, quarantined;
} tally;

/* On the client's event thread, one event at a time; read after cycles_client_free joined it. */
static void on_event(void *user_data, const char *event_json, size_t len) {
    tally *t = user_data;
    jv *e = json_parse(event_json);
    const char *kind = sget(e, "kind"), *rid = sget(e, "reservation_id");
    (void)len;
    if (kind && !strcmp(kind, "journal_quarantined")) t->quarantined++;
    if (kind && rid && !strcmp(kind, "settlement_settled")) {
        size_t i = 0;
        while (i < t->n && strcmp(t->settled[i], rid)) i++;
        if (i == t->n) {
            t->settled = realloc(t->settled, (t->n + 1) * sizeof *t->settled);
            t->settled[t->n++] = strdup(rid);
        }
    }
    json_free(e);
}

/* The drain report counts only what the drain's own passes did; the client's background
 * replay starts with the lifecycle (at the drain) and may settle a record first, which the
 * report then omits. The events of every pass give the counts; the report must agree with
 * them where it does know. */
static void op_drain(const jv *q, reply *r) {
    uint64_t timeout;
    if (!need_u64(r, json_get(q, "timeout_ms"), "timeout_ms", &timeout)) return;
    cycles_client *c = client_of(q, r, 0);
    if (!c) return;
    tally t = { 0 };
    char *report = NULL;
    bool ok = TRY(cycles_client_set_event_callback(c, on_event, &t, &r->err)) &&
              TRY(cycles_client_drain(c, timeout, &report, &r->err));
    /* Closing delivers the queued events; freeing joins the event thread. */
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
    if (ok) {
        jv *d = json_parse(report);
        jv *remaining = json_get(d, "remaining"), *quarantined = json_get(d, "quarantined");
        if (!d || !remaining || !quarantined) failf(r, "an unexpected drain report: %s", report);
        else if (count_settled(json_get(d, "outcomes")) > t.n || quarantined->n > t.quarantined)
            failf(r, "the drain report and the events disagree: %s", report);
        else {
            char text[160];
            snprintf(text, sizeof text, "{\"settled\":%zu,\"pending\":%zu,\"quarantined\":%zu}", t.n, remaining->n,
                     t.quarantined);
            raw(&r->ok, text);
        }
        json_free(d);
    }
    cycles_string_free(report);
    for (size_t i = 0; i < t.n; i++) free(t.settled[i]);
    free(t.settled);
}

/* ---- the lifecycle contract ----------------------------------------------------------- */

/* The Cycles error of an action that ended without a known actual (the guarded call's
 * error), NULL for the others. */
static const char *end_error(cycles_outcome_kind k) {
    switch (k) {
    case CYCLES_OUTCOME_MISSING_ACTUAL: return "MISSING_ACTUAL";
    case CYCLES_OUTCOME_INVALID_ACTUAL: return "INVALID_ARGUMENT";
    case CYCLES_OUTCOME_HEARTBEAT_LAPSED: return "HEARTBEAT_LAPSED";
    default: return NULL;
    }
}

/* One guarded action (PROTOCOL.md, `guard`): a client with the tenant and the default unit,
 * a JSON spec of only the action and the bare estimate (key and subject when the case gives
 * them: the bridge fills the rest), the steps on the guard; `end` finishes with the work
 * succeeded, `fail` with it failed (C has no exception: the work's failure is "work"). */
static void op_guard(const jv *q, reply *r) {
    jv *cs = json_get(q, "case"), *steps = json_get(cs, "steps");
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL;
    const char *tenant = key ? need_str(r, q, "tenant") : NULL, *unit = tenant ? need_str(r, q, "default_unit") : NULL;
    const char *dir = unit ? need_str(r, q, "journal_dir") : NULL;
    if (!dir) return;
    if (!cs || cs->kind != J_OBJ || !steps || steps->kind != J_ARR) { failf(r, "case.steps must be a list", NULL); return; }
    int64_t estimate;
    if (!need_i64(r, json_get(cs, "estimate"), "case.estimate", &estimate)) return;
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    raw(&opts, ",\"default_unit\":");
    str(&opts, unit);
    char tail[64];
    snprintf(tail, sizeof tail, ",\"replay_interval_ms\":%d}", REPLAY_INTERVAL_MS);
    raw(&opts, tail);
    cycles_client *c = NULL;
    bool made = TRY(cycles_client_new(url, key, tenant, opts.b, &c, &r->err));
    free(opts.b);
    if (!made) return;
    sb spec = { 0 };
    snprintf(tail, sizeof tail, "%lld", (long long)estimate);
    raw(&spec, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"matrix\"},\"estimate\":");
    raw(&spec, tail);
    jv *k = json_get(cs, "idempotency_key"), *subject = json_get(cs, "subject");
    if (k && k->kind != J_NULL) member(&spec, "idempotency_key", k);
    if (subject && subject->kind != J_NULL) member(&spec, "subject", subject);
    raw(&spec, "}");
    cycles_guard *g = NULL;
    cycles_error *e = NULL;
    if (!TRY(cycles_guard_begin_json(c, spec.b, &g, &e))) {
        raw(&r->ok, "{\"decision\":null,\"caps\":null,\"steps\":[],\"outcome\":null,\"released\":null,"
                    "\"charged\":null,\"error\":");
        str(&r->ok, cycles_error_name(e));
        raw(&r->ok, "}");
        cycles_error_free(e);
        free(spec.b);
        cycles_client_free(c);
        return;
    }
    free(spec.b);
    jv *info = json_parse(cycles_guard_info_json(g));
    raw(&r->ok, "{\"decision\":");
    str(&r->ok, cycles_guard_decision(g));
    raw(&r->ok, ",\"caps\":");
    val(&r->ok, json_get(info, "caps"));
    json_free(info);
    raw(&r->ok, ",\"steps\":[");
    cycles_outcome o;
    char *json = NULL;
    bool ended = false, failed = false;
    for (size_t i = 0; i < steps->n && !ended && !r->fail && !r->err; i++) {
        const jv *st = steps->items[i];
        const char *what = sget(st, "do"), *reason = NULL;
        int64_t amount = 0;
        cycles_status status = CYCLES_OK;
        e = NULL;
        if (i) raw(&r->ok, ",");
        if (!what) { failf(r, "a step without do", NULL); break; }
        if (!strcmp(what, "add") || !strcmp(what, "set_actual")) {
            if (!need_i64(r, json_get(st, "amount"), "step.amount", &amount)) break;
            status = !strcmp(what, "add") ? cycles_guard_add(g, amount, &e) : cycles_guard_set_actual(g, amount, &e);
        } else if (!strcmp(what, "release")) {
            if (!opt_str(r, st, "reason", &reason)) break;
            status = cycles_guard_release(g, reason, &o, &json, &e);
            ended = status == CYCLES_OK;
        } else if (!strcmp(what, "end") || !strcmp(what, "fail")) {
            failed = !strcmp(what, "fail");
            /* The finish's own failure (not a step's answer) is the request's error. */
            if (!TRY(cycles_guard_finish(g, !failed, &o, &json, &r->err))) break;
            ended = true;
        } else {
            failf(r, "unknown step %s", what);
            break;
        }
        if (status == CYCLES_OK) raw(&r->ok, "null");
        else str(&r->ok, cycles_error_name(e));
        cycles_error_free(e);
    }
    if (!ended && !r->fail && !r->err) failf(r, "the case's steps never end the action", NULL);
    if (ended) {
        jv *out = json_parse(json);
        jv *released = json_get(out, "released");
        raw(&r->ok, "],\"outcome\":");
        str(&r->ok, cycles_outcome_kind_name(o.kind));
        raw(&r->ok, ",\"released\":");
        raw(&r->ok, released && released->kind == J_BOOL ? (o.released ? "true" : "false") : "null");
        raw(&r->ok, ",\"charged\":");
        if (o.has_charged) {
            snprintf(tail, sizeof tail, "%lld", (long long)o.charged);
            raw(&r->ok, tail);
        } else raw(&r->ok, "null");
        raw(&r->ok, ",\"error\":");
        str(&r->ok, failed ? "work" : end_error(o.kind));
        raw(&r->ok, "}");
        json_free(out);
    }
    cycles_string_free(json);
    cycles_guard_free(g);
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
}

/* The options table of the lifecycle contract (PROTOCOL.md, `client`): the options as C's
 * options JSON (the tenant as cycles_client_new's parameter), then one guarded action (bare
 * 5, actual 3) under the case's key; answers the Cycles error name raised, else null. */
static void op_client(const jv *q, reply *r) {
    const jv *options = json_get(q, "options");
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL;
    const char *dir = key ? need_str(r, q, "journal_dir") : NULL;
    const char *ikey = dir ? need_str(r, q, "key") : NULL;
    if (!ikey) return;
    if (!options || options->kind != J_OBJ) { failf(r, "options must be an object", NULL); return; }
    const char *tenant = NULL;
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    for (size_t i = 0; i < options->n; i++) {
        if (!strcmp(options->keys[i], "tenant")) tenant = options->items[i]->text;
        else member(&opts, options->keys[i], options->items[i]);
    }
    raw(&opts, "}");
    cycles_client *c = NULL;
    cycles_error *e = NULL, *finish_err = NULL;
    if (cycles_client_new(url, key, tenant, opts.b, &c, &e) == CYCLES_OK) {
        sb spec = { 0 };
        raw(&spec, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"matrix\"},\"estimate\":5,"
                   "\"idempotency_key\":");
        str(&spec, ikey);
        raw(&spec, "}");
        cycles_guard *g = NULL;
        if (cycles_guard_begin_json(c, spec.b, &g, &e) == CYCLES_OK) {
            cycles_outcome o;
            char *json = NULL;
            cycles_guard_set_actual(g, 3, &e);
            /* Always finished, so nothing is left held; a set_actual failure is the answer. */
            cycles_guard_finish(g, true, &o, &json, e ? &finish_err : &e);
            cycles_string_free(json);
            cycles_guard_free(g);
        }
        free(spec.b);
        cycles_client_close(c, 0, NULL, NULL);
        cycles_client_free(c);
    }
    raw(&r->ok, "{\"error\":");
    if (e) str(&r->ok, cycles_error_name(e));
    else raw(&r->ok, "null");
    raw(&r->ok, "}");
    cycles_error_free(e);
    cycles_error_free(finish_err);
    free(opts.b);
}

/* The crash loop's `work` (PROTOCOL.md): every action in order through one client of the
 * tenant, default unit and journal, each a guard under its key, bare estimate and TTL (the
 * default when null) whose work sleeps `sleep_ms`, sets the actual and finishes; answers each
 * outcome. The crash loop SIGKILLs the process mid-way. */
static void op_work(const jv *q, reply *r) {
    const jv *actions = json_get(q, "actions");
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL;
    const char *tenant = key ? need_str(r, q, "tenant") : NULL, *unit = tenant ? need_str(r, q, "default_unit") : NULL;
    const char *dir = unit ? need_str(r, q, "journal_dir") : NULL;
    if (!dir) return;
    if (!actions || actions->kind != J_ARR) { failf(r, "actions must be a list", NULL); return; }
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    raw(&opts, ",\"default_unit\":");
    str(&opts, unit);
    if (!journal_url(r, q, &opts)) {
        free(opts.b);
        return;
    }
    raw(&opts, "}");
    cycles_client *c = NULL;
    bool made = TRY(cycles_client_new(url, key, tenant, opts.b, &c, &r->err));
    free(opts.b);
    if (!made) return;
    sb outcomes = { 0 };
    raw(&outcomes, "[");
    for (size_t i = 0; i < actions->n && !r->fail && !r->err; i++) {
        const jv *a = actions->items[i], *ttl = json_get(a, "ttl_ms");
        const char *ikey = need_str(r, a, "key");
        int64_t estimate, actual, sleep_ms;
        if (!ikey || !need_i64(r, json_get(a, "estimate"), "estimate", &estimate) ||
            !need_i64(r, json_get(a, "actual"), "actual", &actual) ||
            !need_i64(r, json_get(a, "sleep_ms"), "sleep_ms", &sleep_ms))
            break;
        sb spec = { 0 };
        char num[32];
        snprintf(num, sizeof num, "%lld", (long long)estimate);
        raw(&spec, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"crashloop\"},\"estimate\":");
        raw(&spec, num);
        raw(&spec, ",\"idempotency_key\":");
        str(&spec, ikey);
        if (ttl && ttl->kind != J_NULL) member(&spec, "ttl_ms", ttl);
        raw(&spec, "}");
        cycles_guard *g = NULL;
        bool begun = TRY(cycles_guard_begin_json(c, spec.b, &g, &r->err));
        free(spec.b);
        if (!begun) break;
        struct timespec ts = { .tv_sec = sleep_ms / 1000, .tv_nsec = (sleep_ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        cycles_outcome o;
        char *json = NULL;
        if (TRY(cycles_guard_set_actual(g, actual, &r->err)) && TRY(cycles_guard_finish(g, true, &o, &json, &r->err))) {
            if (i) raw(&outcomes, ",");
            str(&outcomes, cycles_outcome_kind_name(o.kind));
        }
        cycles_string_free(json);
        cycles_guard_free(g);
    }
    raw(&outcomes, "]");
    if (!r->fail && !r->err) {
        raw(&r->ok, "{\"outcomes\":");
        raw(&r->ok, outcomes.b);
        raw(&r->ok, "}");
    }
    free(outcomes.b);
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
}

/* ---- load: many guarded actions at once ------------------------------------------------ */

/* The load run's shared tally: outcome names (static strings from the library, or an
 * "error:" copy) with their counts, and how many actions are still running. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t done;
    size_t running;
    struct { char name[64]; size_t n; } seen[32];
    size_t nseen;
} load_tally;

typedef struct {
    load_tally *t;
    char key[128];
} load_call;

static void load_count(load_call *call, const char *prefix, const char *name) {
    load_tally *t = call->t;
    char full[64];
    snprintf(full, sizeof full, "%s%s", prefix, name ? name : "?");
    pthread_mutex_lock(&t->mu);
    size_t i = 0;
    while (i < t->nseen && strcmp(t->seen[i].name, full)) i++;
    if (i == t->nseen && i < sizeof t->seen / sizeof *t->seen) {
        snprintf(t->seen[i].name, sizeof t->seen[i].name, "%s", full);
        t->nseen++;
    }
    if (i < t->nseen) t->seen[i].n++;
    if (--t->running == 0) pthread_cond_signal(&t->done);
    pthread_mutex_unlock(&t->mu);
    free(call);
}

static void load_finished(void *user_data, cycles_status status, const cycles_outcome *o, const char *json,
                          size_t len, const cycles_error *err) {
    (void)json, (void)len;
    if (status == CYCLES_OK) load_count(user_data, "", cycles_settlement_status_name(o->settlement));
    else load_count(user_data, "error:", cycles_error_name(err));
}

/* The work of each action: the actual, then the settlement without blocking. */
static void load_began(void *user_data, cycles_status status, cycles_guard *g, const cycles_error *err) {
    load_call *call = user_data;
    if (status != CYCLES_OK) {
        /* The first few in full on stderr: the count alone does not say why. */
        static int shown;
        if (__atomic_fetch_add(&shown, 1, __ATOMIC_RELAXED) < 3) fprintf(stderr, "face-c: load %s: %s\n", call->key, cycles_error_json(err));
        load_count(call, "error:", cycles_error_name(err));
        return;
    }
    cycles_error *e = NULL;
    /* Finished even when the actual is refused: the reservation is then released, and the
     * outcome (no settlement) is what gets counted. */
    if (cycles_guard_set_actual(g, 3, &e) != CYCLES_OK) {
        cycles_error_free(e);
        e = NULL;
    }
    if (cycles_guard_finish_async(g, true, load_finished, call, &e) != CYCLES_OK) load_count(call, "error:", cycles_error_name(e));
    cycles_guard_free(g);
    cycles_error_free(e);
}

/* The load run (PROTOCOL.md, `load`): `count` guarded actions at once on one client through
 * the non-blocking guard API (C's idiom for many concurrent calls without a thread each:
 * completions arrive on the library's completion thread), each under its own key, counted by
 * outcome; the client is closed without a drain, so what could not settle stays journaled. */
static void op_load(const jv *q, reply *r) {
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL;
    const char *tenant = key ? need_str(r, q, "tenant") : NULL, *unit = tenant ? need_str(r, q, "default_unit") : NULL;
    const char *dir = unit ? need_str(r, q, "journal_dir") : NULL, *prefix = dir ? need_str(r, q, "key_prefix") : NULL;
    uint64_t count;
    if (!prefix || !need_u64(r, json_get(q, "count"), "count", &count)) return;
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    raw(&opts, ",\"default_unit\":");
    str(&opts, unit);
    char tail[64];
    snprintf(tail, sizeof tail, ",\"replay_interval_ms\":%d}", REPLAY_INTERVAL_MS);
    raw(&opts, tail);
    cycles_client *c = NULL;
    bool made = TRY(cycles_client_new(url, key, tenant, opts.b, &c, &r->err));
    free(opts.b);
    if (!made) return;
    load_tally t = { .running = count };
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.done, NULL);
    for (uint64_t i = 0; i < count; i++) {
        load_call *call = calloc(1, sizeof *call);
        if (!call) {
            failf(r, "out of memory", NULL);
            pthread_mutex_lock(&t.mu);
            t.running -= count - i; /* the actions never started */
            pthread_mutex_unlock(&t.mu);
            break;
        }
        call->t = &t;
        snprintf(call->key, sizeof call->key, "%s-%llu", prefix, (unsigned long long)i);
        cycles_reserve spec = { .idempotency_key = call->key, .action_kind = "llm.completion",
                                .action_name = "load", .estimate = 5 };
        cycles_error *e = NULL;
        if (cycles_guard_begin_async(c, &spec, load_began, call, &e) != CYCLES_OK) load_count(call, "error:", cycles_error_name(e));
        cycles_error_free(e);
    }
    pthread_mutex_lock(&t.mu);
    while (t.running) pthread_cond_wait(&t.done, &t.mu);
    pthread_mutex_unlock(&t.mu);
    if (!r->fail) {
        raw(&r->ok, "{\"outcomes\":{");
        for (size_t i = 0; i < t.nseen; i++) {
            if (i) raw(&r->ok, ",");
            str(&r->ok, t.seen[i].name);
            snprintf(tail, sizeof tail, ":%zu", t.seen[i].n);
            raw(&r->ok, tail);
        }
        raw(&r->ok, "}}");
    }
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
    pthread_cond_destroy(&t.done);
    pthread_mutex_destroy(&t.mu);
}

/* ---- journal_fail: a journal that cannot be written ------------------------------------ */

/* Every event of the client, as JSON text; read after cycles_client_free joined the thread. */
typedef struct {
    char **items;
    size_t n;
} event_log;

static void log_event(void *user_data, const char *event_json, size_t len) {
    event_log *l = user_data;
    l->items = realloc(l->items, (l->n + 1) * sizeof *l->items);
    char *copy = malloc(len + 1);
    memcpy(copy, event_json, len);
    copy[len] = 0;
    l->items[l->n++] = copy;
}

/* The value of `v` as JSON, `null` when absent. */
static void or_null(sb *s, const jv *v) { val(s, v ? v : &(jv){ .kind = J_NULL }); }

/* One guarded action (bare 5, actual 3, the case's key) whose first commit fails on a journal
 * that cannot be written, then cycles_client_flush (PROTOCOL.md, `journal_fail`): the
 * settlement's members, the flush's unjournaled count and this reservation's events. */
static void op_journal_fail(const jv *q, reply *r) {
    const char *url = need_str(r, q, "url"), *key = url ? need_str(r, q, "api_key") : NULL;
    const char *tenant = key ? need_str(r, q, "tenant") : NULL, *unit = tenant ? need_str(r, q, "default_unit") : NULL;
    const char *dir = unit ? need_str(r, q, "journal_dir") : NULL, *ikey = dir ? need_str(r, q, "key") : NULL;
    if (!ikey) return;
    sb opts = { 0 };
    raw(&opts, "{\"journal_dir\":");
    str(&opts, dir);
    raw(&opts, ",\"default_unit\":");
    str(&opts, unit);
    char tail[96];
    snprintf(tail, sizeof tail, ",\"settle_max_attempts\":1,\"replay_interval_ms\":%d}", REPLAY_INTERVAL_MS);
    raw(&opts, tail);
    cycles_client *c = NULL;
    bool made = TRY(cycles_client_new(url, key, tenant, opts.b, &c, &r->err));
    free(opts.b);
    if (!made) return;
    event_log events = { 0 };
    sb spec = { 0 };
    raw(&spec, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"matrix\"},\"estimate\":5,\"idempotency_key\":");
    str(&spec, ikey);
    raw(&spec, "}");
    cycles_guard *g = NULL;
    char *outcome = NULL, *report = NULL, *rid = NULL;
    bool ok = TRY(cycles_client_set_event_callback(c, log_event, &events, &r->err)) &&
              TRY(cycles_guard_begin_json(c, spec.b, &g, &r->err)) && TRY(cycles_guard_set_actual(g, 3, &r->err)) &&
              TRY(cycles_guard_finish(g, true, NULL, &outcome, &r->err)) &&
              TRY(cycles_client_flush(c, &report, &r->err));
    if (g) {
        const char *id = cycles_guard_reservation_id(g);
        rid = malloc(strlen(id) + 1);
        strcpy(rid, id);
    }
    free(spec.b);
    cycles_guard_free(g);
    /* Closing delivers the queued events; freeing joins the event thread. */
    cycles_client_close(c, 0, NULL, NULL);
    cycles_client_free(c);
    if (ok) {
        jv *o = json_parse(outcome), *d = json_parse(report);
        jv *st = json_get(o, "settlement"), *unjournaled = json_get(d, "unjournaled");
        if (!st || st->kind != J_OBJ || !unjournaled || unjournaled->kind != J_ARR)
            failf(r, "an unexpected outcome or flush report: %s", outcome);
        else {
            raw(&r->ok, "{\"status\":");
            or_null(&r->ok, json_get(st, "status"));
            raw(&r->ok, ",\"journaled\":");
            or_null(&r->ok, json_get(st, "journaled"));
            raw(&r->ok, ",\"journal_error\":");
            or_null(&r->ok, json_get(st, "journal_error"));
            snprintf(tail, sizeof tail, ",\"flush_unjournaled\":%zu,\"events\":[", unjournaled->n);
            raw(&r->ok, tail);
            bool first = true;
            for (size_t i = 0; i < events.n; i++) {
                jv *e = json_parse(events.items[i]);
                const char *kind = sget(e, "kind"), *erid = sget(e, "reservation_id");
                if (kind && erid && !strcmp(erid, rid) &&
                    (!strcmp(kind, "journal_io_failed") || !strcmp(kind, "settlement_pending") ||
                     !strcmp(kind, "settlement_settled"))) {
                    raw(&r->ok, first ? "{\"kind\":" : ",{\"kind\":");
                    first = false;
                    str(&r->ok, kind);
                    raw(&r->ok, ",\"level\":");
                    or_null(&r->ok, json_get(e, "level"));
                    raw(&r->ok, ",\"operation\":");
                    or_null(&r->ok, json_get(e, "operation"));
                    raw(&r->ok, ",\"journaled\":");
                    or_null(&r->ok, json_get(e, "journaled"));
                    raw(&r->ok, "}");
                }
                json_free(e);
            }
            raw(&r->ok, "]}");
        }
        json_free(o);
        json_free(d);
    }
    for (size_t i = 0; i < events.n; i++) free(events.items[i]);
    free(events.items);
    free(rid);
    cycles_string_free(outcome);
    cycles_string_free(report);
}

/* ---- the loop -------------------------------------------------------------------------- */

static const struct {
    const char *name;
    void (*run)(const jv *, reply *);
} OPS[] = {
    { "timing", op_timing },           { "primary", op_primary },         { "fallback", op_fallback },
    { "journal_names", op_journal_names }, { "fingerprint", op_fingerprint }, { "parse_record", op_parse_record },
    { "decode", op_decode },           { "write", op_write },             { "drain", op_drain },
    { "guard", op_guard },             { "client", op_client },           { "pricing", op_pricing },
    { "work", op_work },
    { "journal_fail", op_journal_fail },
    { "load", op_load },
};

static void answer(const char *line) {
    jv *q = json_parse(line);
    jv *id = json_get(q, "id");
    const char *op = sget(q, "op");
    reply r = { 0 };
    if (!q || q->kind != J_OBJ) failf(&r, "the request is not a JSON object", NULL);
    else if (!op) failf(&r, "the request has no op", NULL);
    else {
        size_t i = 0;
        while (i < sizeof OPS / sizeof *OPS && strcmp(OPS[i].name, op)) i++;
        if (i == sizeof OPS / sizeof *OPS) failf(&r, "unknown op %s", op);
        else OPS[i].run(q, &r);
    }
    sb out = { 0 };
    raw(&out, "{\"id\":");
    val(&out, id ? id : &(jv){ .kind = J_NULL });
    if (r.err) {
        /* A failing call may have built part of an ok value: the error wins. */
        raw(&out, ",\"error\":");
        str(&out, cycles_error_name(r.err));
        fprintf(stderr, "face-c: %s: %s\n", op ? op : "?", cycles_error_json(r.err));
    } else if (r.fail || !r.ok.b) {
        raw(&out, ",\"fail\":");
        str(&out, r.fail ? r.fail : "no result");
    } else {
        raw(&out, ",\"ok\":");
        raw(&out, r.ok.b);
    }
    raw(&out, "}\n");
    fwrite(out.b, 1, out.n, stdout);
    fflush(stdout);
    free(out.b);
    free(r.ok.b);
    free(r.fail);
    cycles_error_free(r.err);
    json_free(q);
}

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        answer(line);
    }
    free(line);
    /* Last call of a C host: core's runtime threads end before the process does. */
    cycles_shutdown(1000, NULL, NULL);
    return 0;
}
