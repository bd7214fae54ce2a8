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
    /* A settle override of 0 fails where the client is built, not at the first guarded call. */
    cycles_client *zero = NULL;
    cycles_error *zerr = NULL;
    CHECK(cycles_client_new("http://127.0.0.1:1", "k", NULL, "{\"settle_max_attempts\":0}", &zero, &zerr)
              == CYCLES_INVALID_ARGUMENT && zero == NULL, "settle_max_attempts 0");
    CHECK(strstr(cycles_error_message(zerr), "settle_max_attempts must be at least 1"), "%s", cycles_error_message(zerr));
    cycles_error_free(zerr);
    zerr = NULL;
    CHECK(cycles_client_new("http://127.0.0.1:1", "k", NULL, "{\"replay_interval_ms\":0}", &zero, &zerr)
              == CYCLES_INVALID_ARGUMENT, "replay_interval_ms 0");
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
    CHECK(cycles_outcome_kind_name((cycles_outcome_kind)5) == NULL, "out of range kind");
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
    /* Success without an actual sends nothing. */
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_finish(g, true, &o, &json, &ERR));
    CHECK(o.kind == CYCLES_OUTCOME_MISSING_ACTUAL && !o.has_actual, "missing actual");
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
