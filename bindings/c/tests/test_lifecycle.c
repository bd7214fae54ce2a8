/* The C API against the local server over real HTTP: a guarded lifecycle (reserve, heartbeat
 * on a short lease, streaming usage, commit; the ledger shows the actual; failed work commits
 * the usage it reported, or releases without any; the outcome's names equal its JSON's), a
 * server with a small budget denying what it cannot cover, every operation
 * through cycles_client_call, error kinds with their fields (a denial's evidence reference
 * among them), events reaching the callback, a blocking call from inside the callback
 * refused with CYCLES_RUNTIME, misuse (NULLs, double finish, closed client), a panic as
 * CYCLES_INTERNAL, and cycles_shutdown ending everything. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "json.h"

static cycles_error *ERR;

#define STATUS_IS(want, call)                                                             \
    do {                                                                                  \
        cycles_error *e_ = NULL;                                                          \
        cycles_status s_ = (call);                                                        \
        (void)e_;                                                                         \
        CHECK(s_ == (want), "%s -> %d, want %d", #call, (int)s_, (int)(want));           \
    } while (0)

typedef struct {
    atomic_int events;
    atomic_int settled;
    atomic_int refused;
    cycles_client *client;
} seen_t;

static void on_event(void *user, const char *json, size_t len) {
    seen_t *seen = user;
    CHECK(strlen(json) == len, "len");
    atomic_fetch_add(&seen->events, 1);
    if (strstr(json, "\"kind\":\"settlement_settled\"")) {
        atomic_fetch_add(&seen->settled, 1);
        /* A blocking call from inside the callback is refused, not a deadlock. */
        char *out = NULL;
        cycles_error *err = NULL;
        cycles_status st = cycles_client_call(seen->client, "get_evidence_jwks", "{}", &out, &err);
        if (st == CYCLES_RUNTIME && out == NULL && err != NULL) atomic_fetch_add(&seen->refused, 1);
        cycles_error_free(err);
    }
}

static char *call(cycles_client *c, const char *op, const char *args) {
    char *out = NULL;
    OK(cycles_client_call(c, op, args, &out, &ERR));
    CHECK(out && strstr(out, "\"body\":"), "%s: %s", op, out);
    return out;
}

/* The reservation id in a create_reservation reply (test-side string search). */
static void reservation_id(const char *reply, char *id, size_t n) {
    const char *p = strstr(reply, "\"reservation_id\":\"");
    CHECK(p != NULL, "no reservation id in %s", reply);
    p += strlen("\"reservation_id\":\"");
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < n) { id[i] = p[i]; i++; }
    id[i] = 0;
}

static void operations(cycles_client *c) {
    int ops = 0;
    char *r = call(c, "create_reservation",
                   "{\"idempotency_key\":\"c-op-1\",\"subject\":{\"tenant\":\"acme\"},"
                   "\"action\":{\"kind\":\"llm.completion\",\"name\":\"gpt\"},"
                   "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":500},\"ttl_ms\":60000}"); ops++;
    char id[128], args[512];
    reservation_id(r, id, sizeof id);
    CHECK(strstr(r, "\"status\":200") && strstr(r, "\"decision\":\"ALLOW\""), "%s", r);
    cycles_string_free(r);
    snprintf(args, sizeof args, "{\"reservation_id\":\"%s\",\"request\":{\"idempotency_key\":\"c-op-ext\",\"extend_by_ms\":1000}}", id);
    cycles_string_free(call(c, "extend_reservation", args)); ops++;
    snprintf(args, sizeof args, "{\"reservation_id\":\"%s\"}", id);
    cycles_string_free(call(c, "get_reservation", args)); ops++;
    snprintf(args, sizeof args, "{\"reservation_id\":\"%s\",\"request\":{\"idempotency_key\":\"c-op-commit\",\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":321}}}", id);
    r = call(c, "commit_reservation", args); ops++;
    CHECK(strstr(r, "\"amount\":321"), "%s", r);
    cycles_string_free(r);
    r = call(c, "create_reservation",
             "{\"idempotency_key\":\"c-op-2\",\"subject\":{\"tenant\":\"acme\"},"
             "\"action\":{\"kind\":\"llm.completion\",\"name\":\"gpt\"},"
             "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":50}}");
    reservation_id(r, id, sizeof id);
    cycles_string_free(r);
    snprintf(args, sizeof args, "{\"reservation_id\":\"%s\",\"request\":{\"idempotency_key\":\"c-op-rel\"}}", id);
    cycles_string_free(call(c, "release_reservation", args)); ops++;
    cycles_string_free(call(c, "decide",
                            "{\"idempotency_key\":\"c-op-d\",\"subject\":{\"tenant\":\"acme\"},"
                            "\"action\":{\"kind\":\"llm.completion\",\"name\":\"gpt\"},"
                            "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":5}}")); ops++;
    r = call(c, "create_event",
             "{\"idempotency_key\":\"c-op-ev\",\"subject\":{\"tenant\":\"acme\"},"
             "\"action\":{\"kind\":\"llm.completion\",\"name\":\"gpt\"},"
             "\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":7}}"); ops++;
    CHECK(strstr(r, "\"status\":201"), "%s", r);
    cycles_string_free(r);
    cycles_string_free(call(c, "get_balances", "{\"tenant\":\"acme\"}")); ops++;
    cycles_string_free(call(c, "list_reservations", "{\"tenant\":\"acme\",\"limit\":2}")); ops++;
    r = call(c, "list_reservations_all", "{\"tenant\":\"acme\"}"); ops++;
    CHECK(strstr(r, "c-op-1"), "%s", r);
    cycles_string_free(r);
    cycles_string_free(call(c, "get_evidence_jwks", "{}")); ops++;

    /* get_evidence of a malformed id: the server's 400 INVALID_REQUEST. */
    char *out = NULL;
    cycles_error *err = NULL;
    cycles_status st = cycles_client_call(c, "get_evidence", "{\"evidence_id\":\"ev_missing\"}", &out, &err); ops++;
    CHECK(st == CYCLES_INVALID_REQUEST && out == NULL && cycles_error_http_status(err) == 400, "get_evidence -> %d", (int)st);
    cycles_error_free(err);
    /* An unknown reservation: NOT_FOUND with its fields. */
    st = cycles_client_call(c, "get_reservation", "{\"reservation_id\":\"rsv_missing\"}", &out, &err);
    CHECK(st == CYCLES_NOT_FOUND && out == NULL, "get_reservation -> %d", (int)st);
    CHECK(cycles_error_code(err) == 103 && !strcmp(cycles_error_name(err), "NOT_FOUND"), "%s", cycles_error_json(err));
    CHECK(cycles_error_http_status(err) == 404 && cycles_error_status(err) == CYCLES_NOT_FOUND, "%s", cycles_error_json(err));
    CHECK(!cycles_error_retryable(err) && cycles_error_message(err)[0], "%s", cycles_error_json(err));
    CHECK(cycles_error_evidence_id(err) == NULL && cycles_error_evidence_url(err) == NULL, "%s", cycles_error_json(err));
    cycles_error_free(err);
    CHECK(ops == 12, "every operation: %d", ops);

    /* A budget denial: BUDGET_EXCEEDED with the server's code and request id. */
    st = cycles_client_call(c, "create_reservation",
                            "{\"idempotency_key\":\"c-op-big\",\"subject\":{\"tenant\":\"acme\"},"
                            "\"action\":{\"kind\":\"llm.completion\",\"name\":\"gpt\"},"
                            "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":900000000000}}", &out, &err);
    CHECK(st == CYCLES_BUDGET_EXCEEDED, "-> %d %s", (int)st, err ? cycles_error_json(err) : "");
    CHECK(!strcmp(cycles_error_server_code(err), "BUDGET_EXCEEDED") && cycles_error_http_status(err) == 409, "%s", cycles_error_json(err));
    CHECK(cycles_error_request_id(err) != NULL, "request id: %s", cycles_error_json(err));
    /* ... and the server's evidence reference: a 64-hex id, a URL that names it, and the
     * signed envelope of the denial served under that id. */
    const char *ev_id = cycles_error_evidence_id(err), *ev_url = cycles_error_evidence_url(err);
    CHECK(ev_id != NULL && strlen(ev_id) == 64 && strspn(ev_id, "0123456789abcdef") == 64, "evidence id: %s", cycles_error_json(err));
    size_t url_len = ev_url ? strlen(ev_url) : 0;
    CHECK(url_len > 65 && ev_url[url_len - 65] == '/' && !strcmp(ev_url + url_len - 64, ev_id), "evidence url: %s", cycles_error_json(err));
    char denial_id[65];
    snprintf(denial_id, sizeof denial_id, "%s", ev_id);
    cycles_error_free(err);
    snprintf(args, sizeof args, "{\"evidence_id\":\"%s\"}", denial_id);
    r = call(c, "get_evidence", args);
    CHECK(strstr(r, "\"artifact_type\":\"error\"") && strstr(r, denial_id), "%s", r);
    cycles_string_free(r);
    /* An error without evidence: both accessors NULL (an unknown evidence id, and the
     * unknown reservation above). */
    st = cycles_client_call(c, "get_evidence", "{\"evidence_id\":\"0000000000000000000000000000000000000000000000000000000000000000\"}", &out, &err);
    CHECK(st == CYCLES_NOT_FOUND && cycles_error_http_status(err) == 404, "get_evidence -> %d", (int)st);
    CHECK(cycles_error_evidence_id(err) == NULL && cycles_error_evidence_url(err) == NULL, "%s", cycles_error_json(err));
    cycles_error_free(err);
    /* Argument errors name the field. */
    st = cycles_client_call(c, "get_reservation", "{}", &out, &err);
    CHECK(st == CYCLES_INVALID_ARGUMENT && strstr(cycles_error_message(err), "reservation_id"), "%s", cycles_error_json(err));
    cycles_error_free(err);
    st = cycles_client_call(c, "nope", "{}", &out, &err);
    CHECK(st == CYCLES_INVALID_ARGUMENT && strstr(cycles_error_message(err), "unknown operation"), "%s", cycles_error_json(err));
    cycles_error_free(err);
}

static void misuse(cycles_client *c) {
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_client_call(NULL, "decide", "{}", NULL, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_client_call(c, NULL, "{}", NULL, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_client_call(c, "decide", NULL, NULL, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_client_new(NULL, "k", NULL, NULL, NULL, NULL));
    /* A settle override of 0 fails where the client is built, not at the first guarded call:
     * core's rule (CONFIG, as in Rust); a value that is no count at all is the bridge's. */
    cycles_client *zero = NULL;
    cycles_error *zerr = NULL;
    CHECK(cycles_client_new("http://127.0.0.1:1", "k", NULL, "{\"settle_max_attempts\":0}", &zero, &zerr)
              == CYCLES_CONFIG && zero == NULL, "settle_max_attempts 0");
    CHECK(strstr(cycles_error_message(zerr), "settle max_attempts must be at least 1"), "%s", cycles_error_message(zerr));
    cycles_error_free(zerr);
    zerr = NULL;
    CHECK(cycles_client_new("http://127.0.0.1:1", "k", NULL, "{\"settle_max_attempts\":-1}", &zero, &zerr)
              == CYCLES_INVALID_ARGUMENT && zero == NULL, "settle_max_attempts -1");
    CHECK(strstr(cycles_error_message(zerr), "settle_max_attempts must be an integer from 0 to 4294967295, not -1"), "%s", cycles_error_message(zerr));
    cycles_error_free(zerr);
    zerr = NULL;
    CHECK(cycles_client_new("http://127.0.0.1:1", "k", NULL, "{\"replay_interval_ms\":0}", &zero, &zerr)
              == CYCLES_CONFIG, "replay_interval_ms 0");
    cycles_error_free(zerr);
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_guard_begin(c, NULL, NULL, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_guard_set_actual(NULL, 1, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_guard_finish(NULL, true, NULL, NULL, NULL));
    STATUS_IS(CYCLES_INVALID_ARGUMENT, cycles_timing_call("schedule", NULL, NULL, NULL));
    CHECK(cycles_error_name(NULL) == NULL && cycles_error_code(NULL) == 0, "NULL error accessors");
    CHECK(cycles_error_evidence_id(NULL) == NULL && cycles_error_evidence_url(NULL) == NULL, "NULL evidence accessors");
    CHECK(cycles_guard_reservation_id(NULL) == NULL && !cycles_client_is_closed(NULL), "NULL accessors");
    cycles_client_free(NULL);
    cycles_guard_free(NULL);
    cycles_error_free(NULL);
    cycles_string_free(NULL);
    cycles_local_server_free(NULL);
    /* A missing subject without a client tenant, and a bad metadata text. */
    cycles_reserve r = { 0 };
    r.action_kind = "llm.completion";
    r.action_name = "gpt";
    r.subject.tenant = "acme";
    r.metadata_json = "{not json";
    cycles_guard *g = NULL;
    cycles_error *err = NULL;
    CHECK(cycles_guard_begin(c, &r, &g, &err) == CYCLES_INVALID_ARGUMENT && g == NULL, "bad metadata");
    CHECK(strstr(cycles_error_message(err), "metadata_json"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    /* Panics become CYCLES_INTERNAL, in the export and on the runtime. */
    for (int on_runtime = 0; on_runtime < 2; on_runtime++) {
        CHECK(cycles_debug_panic(on_runtime, &err) == CYCLES_INTERNAL, "panic %d", on_runtime);
        CHECK(cycles_error_code(err) == 4 && strstr(cycles_error_message(err), "deliberate test panic"), "%s", cycles_error_message(err));
        cycles_error_free(err);
    }
}

/* The name functions: every value's name, NULL out of range. */
static void names(void) {
    static const struct { cycles_outcome_kind k; const char *name; } kinds[] = {
        { CYCLES_OUTCOME_SETTLED, "settled" },
        { CYCLES_OUTCOME_WORK_FAILED, "work_failed" },
        { CYCLES_OUTCOME_MISSING_ACTUAL, "missing_actual" },
        { CYCLES_OUTCOME_INVALID_ACTUAL, "invalid_actual" },
        { CYCLES_OUTCOME_HEARTBEAT_LAPSED, "heartbeat_lapsed" },
        { CYCLES_OUTCOME_RELEASED, "released" },
    };
    static const struct { cycles_settlement_status s; const char *name; } statuses[] = {
        { CYCLES_SETTLEMENT_NONE, "none" },
        { CYCLES_SETTLEMENT_COMMITTED, "committed" },
        { CYCLES_SETTLEMENT_RECOVERED_VIA_EVENT, "recovered_via_event" },
        { CYCLES_SETTLEMENT_PENDING, "pending" },
        { CYCLES_SETTLEMENT_REJECTED, "rejected" },
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        const char *n = cycles_outcome_kind_name(kinds[i].k);
        CHECK(n && !strcmp(n, kinds[i].name), "kind %d: %s", (int)kinds[i].k, n ? n : "NULL");
        CHECK(n == cycles_outcome_kind_name(kinds[i].k), "a static string");
    }
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        const char *n = cycles_settlement_status_name(statuses[i].s);
        CHECK(n && !strcmp(n, statuses[i].name), "status %d: %s", (int)statuses[i].s, n ? n : "NULL");
    }
    CHECK(cycles_outcome_kind_name((cycles_outcome_kind)6) == NULL, "out of range kind");
    CHECK(cycles_outcome_kind_name((cycles_outcome_kind)-1) == NULL, "negative kind");
    CHECK(cycles_settlement_status_name((cycles_settlement_status)5) == NULL, "out of range status");
    CHECK(cycles_settlement_status_name((cycles_settlement_status)1000) == NULL, "far out of range status");
}

/* The outcome's names are the JSON's: "outcome" is the kind's, settlement.status the status's. */
static void outcome_names_match(const cycles_outcome *o, const char *json) {
    char want[96];
    snprintf(want, sizeof want, "\"outcome\":\"%s\"", cycles_outcome_kind_name(o->kind));
    CHECK(strstr(json, want), "%s in %s", want, json);
    if (o->settlement == CYCLES_SETTLEMENT_NONE) {
        CHECK(!strcmp(cycles_settlement_status_name(o->settlement), "none"), "none");
        CHECK(!strstr(json, "\"settlement\":{"), "no settlement in %s", json);
    } else {
        snprintf(want, sizeof want, "\"settlement\":{\"status\":\"%s\"", cycles_settlement_status_name(o->settlement));
        CHECK(strstr(json, want), "%s in %s", want, json);
    }
}

/* docs/c.md's small budget: a server whose tenant:acme budget is 1000 takes one 600 estimate,
 * not a second. */
static void small_budget(void) {
    cycles_local_server *s = NULL;
    OK(cycles_local_server_start(
        "{\"budgets\":[{\"scope\":\"tenant:acme\",\"unit\":\"USD_MICROCENTS\",\"allocated\":1000}]}", &s, &ERR));
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(s), cycles_local_server_api_key(s), "acme",
                         "{\"journal_enabled\":false}", &c, &ERR));
    cycles_reserve r = { 0 };
    r.action_kind = "llm.completion";
    r.action_name = "openai:gpt-4o-mini";
    r.estimate = 600;
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_set_actual(g, 600, &ERR));
    cycles_outcome o;
    OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
    CHECK(o.settlement == CYCLES_SETTLEMENT_COMMITTED && o.charged == 600, "first 600");
    cycles_guard_free(g);
    g = NULL;
    cycles_error *err = NULL;
    CHECK(cycles_guard_begin(c, &r, &g, &err) == CYCLES_BUDGET_EXCEEDED && g == NULL, "second 600");
    CHECK(cycles_error_http_status(err) == 409, "%s", cycles_error_json(err));
    cycles_error_free(err);
    cycles_client_free(c);
    OK(cycles_local_server_stop(s, &ERR));
    cycles_local_server_free(s);
}

static const char *lstr(const jv *obj, const char *key) {
    jv *v = json_get(obj, key);
    return v && v->kind == J_STR ? v->text : "-";
}

/* The ledger's entries as "kind key unit amount" lines, for exact checks. */
static char *ledger_lines(cycles_local_server *s) {
    char *ledger = NULL;
    OK(cycles_local_server_ledger(s, &ledger, &ERR));
    jv *v = json_parse(ledger);
    CHECK(v != NULL, "%s", ledger);
    cycles_string_free(ledger);
    size_t cap = 64 + v->n * 256, at = 0;
    char *out = calloc(1, cap);
    for (size_t i = 0; i < v->n; i++) {
        jv *e = v->items[i], *a = json_get(e, "amount"), *u = json_get(e, "unit");
        at += (size_t)snprintf(out + at, cap - at, "%s %s %s %s\n", lstr(e, "kind"), lstr(e, "idempotency_key"),
                               u && u->kind == J_STR ? u->text : "-", a && a->kind == J_NUM ? a->text : "-");
    }
    json_free(v);
    return out;
}

/* Issue 28's contract through the C API: decision and caps, cycles_guard_release (and its
 * refusal while usage is known), the client's default unit and the bridge's spec defaults,
 * unknown option keys and spec members named, keys a header cannot carry; on the ledger. */
static void contract(void) {
    cycles_local_server *s = NULL;
    cycles_error *err = NULL;
    /* The server's config rejects unknown keys. */
    CHECK(cycles_local_server_start("{\"budget\":[]}", &s, &err) == CYCLES_INVALID_ARGUMENT && s == NULL, "unknown key");
    CHECK(strstr(cycles_error_message(err), "budget"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    OK(cycles_local_server_start(
        "{\"budgets\":[{\"scope\":\"tenant:acme\",\"unit\":\"TOKENS\",\"allocated\":100000},"
        "{\"scope\":\"tenant:acme/workspace:capped\",\"unit\":\"TOKENS\",\"allocated\":100000,"
        "\"caps\":{\"max_tokens\":64,\"tool_denylist\":[\"shell\"]}}]}", &s, &ERR));
    /* A fault rule's unknown key (a misspelt "times") is named too, with where it is. */
    CHECK(cycles_local_server_add_fault(s, "{\"operation\":\"commitReservation\",\"time\":1,"
          "\"fault\":{\"kind\":\"connection_reset\"}}", &err) == CYCLES_INVALID_ARGUMENT, "unknown fault key");
    CHECK(strstr(cycles_error_message(err), "invalid fault rule: unknown field `time`"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    CHECK(cycles_local_server_add_fault(s, "{\"operation\":\"commitReservation\","
          "\"fault\":{\"kind\":\"connection_reset\",\"ms\":5}}", &err) == CYCLES_INVALID_ARGUMENT, "unit kind key");
    CHECK(strstr(cycles_error_message(err), "fault: unknown field `ms`"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    const char *url = cycles_local_server_url(s), *key = cycles_local_server_api_key(s);
    cycles_client *c = NULL;
    /* Unknown option keys are named. */
    CHECK(cycles_client_new(url, key, "acme", "{\"journal_dri\":\"/tmp\"}", &c, &err) == CYCLES_INVALID_ARGUMENT && !c,
          "journal_dri");
    CHECK(strstr(cycles_error_message(err), "journal_dri"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    CHECK(cycles_client_new(url, key, "acme", "{\"default_unit\":\"TOKEN\"}", &c, &err) == CYCLES_CONFIG && !c, "bad unit");
    cycles_error_free(err);
    err = NULL;
    OK(cycles_client_new(url, key, "acme", "{\"journal_enabled\":false,\"default_unit\":\"TOKENS\"}", &c, &ERR));
    cycles_guard *g = NULL;
    /* A misspelt spec member is named. */
    CHECK(cycles_guard_begin_json(c, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"m\"},\"estimate\":5,"
                                     "\"idempotency_ky\":\"x\"}", &g, &err) == CYCLES_INVALID_ARGUMENT && !g, "spec member");
    CHECK(strstr(cycles_error_message(err), "idempotency_ky"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    /* Only action and a bare estimate: key, subject (tenant) and unit (TOKENS) from the defaults. */
    OK(cycles_guard_begin_json(c, "{\"action\":{\"kind\":\"llm.completion\",\"name\":\"m\"},\"estimate\":5}", &g, &ERR));
    CHECK(!strcmp(cycles_guard_decision(g), "ALLOW"), "%s", cycles_guard_decision(g));
    CHECK(strstr(cycles_guard_info_json(g), "\"caps\":null"), "%s", cycles_guard_info_json(g));
    OK(cycles_guard_set_actual(g, 3, &ERR));
    cycles_outcome o;
    OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_SETTLED && o.charged == 3 && !o.released, "defaults settled");
    cycles_guard_free(g);
    char *lines = ledger_lines(s);
    CHECK(!strncmp(lines, "reserve cycles-", 15) && strstr(lines, " TOKENS 5\ncommit cycles-") && strstr(lines, ":commit TOKENS 3\n"),
          "%s", lines);
    free(lines);
    /* Caps from the capped workspace's budget. */
    cycles_reserve r = { 0 };
    r.action_kind = "llm.completion";
    r.action_name = "m";
    r.estimate = 10;
    r.idempotency_key = "c-caps";
    r.subject.tenant = "acme";
    r.subject.workspace = "capped";
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    CHECK(!strcmp(cycles_guard_decision(g), "ALLOW_WITH_CAPS"), "%s", cycles_guard_decision(g));
    jv *info = json_parse(cycles_guard_info_json(g));
    jv *caps = json_get(info, "caps");
    CHECK(caps && json_get(caps, "max_tokens") && !strcmp(json_get(caps, "max_tokens")->text, "64")
          && json_get(caps, "max_steps_remaining") == NULL, "%s", cycles_guard_info_json(g));
    json_free(info);
    /* An explicit release ends it: RELEASED, released; a later finish is refused. */
    char *json = NULL;
    OK(cycles_guard_release(g, "not needed", &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_RELEASED && o.released && o.settlement == CYCLES_SETTLEMENT_NONE, "%s", json);
    CHECK(!strcmp(cycles_outcome_kind_name(o.kind), "released"), "name");
    cycles_string_free(json);
    CHECK(cycles_guard_finish(g, true, &o, NULL, &err) == CYCLES_INVALID_ARGUMENT, "finish after release");
    cycles_error_free(err);
    err = NULL;
    cycles_guard_free(g);
    /* Refused while usage is known: the action goes on and commits. */
    r.subject.workspace = NULL;
    r.idempotency_key = "c-refused";
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_add(g, 4, &ERR));
    CHECK(cycles_guard_release(g, NULL, &o, NULL, &err) == CYCLES_INVALID_ARGUMENT, "release refused");
    cycles_error_free(err);
    err = NULL;
    OK(cycles_guard_add(g, 1, &ERR));
    OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_SETTLED && o.charged == 5, "refused then settled");
    cycles_guard_free(g);
    /* Keys an HTTP header cannot carry byte for byte: the body carries them exactly. */
    static const char *keys[] = { " padded ", "trail ", "k\xc3\xa9y", "\xe6\xbc\xa2\xe5\xad\x97-\xf0\x9f\x98\x80" };
    for (size_t i = 0; i < 4; i++) {
        r.idempotency_key = keys[i];
        OK(cycles_guard_begin(c, &r, &g, &ERR));
        OK(cycles_guard_set_actual(g, 2, &ERR));
        OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
        CHECK(o.kind == CYCLES_OUTCOME_SETTLED && o.charged == 2, "key %zu", i);
        cycles_guard_free(g);
    }
    lines = ledger_lines(s);
    CHECK(strstr(lines, "reserve c-caps TOKENS 10\nrelease c-caps:release TOKENS 10\n"), "%s", lines);
    CHECK(strstr(lines, "reserve c-refused TOKENS 10\ncommit c-refused:commit TOKENS 5\n") && !strstr(lines, "c-refused:release"),
          "%s", lines);
    for (size_t i = 0; i < 4; i++) {
        char want[128];
        snprintf(want, sizeof want, "reserve %s TOKENS 10\ncommit %s:commit TOKENS 2\n", keys[i], keys[i]);
        CHECK(strstr(lines, want), "key %zu: %s", i, lines);
    }
    free(lines);
    cycles_client_free(c);
    OK(cycles_local_server_stop(s, &ERR));
    cycles_local_server_free(s);
}

static void guarded(cycles_client *c, cycles_local_server *s, seen_t *seen) {
    cycles_reserve r = { 0 };
    r.idempotency_key = "c-guard-1";
    r.subject.agent = "summarizer";
    r.subject.tenant = "acme";
    r.action_kind = "llm.completion";
    r.action_name = "openai:gpt-4o-mini";
    r.estimate = 500000;
    r.ttl_ms = 2000; /* a short lease, kept alive by the heartbeat */
    r.metadata_json = "{\"run\":\"r-1\",\"big\":123456789012345678901234567890}";
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    CHECK(!strncmp(cycles_guard_reservation_id(g), "rsv_", 4), "%s", cycles_guard_reservation_id(g));
    OK(cycles_guard_add(g, 100000, &ERR));
    usleep(2600 * 1000); /* beyond the TTL: only the heartbeat keeps it */
    OK(cycles_guard_add(g, 320000, &ERR));
    int64_t actual = 0;
    CHECK(cycles_guard_actual(g, &actual) && actual == 420000, "actual %lld", (long long)actual);
    cycles_outcome o;
    char *json = NULL;
    OK(cycles_guard_finish(g, true, &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_SETTLED && o.settlement == CYCLES_SETTLEMENT_COMMITTED, "%s", json);
    CHECK(o.has_actual && o.actual == 420000 && o.has_charged && o.charged == 420000, "%s", json);
    CHECK(o.extensions >= 1, "the short lease was extended: %s", json);
    outcome_names_match(&o, json);
    cycles_string_free(json);
    /* Double finish is refused. */
    cycles_error *err = NULL;
    CHECK(cycles_guard_finish(g, true, NULL, NULL, &err) == CYCLES_INVALID_ARGUMENT, "double finish");
    CHECK(strstr(cycles_error_message(err), "already finished"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    /* Usage reported after the end would not be settled: refused, the settled actual kept. */
    err = NULL;
    CHECK(cycles_guard_set_actual(g, 5, &err) == CYCLES_INVALID_ARGUMENT, "late set_actual");
    CHECK(strstr(cycles_error_message(err), "would not be settled"), "%s", cycles_error_message(err));
    cycles_error_free(err);
    err = NULL;
    CHECK(cycles_guard_add(g, 5, &err) == CYCLES_INVALID_ARGUMENT, "late add");
    cycles_error_free(err);
    CHECK(cycles_guard_actual(g, &actual) && actual == 420000, "actual kept %lld", (long long)actual);
    cycles_guard_free(g);

    /* The ledger shows the commit of the actual. */
    char *ledger = NULL;
    OK(cycles_local_server_ledger(s, &ledger, &ERR));
    CHECK(strstr(ledger, "420000") && strstr(ledger, "c-guard-1:commit"), "%s", ledger);
    cycles_string_free(ledger);

    /* Failed work that reported no usage releases. */
    r.idempotency_key = NULL;
    r.metadata_json = NULL;
    r.ttl_ms = 0;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_finish(g, false, &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_WORK_FAILED && o.settlement == CYCLES_SETTLEMENT_NONE, "work failed");
    outcome_names_match(&o, json);
    cycles_string_free(json);
    cycles_guard_free(g);
    /* Failed work that reported usage commits it: it was spent (journaled first, as any commit). */
    r.idempotency_key = "c-guard-failed-usage";
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_add(g, 129, &ERR));
    OK(cycles_guard_finish(g, false, &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_WORK_FAILED && o.settlement == CYCLES_SETTLEMENT_COMMITTED, "%s", json);
    CHECK(o.has_charged && o.charged == 129, "%s", json);
    outcome_names_match(&o, json);
    cycles_string_free(json);
    cycles_guard_free(g);
    OK(cycles_local_server_ledger(s, &ledger, &ERR));
    CHECK(strstr(ledger, "c-guard-failed-usage:commit") && !strstr(ledger, "c-guard-failed-usage:release"), "%s", ledger);
    cycles_string_free(ledger);
    r.idempotency_key = NULL;
    /* Success without an actual commits nothing: the reservation is released in the same call. */
    r.idempotency_key = "c-guard-missing";
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_finish(g, true, &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_MISSING_ACTUAL && !o.has_actual && o.released, "missing actual");
    CHECK(strstr(json, "\"released\":true") && strstr(json, "\"message\":"), "%s", json);
    OK(cycles_local_server_ledger(s, &ledger, &ERR));
    CHECK(strstr(ledger, "c-guard-missing:release") && !strstr(ledger, "c-guard-missing:commit"), "%s", ledger);
    cycles_string_free(ledger);
    r.idempotency_key = NULL;
    outcome_names_match(&o, json);
    cycles_string_free(json);
    cycles_guard_free(g);

    for (int i = 0; i < 100 && atomic_load(&seen->settled) == 0; i++) usleep(20 * 1000);
    CHECK(atomic_load(&seen->events) > 0 && atomic_load(&seen->settled) >= 1, "events reached the callback");
    CHECK(atomic_load(&seen->refused) >= 1, "the blocking call inside the callback was refused");
}

int main(void) {
    cycles_local_server *s = NULL;
    OK(cycles_local_server_start(NULL, &s, &ERR));
    char dir[] = "/tmp/cycles-c-test.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char opts[256];
    snprintf(opts, sizeof opts, "{\"journal_dir\":\"%s\",\"request_timeout_ms\":30000}", dir);
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(s), cycles_local_server_api_key(s), NULL, opts, &c, &ERR));
    seen_t seen = { 0 };
    seen.client = c;
    OK(cycles_client_set_event_callback(c, on_event, &seen, &ERR));

    operations(c);
    misuse(c);
    names();
    guarded(c, s, &seen);
    small_budget();
    contract();

    /* Close: later calls are the closed error. */
    char *report = NULL;
    OK(cycles_client_close(c, 2000, &report, &ERR));
    CHECK(strstr(report, "\"remaining\":[]"), "%s", report);
    cycles_string_free(report);
    CHECK(cycles_client_is_closed(c), "closed");
    cycles_error *err = NULL;
    CHECK(cycles_client_call(c, "decide", "{}", NULL, &err) == CYCLES_RUNTIME, "closed call");
    CHECK(!strcmp(cycles_error_variant(err), "closed"), "%s", cycles_error_json(err));
    cycles_error_free(err);
    cycles_client_free(c);
    OK(cycles_local_server_stop(s, &ERR));
    cycles_local_server_free(s);

    /* Shutdown ends core: a second shutdown reports it, later calls are RUNTIME. */
    OK(cycles_shutdown(1000, &report, &ERR));
    CHECK(strstr(report, "\"already_shut_down\":false"), "%s", report);
    cycles_string_free(report);
    OK(cycles_shutdown(0, &report, &ERR));
    CHECK(strstr(report, "\"already_shut_down\":true"), "%s", report);
    cycles_string_free(report);
    CHECK(cycles_local_server_start(NULL, &s, &err) == CYCLES_RUNTIME && s == NULL, "after shutdown");
    cycles_error_free(err);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    printf("lifecycle: 12 operations, guarded actions, outcome names, a small budget, events, misuse, panics, shutdown: ok\n");
    return 0;
}
