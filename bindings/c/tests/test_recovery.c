/* Recovery conformance through the C API (../shared/spec/scenarios.yaml, the durable claim):
 * one program, one test per invocation (`test_recovery NAME`; CTest registers each NAME as
 * `recovery_NAME`, and conformance/adapters/c-map.json maps every scenario to those names).
 * Every test starts its own local server in this process over real HTTP, so its ledger and
 * request log outlive the child processes (`test_recovery child SPEC`) that the durable
 * tests SIGKILL mid-settlement and restart. Each test asserts its scenario's expected
 * requests and assertions. Their journal is the directory, or with
 * CYCLES_TEST_JOURNAL_STORE=redis a Redis each test starts (recovery.h, test_journal), looked
 * into only through tj_*: the same assertions hold for both stores. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recovery.h"

static cycles_local_server *S;
static char *TMP;     /* this test's directory */
static char DIR_[600]; /* TMP/journal */
static test_journal J; /* the journal at DIR_ (the directory or Redis) */

static const char *MALFORMED[] = { "missing_required_field", "wrong_status_code", "not_json", "wrong_field_type" };

static bool eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static cycles_client *client_in(const test_journal *j, const char *extra, events *ev) {
    char opts[1024], journal[800];
    tj_options(j, journal, sizeof journal);
    snprintf(opts, sizeof opts, "{%s,\"replay_interval_ms\":3600000%s%s}", journal, extra ? "," : "",
             extra ? extra : "");
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S),
                         opts, &c, &ERR));
    if (ev) OK(cycles_client_set_event_callback(c, on_event, ev, &ERR));
    return c;
}

static void close_client(cycles_client *c) {
    OK(cycles_client_close(c, 0, NULL, &ERR));
    cycles_client_free(c);
}

static cycles_reserve reserve_of(const char *key) {
    cycles_reserve r = { 0 };
    r.idempotency_key = key;
    r.action_kind = "llm.completion";
    r.action_name = "test-model";
    r.estimate = 1000;
    r.no_heartbeat = true;
    return r;
}

/* Guards `key` with `actual` (negative: none) and finishes; returns the outcome JSON. */
static jv *settle(cycles_client *c, const char *key, int64_t actual, char *rid, size_t rid_n) {
    cycles_reserve r = reserve_of(key);
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    snprintf(rid, rid_n, "%s", cycles_guard_reservation_id(g));
    if (actual >= 0) OK(cycles_guard_set_actual(g, actual, &ERR));
    char *json = NULL;
    OK(cycles_guard_finish(g, true, NULL, &json, &ERR));
    cycles_guard_free(g);
    jv *o = json_parse(json);
    CHECK(o != NULL, "%s", json);
    cycles_string_free(json);
    return o;
}

static const char *settlement_status(const jv *outcome) { return jstr(json_get(outcome, "settlement"), "status"); }

/* A reservation created directly (no guard), as another SDK would have made it. */
static void reserve_direct(const char *key, char *rid, size_t n) {
    cycles_client *c = client_in(&J, NULL, NULL);
    char args[512], *out = NULL;
    snprintf(args, sizeof args,
             "{\"idempotency_key\":\"%s\",\"subject\":{\"tenant\":\"%s\"},\"action\":{\"kind\":\"llm.completion\","
             "\"name\":\"test-model\"},\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":1000}}",
             key, cycles_local_server_tenant(S));
    OK(cycles_client_call(c, "create_reservation", args, &out, &ERR));
    jv *o = json_parse(out);
    snprintf(rid, n, "%s", jstr(json_get(o, "body"), "reservation_id"));
    json_free(o);
    cycles_string_free(out);
    close_client(c);
}

/* -- child specs ------------------------------------------------------------------------- */

typedef struct {
    const char *api_key; /* NULL: the server's */
    const char *tenant;  /* NULL: the server's; "" : none */
    const char *mode;
    const char *key;
    int amount;
    int max_attempts;
    const test_journal *journal; /* NULL: J */
    const char *go;
} spec_t;

static void spawn(child *c, const char *name, spec_t s) {
    char spec[2048], result[600], tenant[200], url[200] = "";
    const char *t = s.tenant ? s.tenant : cycles_local_server_tenant(S);
    const test_journal *j = s.journal ? s.journal : &J;
    if (j->url[0]) snprintf(url, sizeof url, ",\"journal_url\":\"%s\"", j->url);
    if (t[0]) snprintf(tenant, sizeof tenant, "\"%s\"", t);
    else snprintf(tenant, sizeof tenant, "null");
    snprintf(result, sizeof result, "%s/%s.json", TMP, name);
    snprintf(spec, sizeof spec,
             "{\"url\":\"%s\",\"api_key\":\"%s\",\"tenant\":%s,\"dir\":\"%s\",\"mode\":\"%s\",\"key\":\"%s\","
             "\"amount\":%d,\"max_attempts\":%d,\"timeout_ms\":20000,\"result\":\"%s\"%s%s%s%s}",
             cycles_local_server_url(S), s.api_key ? s.api_key : cycles_local_server_api_key(S), tenant, j->dir,
             s.mode, s.key ? s.key : "", s.amount, s.max_attempts ? s.max_attempts : 5, result,
             s.go ? ",\"go\":\"" : "", s.go ? s.go : "", s.go ? "\"" : "", url);
    child_start(c, spec, result);
}

static jv *run_child(const char *name, spec_t s) {
    child c;
    spawn(&c, name, s);
    return child_finish(&c, 60);
}

static jv *out_of(jv *result) { return json_get(result, "out"); }
static jv *remaining(jv *result) { return json_get(out_of(result), "remaining"); }

/* The parsed record of `rid` in J, under the server's identity; NULL when there is none. */
static jv *rec_of(const char *rid) {
    return tj_record(&J, cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), rid);
}

static bool has_rec(const char *rid) {
    jv *rec = rec_of(rid);
    json_free(rec);
    return rec != NULL;
}

static jv *first_commit_after(size_t before) {
    jv *reqs = server_json(S, false);
    for (size_t i = before; i < reqs->n; i++)
        if (eq(jstr(reqs->items[i], "operation"), "commitReservation")) {
            char *text = json_dump(reqs->items[i]);
            jv *r = json_parse(text);
            free(text);
            json_free(reqs);
            return r;
        }
    json_free(reqs);
    return NULL;
}

static size_t request_count(void) {
    jv *reqs = server_json(S, false);
    size_t n = reqs->n;
    json_free(reqs);
    return n;
}

/* -- CR-CORE-001 ------------------------------------------------------------------------- */

static void lost_commit_response(void) {
    add_fault(S, "commitReservation", "{\"kind\":\"drop_response_after_apply\"}", NULL);
    cycles_client *c = client_in(&J, NULL, NULL);
    char rid[256];
    jv *o = settle(c, "core-1", 400, rid, sizeof rid);
    close_client(c);
    const char *key = "core-1:commit";
    jv *s = json_get(o, "settlement");
    CHECK(eq(jstr(s, "status"), "committed") && jnum(json_get(s, "charged"), "amount", -1) == 400, "%s", json_dump(o));
    jlist reqs = settlement_requests(S, rid, key);
    CHECK(reqs.n == 2, "commit, commit_same_key: %zu", reqs.n);
    for (size_t i = 0; i < 2; i++)
        CHECK(eq(jstr(reqs.items[i], "operation"), "commitReservation") && eq(jstr(reqs.items[i], "idempotency_key"), key),
              "the retry uses the original key");
    CHECK(jnull(reqs.items[0], "status") && eq(jstr(reqs.items[0], "fault"), "drop_response_after_apply"), "dropped");
    CHECK(jnum(reqs.items[1], "status", 0) == 200 && jbool(reqs.items[1], "replay"), "the retry got the original result");
    jlist_free(&reqs);
    int commits, events;
    settlements(S, rid, key, &commits, &events);
    CHECK(commits == 1 && events == 0, "settled at most once: %d %d", commits, events);
    jv *ledger = server_json(S, true);
    int applied = 0;
    for (size_t i = 0; i < ledger->n; i++)
        if (eq(jstr(ledger->items[i], "kind"), "commit")) {
            CHECK(jnum(ledger->items[i], "amount", 0) == 400 && eq(jstr(ledger->items[i], "idempotency_key"), key), "applied");
            applied++;
        }
    CHECK(applied == 1, "one applied commit");
    json_free(ledger);
    CHECK(tj_records(&J) == 0, "the record is removed after success");
    no_release(S);
    json_free(o);
}

/* -- CR-CORE-002 ------------------------------------------------------------------------- */

static void expired_commit_falls_back_to_event(void) {
    events *ev = events_new();
    cycles_client *c = client_in(&J, NULL, ev);
    char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"idempotency_key\":\"core-2\",\"subject\":{\"tenant\":\"%s\"},\"action\":{\"kind\":\"llm.completion\","
             "\"name\":\"test-model\",\"tags\":[\"core-2\"]},\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":1000},"
             "\"heartbeat\":false}",
             cycles_local_server_tenant(S));
    cycles_guard *g = NULL;
    OK(cycles_guard_begin_json(c, spec, &g, &ERR));
    char rid[256];
    snprintf(rid, sizeof rid, "%s", cycles_guard_reservation_id(g));
    OK(cycles_guard_set_actual(g, 400, &ERR));
    OK(cycles_guard_set_metrics_json(g, "{\"tokens_input\":12,\"tokens_output\":34}", &ERR));
    OK(cycles_guard_set_metadata_json(g, "{\"run\":\"r-7\"}", &ERR));
    OK(cycles_local_server_advance_clock(S, 200000, &ERR)); /* past expires_at + grace while the work ran */
    char *json = NULL;
    OK(cycles_guard_finish(g, true, NULL, &json, &ERR));
    cycles_guard_free(g);
    close_client(c);
    jv *o = json_parse(json);
    CHECK(eq(settlement_status(o), "recovered_via_event"), "%s", json);
    cycles_string_free(json);
    const char *key = "core-2:commit";
    jlist reqs = settlement_requests(S, rid, key);
    CHECK(reqs.n == 2, "commit, event_same_key: %zu", reqs.n);
    CHECK(eq(jstr(reqs.items[0], "operation"), "commitReservation") && jnum(reqs.items[0], "status", 0) == 410, "commit 410");
    CHECK(eq(jstr(reqs.items[1], "operation"), "createEvent") && jnum(reqs.items[1], "status", 0) == 201, "event 201");
    CHECK(eq(jstr(reqs.items[0], "idempotency_key"), key) && eq(jstr(reqs.items[1], "idempotency_key"), key), "one key");
    /* The bytes sent (the server keeps each request body exactly as received). */
    jv *commit = json_parse(jstr(reqs.items[0], "body")), *event = json_parse(jstr(reqs.items[1], "body"));
    CHECK(commit && event, "bodies");
    jv *actual = json_parse("{\"unit\":\"USD_MICROCENTS\",\"amount\":400}");
    jv *subject = json_parse("{\"tenant\":\"acme\"}");
    jv *action = json_parse("{\"kind\":\"llm.completion\",\"name\":\"test-model\",\"tags\":[\"core-2\"]}");
    jv *metrics = json_parse("{\"tokens_input\":12,\"tokens_output\":34}");
    CHECK(eq(jstr(commit, "idempotency_key"), key) && json_equal(json_get(commit, "actual"), actual), "commit body");
    CHECK(eq(jstr(event, "idempotency_key"), key), "event key");
    CHECK(json_equal(json_get(event, "subject"), subject), "the original subject: %s", json_dump(event));
    CHECK(json_equal(json_get(event, "action"), action), "the original action: %s", json_dump(event));
    CHECK(json_equal(json_get(event, "actual"), actual), "the known actual, unchanged");
    CHECK(json_equal(json_get(event, "metrics"), metrics) && json_equal(json_get(commit, "metrics"), metrics), "metrics");
    jv *meta = json_get(event, "metadata");
    CHECK(eq(jstr(meta, "run"), "r-7") && eq(jstr(meta, "recovered_reservation_id"), rid), "metadata");
    CHECK(eq(jstr(meta, "recovery_reason"), "commit_after_reservation_expired"), "recovery reason");
    json_free(commit); json_free(event); json_free(actual); json_free(subject); json_free(action); json_free(metrics);
    jlist_free(&reqs);
    jv *ledger = server_json(S, true);
    int evs = 0, commits = 0;
    for (size_t i = 0; i < ledger->n; i++) {
        jv *e = ledger->items[i];
        if (eq(jstr(e, "kind"), "commit")) commits++;
        if (eq(jstr(e, "kind"), "event")) {
            evs++;
            CHECK(eq(jstr(e, "idempotency_key"), key) && eq(jstr(e, "tenant"), "acme") &&
                  eq(jstr(e, "unit"), "USD_MICROCENTS") && jnum(e, "amount", 0) == 400, "the event applied");
        }
    }
    CHECK(evs == 1 && commits == 0, "one event, no commit: %d %d", evs, commits);
    json_free(ledger);
    CHECK(tj_records(&J) == 0, "record removed");
    CHECK(events_count(ev, "settlement_mode_switched", rid) == 1, "mode switched event");
    CHECK(events_count(ev, "settlement_settled", rid) == 1 && events_count(ev, "settlement_settled", NULL) == 1, "settled event");
    no_release(S);
    json_free(o);
    events_free(ev);
}

/* -- CR-CORE-003 ------------------------------------------------------------------------- */

static void heartbeat_transport_failure(void) {
    add_fault(S, "extendReservation", "{\"kind\":\"connection_reset\"}", NULL);
    events *ev = events_new();
    cycles_client *c = client_in(&J, "\"request_timeout_ms\":500", ev);
    cycles_reserve r = reserve_of("core-3");
    r.no_heartbeat = false;
    r.ttl_ms = 3500; /* long enough for a same-key retry inside the retry window */
    r.policy = CYCLES_HEARTBEAT_WARN;
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    char rid[256];
    snprintf(rid, sizeof rid, "%s", cycles_guard_reservation_id(g));
    double started = mono_s();
    /* The work outlives its original TTL and the first (failed) extension. */
    while (mono_s() - started < 3.8 || events_count(ev, "heartbeat_extended", rid) == 0) {
        CHECK(mono_s() - started < 10, "no successful extension");
        usleep(20000);
    }
    CHECK(!cycles_guard_cancelled(g), "warn policy never cancels the work");
    OK(cycles_guard_set_actual(g, 700, &ERR));
    cycles_outcome o;
    OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
    cycles_guard_free(g);
    close_client(c);
    CHECK(o.kind == CYCLES_OUTCOME_SETTLED && o.settlement == CYCLES_SETTLEMENT_COMMITTED, "the work's actual committed");
    /* The failure is an event with the reservation and a retry disposition. */
    const jv *f = events_first(ev, "heartbeat_failed", rid);
    CHECK(f != NULL, "the failure is an event");
    CHECK(!strncmp(rid, "rsv_", 4) && eq(jstr(f, "error_kind"), "TRANSPORT_RESET"), "%s", jstr(f, "error_kind"));
    CHECK(eq(jstr(f, "disposition"), "retry") && !jnull(f, "retry_in_ms"), "retry disposition");
    events_free(ev);
    jv *reqs = server_json(S, false);
    size_t ext[16], n_ext = 0;
    const jv *last = reqs->n ? reqs->items[reqs->n - 1] : NULL;
    for (size_t i = 0; i < reqs->n && n_ext < 16; i++)
        if (eq(jstr(reqs->items[i], "operation"), "extendReservation")) ext[n_ext++] = i;
    CHECK(n_ext >= 2, "extend, extend_same_key");
    jv *e0 = reqs->items[ext[0]], *e1 = reqs->items[ext[1]];
    CHECK(eq(jstr(e0, "idempotency_key"), jstr(e1, "idempotency_key")), "same-key extend");
    CHECK(jnull(e0, "status") && jnum(e1, "status", 0) == 200, "reset, then extended");
    CHECK(eq(jstr(last, "operation"), "commitReservation") && eq(jstr(last, "idempotency_key"), "core-3:commit"),
          "final settlement attempted");
    json_free(reqs);
    int commits, evs;
    settlements(S, rid, "core-3:commit", &commits, &evs);
    CHECK(commits == 1 && evs == 0, "committed once");
    jv *ledger = server_json(S, true);
    for (size_t i = 0; i < ledger->n; i++)
        if (eq(jstr(ledger->items[i], "kind"), "commit")) CHECK(jnum(ledger->items[i], "amount", 0) == 700, "amount");
    json_free(ledger);
    no_release(S);
}

/* -- CR-CORE-004 ------------------------------------------------------------------------- */

static void protocol_invalid_round(const char *shape, bool via_event) {
    char d[700], key[160], rkey[128], extra[64];
    snprintf(d, sizeof d, "%s/%s-%d", TMP, shape, via_event);
    test_journal jr; /* each round's own journal */
    tj_open(&jr, d, tj_on_redis());
    const char *op = via_event ? "createEvent" : "commitReservation";
    char fault[128];
    snprintf(fault, sizeof fault, "{\"kind\":\"malformed_success\",\"shape\":\"%s\"}", shape);
    add_fault(S, op, fault, NULL);
    snprintf(rkey, sizeof rkey, "core-4-%s", shape);
    snprintf(key, sizeof key, "%s:commit", rkey);
    snprintf(extra, sizeof extra, "\"settle_max_attempts\":%d", via_event ? 2 : 1);
    cycles_client *one_try = client_in(&jr, extra, NULL);
    cycles_reserve r = reserve_of(rkey);
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(one_try, &r, &g, &ERR));
    char rid[256];
    snprintf(rid, sizeof rid, "%s", cycles_guard_reservation_id(g));
    OK(cycles_guard_set_actual(g, 400, &ERR));
    if (via_event) OK(cycles_local_server_advance_clock(S, 200000, &ERR));
    char *json = NULL;
    OK(cycles_guard_finish(g, true, NULL, &json, &ERR));
    cycles_guard_free(g);
    jv *o = json_parse(json);
    jv *s = json_get(o, "settlement");
    /* Applied by the server, but not schema-valid: NOT a success. */
    CHECK(eq(jstr(s, "status"), "pending") && jbool(s, "journaled"), "%s via_event=%d: %s", shape, via_event, json);
    cycles_string_free(json);
    json_free(o);
    int commits, evs, want_c = via_event ? 0 : 1, want_e = via_event ? 1 : 0;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == want_c && evs == want_e, "%s: the server applied it", shape);
    jv *rec = tj_record(&jr, cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), rid);
    CHECK(rec != NULL, "%s: record retained", shape);
    CHECK(eq(jstr(rec, "idempotency_key"), key), "%s: with the original key", shape);
    CHECK(eq(jstr(rec, "mode"), via_event ? "event" : "commit"), "%s: mode %s", shape, jstr(rec, "mode"));
    json_free(rec);
    close_client(one_try);

    /* A fresh client replays the record with the SAME key; only the valid answer ends it. */
    cycles_client *fresh = client_in(&jr, NULL, NULL);
    char *report = NULL;
    OK(cycles_client_drain(fresh, 10000, &report, &ERR));
    close_client(fresh);
    CHECK(strstr(report, "\"remaining\":[]"), "%s: %s", shape, report);
    cycles_string_free(report);
    CHECK(tj_records(&jr) == 0, "%s: removed after schema-valid success", shape);
    CHECK(tj_dir_untouched(&jr), "%s: nothing written into the unused directory", shape);
    tj_close(&jr);
    jlist reqs = settlement_requests(S, rid, key);
    jv *mine[8];
    size_t n = 0;
    for (size_t i = 0; i < reqs.n && n < 8; i++)
        if (eq(jstr(reqs.items[i], "operation"), op)) mine[n++] = reqs.items[i];
    CHECK(n == 2, "%s: %zu %s requests", shape, n, op);
    CHECK(eq(jstr(mine[0], "idempotency_key"), key) && eq(jstr(mine[1], "idempotency_key"), key), "%s: same key", shape);
    CHECK(eq(jstr(mine[0], "fault"), "malformed_success"), "%s: the malformed answer", shape);
    CHECK(jnum(mine[1], "status", 0) == (via_event ? 201 : 200), "%s: valid answer", shape);
    CHECK(jbool(mine[1], "replay"), "%s: the retry got the original result", shape);
    jlist_free(&reqs);
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == want_c && evs == want_e, "%s: settled at most once", shape);
}

static void protocol_invalid_commit_success(void) {
    for (size_t i = 0; i < 4; i++) protocol_invalid_round(MALFORMED[i], false);
}

static void protocol_invalid_event_success(void) {
    for (size_t i = 0; i < 4; i++) protocol_invalid_round(MALFORMED[i], true);
}

/* -- CR-BOUNDARY-001 --------------------------------------------------------------------- */

static void missing_actual(void) {
    cycles_client *c = client_in(&J, NULL, NULL);
    char rid[256];
    jv *o = settle(c, "b-1", -1, rid, sizeof rid);
    CHECK(eq(jstr(o, "outcome"), "missing_actual") && eq(jstr(o, "reservation_id"), rid), "%s", json_dump(o));
    CHECK(json_get(o, "settlement") == NULL, "no settlement");
    /* Released in the same call; core's message names the reservation. */
    CHECK(json_get(o, "released") && json_get(o, "released")->b, "released: %s", json_dump(o));
    CHECK(jstr(o, "message") && strstr(jstr(o, "message"), rid), "message: %s", json_dump(o));
    json_free(o);
    CHECK(count_ops(S, "createReservation") == 1 && count_ops(S, "releaseReservation") == 1 && request_count() == 2,
          "the reservation, then exactly one release");
    jv *first = server_json(S, true);
    CHECK(first->n == 2 && eq(jstr(first->items[0], "kind"), "reserve") && eq(jstr(first->items[1], "kind"), "release"),
          "ledger reserve, release: %s", json_dump(first));
    CHECK(eq(jstr(first->items[1], "idempotency_key"), "b-1:release"), "%s", json_dump(first));
    json_free(first);
    /* Through the struct: the same outcome kind, no actual, no settlement, released. */
    cycles_reserve r = reserve_of("b-2");
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    cycles_outcome out;
    OK(cycles_guard_finish(g, true, &out, NULL, &ERR));
    CHECK(out.kind == CYCLES_OUTCOME_MISSING_ACTUAL && !out.has_actual && out.settlement == CYCLES_SETTLEMENT_NONE
          && out.released, "struct");
    cycles_guard_free(g);
    /* A work failing before any actual only releases (a KNOWN actual would be settled). */
    r = reserve_of("b-3");
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    OK(cycles_guard_finish(g, false, &out, NULL, &ERR));
    CHECK(out.kind == CYCLES_OUTCOME_WORK_FAILED && out.settlement == CYCLES_SETTLEMENT_NONE && out.released, "work failed");
    cycles_guard_free(g);
    close_client(c);
    CHECK(count_ops(S, "commitReservation") == 0 && count_ops(S, "createEvent") == 0, "no commit or event");
    CHECK(count_ops(S, "releaseReservation") == 3, "every action is released");
    jv *ledger = server_json(S, true);
    CHECK(ledger->n == 6, "ledger: %s", json_dump(ledger));
    for (size_t i = 0; i < ledger->n; i++) {
        const char *k = jstr(ledger->items[i], "kind");
        CHECK(eq(k, i % 2 ? "release" : "reserve"), "ledger %zu %s", i, k);
    }
    json_free(ledger);
    CHECK(tj_records(&J) == 0, "nothing journaled without an actual");
    jv *pending = tj_pending(&J);
    CHECK(pending->n == 0, "nothing pending");
    json_free(pending);
}

/* -- CR-DURABLE-001 ---------------------------------------------------------------------- */

static void killed_in_flight(const char *fault, int hold_ms, int n) {
    char key[96], rkey[64], name[32];
    snprintf(rkey, sizeof rkey, "d1-%d", n);
    snprintf(key, sizeof key, "%s:commit", rkey);
    char f[128];
    snprintf(f, sizeof f, "{\"kind\":\"%s\",\"ms\":%d}", fault, hold_ms);
    add_fault(S, "commitReservation", f, NULL);
    size_t before = request_count();
    child p1;
    snprintf(name, sizeof name, "p1-%d", n);
    spawn(&p1, name, (spec_t){ .mode = "settle", .key = rkey, .amount = 400 });
    /* Process 1 journals, sends the first commit; the server holds it; SIGKILL in flight. */
    jv *req = NULL;
    WAIT_FOR(20, "the first commit", (req = first_commit_after(before)) != NULL);
    const char *rid = jstr(req, "reservation_id");
    CHECK(rid != NULL, "rid");
    const char *url = cycles_local_server_url(S), *api_key = cycles_local_server_api_key(S),
               *tenant = cycles_local_server_tenant(S);
    size_t len = 0;
    char *bytes = tj_record_bytes(&J, url, api_key, tenant, rid, &len);
    CHECK(bytes != NULL, "the record is journaled while the first commit is in flight: %s", rid);
    jv *rec = parse_record(bytes, len);
    jv *reqs = server_json(S, false);
    for (size_t i = 0; i < reqs->n; i++)
        if (jnum(reqs->items[i], "seq", -1) == jnum(req, "seq", -2))
            CHECK(jnull(reqs->items[i], "status"), "the commit is still in flight");
    json_free(reqs);
    child_kill9(&p1);
    double killed = mono_s();
    CHECK(eq(jstr(rec, "reservation_id"), rid) && eq(jstr(rec, "mode"), "commit"), "record");
    CHECK(eq(jstr(rec, "idempotency_key"), key), "key");
    CHECK(!jnull(rec, "recorded_at_ms") && jnum(rec, "recorded_at_ms", 0) <= jnum(req, "received_at_ms", 0),
          "journal write precedes the first settlement request");
    /* The unresolved record survives the kill, the only one: named by cycles_journal_file_name,
     * in the identity's partition. */
    char *fname = NULL, *part = fingerprint(url, api_key, tenant);
    OK(cycles_journal_file_name(rid, &fname, &ERR));
    tj_entry *all;
    size_t n_all = tj_list(&J, false, &all);
    CHECK(n_all == 1 && !strcmp(all[0].name, fname) && !strcmp(all[0].part, part), "named by cycles_journal_file_name");
    CHECK(all[0].len == len && !memcmp(all[0].data, bytes, len), "the record survives byte for byte");
    cycles_string_free(fname);
    free(part);
    free(bytes);
    tj_list_free(all, n_all);

    /* Process 2: a fresh process with the journal only. */
    long long last_seq = (long long)request_count();
    snprintf(name, sizeof name, "p2-%d", n);
    jv *r2 = run_child(name, (spec_t){ .mode = "drain" });
    CHECK(remaining(r2) && remaining(r2)->n == 0, "drained");
    const jv *settled = NULL;
    CHECK(result_events(r2, "settlement_settled", NULL, &settled) == 1 && eq(jstr(settled, "reservation_id"), rid), "settled");
    CHECK(tj_records(&J) == 0, "successful replay removes the record");
    json_free(r2);

    /* Let the held first request end at the server, so a late apply would show. */
    double wait = hold_ms / 1000.0 - (mono_s() - killed) + 0.2;
    if (wait > 0) usleep((useconds_t)(wait * 1e6));
    jlist s = settlement_requests(S, rid, key);
    CHECK(s.n >= 2, "%zu requests", s.n);
    for (size_t i = 0; i < s.n; i++) {
        CHECK(eq(jstr(s.items[i], "operation"), "commitReservation") && eq(jstr(s.items[i], "idempotency_key"), key), "same key");
        if (i > 0) CHECK(jnum(s.items[i], "seq", 0) > last_seq, "later commits came from the restart");
    }
    jlist_free(&s);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "settled at most once");
    json_free(rec);
    json_free(req);
}

/* The server holds the first commit 4 s: long enough that a loaded CI machine still reads the
 * record while the commit is in flight (1.5 s was not). */
static void first_commit_journaled_and_replayed_after_sigkill(void) {
    killed_in_flight("delay_after_apply", 4000, 1);
    killed_in_flight("delay", 4000, 2);
    no_release(S);
}

/* -- CR-DURABLE-002 ---------------------------------------------------------------------- */

static void expired_replay_switches_durably_to_event(void) {
    const char *key = "d2:commit";
    add_fault(S, "commitReservation", "{\"kind\":\"server_error\",\"status\":500}", NULL);
    jv *r1 = run_child("p1", (spec_t){ .mode = "settle", .key = "d2", .amount = 400, .max_attempts = 1 });
    jv *s1 = json_get(out_of(r1), "settlement");
    CHECK(eq(jstr(s1, "status"), "pending"), "pending");
    char rid[256];
    snprintf(rid, sizeof rid, "%s", jstr(out_of(r1), "reservation_id"));
    json_free(r1);
    jv *rec = rec_of(rid);
    CHECK(rec && eq(jstr(rec, "mode"), "commit"), "the journal contains the commit");
    json_free(rec);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 1, "one commit");
    jlist_free(&l);

    /* The reservation expires; the event will be applied and its response held. */
    OK(cycles_local_server_advance_clock(S, 200000, &ERR));
    add_fault(S, "createEvent", "{\"kind\":\"delay_after_apply\",\"ms\":1000}", NULL);
    /* Process 2: commit -> 410 -> event mode persisted -> event in flight -> SIGKILL. */
    child p2;
    spawn(&p2, "p2", (spec_t){ .mode = "drain" });
    bool in_flight = false;
    for (double deadline = mono_s() + 20; !in_flight; usleep(1000)) {
        CHECK(mono_s() < deadline, "timed out waiting for the event request");
        l = settlement_requests(S, rid, key);
        for (size_t i = 0; i < l.n; i++) in_flight |= eq(jstr(l.items[i], "operation"), "createEvent");
        jlist_free(&l);
    }
    jv *switched = rec_of(rid);
    CHECK(switched != NULL, "the record is present while the event is in flight");
    child_kill9(&p2);
    CHECK(eq(jstr(switched, "mode"), "event"), "event mode is persisted before the event attempt");
    CHECK(eq(jstr(switched, "idempotency_key"), key) && !jnull(switched, "event_fallback_body"), "switched record");
    json_free(switched);
    l = settlement_requests(S, rid, key);
    CHECK(l.n == 3, "%zu requests", l.n);
    CHECK(eq(jstr(l.items[0], "operation"), "commitReservation") && jnum(l.items[0], "status", 0) == 500, "500");
    CHECK(eq(jstr(l.items[1], "operation"), "commitReservation") && jnum(l.items[1], "status", 0) == 410,
          "commit_same_key_after_restart");
    CHECK(eq(jstr(l.items[2], "operation"), "createEvent") && jnull(l.items[2], "status"), "the event was in flight");
    jlist_free(&l);
    jv *after = rec_of(rid);
    CHECK(after && eq(jstr(after, "mode"), "event"), "after the kill");
    json_free(after);

    /* Process 3: sends the event only, same key; success removes the record. */
    jv *r3 = run_child("p3", (spec_t){ .mode = "drain" });
    CHECK(remaining(r3) && remaining(r3)->n == 0, "drained");
    const jv *settled = NULL;
    CHECK(result_events(r3, "settlement_settled", rid, &settled) == 1 && eq(jstr(settled, "mode"), "event"), "by event");
    json_free(r3);
    CHECK(!has_rec(rid) && tj_records(&J) == 0, "successful event removes the record");
    l = settlement_requests(S, rid, key);
    CHECK(l.n >= 4, "%zu", l.n);
    for (size_t i = 0; i < l.n; i++) {
        if (i >= 2) CHECK(eq(jstr(l.items[i], "operation"), "createEvent"), "after the mode switch only events");
        CHECK(eq(jstr(l.items[i], "idempotency_key"), key), "event_same_key_after_restart");
    }
    jlist_free(&l);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 0 && evs == 1, "settled once, by the event");
    jv *ledger = server_json(S, true);
    for (size_t i = 0; i < ledger->n; i++)
        if (eq(jstr(ledger->items[i], "kind"), "event"))
            CHECK(eq(jstr(ledger->items[i], "unit"), "USD_MICROCENTS") && jnum(ledger->items[i], "amount", 0) == 400, "amount");
    json_free(ledger);
    no_release(S);
}

/* -- CR-DURABLE-003 ---------------------------------------------------------------------- */

static void rate_limit_floor_survives_sigkill(void) {
    const char *key = "d3:commit";
    add_fault(S, "commitReservation", "{\"kind\":\"rate_limited\",\"retry_after\":\"3\"}", NULL);
    child p1;
    spawn(&p1, "p1", (spec_t){ .mode = "settle", .key = "d3", .amount = 400 });
    jv *first = NULL;
    WAIT_FOR(20, "the 429", (first = first_commit_after(0)) != NULL);
    char rid[256];
    snprintf(rid, sizeof rid, "%s", jstr(first, "reservation_id"));
    json_free(first);
    /* Kill as soon as the floor is journaled (the child then waits inline for it). */
    long long nb = -1;
    for (double deadline = mono_s() + 20; nb < 0; usleep(1000)) {
        CHECK(mono_s() < deadline, "timed out waiting for the persisted floor");
        jv *rec = rec_of(rid);
        if (rec) nb = jnum(rec, "not_before_ms", -1);
        json_free(rec);
    }
    child_kill9(&p1);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 1 && jnum(l.items[0], "status", 0) == 429, "one 429");
    CHECK(nb >= jnum(l.items[0], "received_at_ms", 0) + 3000, "the floor honours Retry-After");
    jlist_free(&l);
    jv *rec = rec_of(rid);
    CHECK(rec && jnum(rec, "not_before_ms", -1) == nb, "the floor survives the kill");
    json_free(rec);

    /* Restarted before Retry-After: a fresh process sends nothing. */
    jv *r2 = run_child("p2", (spec_t){ .mode = "flush" });
    CHECK(now_ms() < nb, "this check ran before the floor");
    jv *rem = remaining(r2), *outcomes = json_get(out_of(r2), "outcomes");
    CHECK(outcomes && outcomes->n == 0 && rem && rem->n == 1 && eq(jstr(rem->items[0], "reservation_id"), rid), "nothing sent");
    json_free(r2);
    l = settlement_requests(S, rid, key);
    CHECK(l.n == 1, "nothing sent before the floor");
    jlist_free(&l);

    /* Another fresh process drains: no retry before the floor, then success removes it. */
    jv *r3 = run_child("p3", (spec_t){ .mode = "drain" });
    CHECK(remaining(r3) && remaining(r3)->n == 0, "drained");
    json_free(r3);
    CHECK(!has_rec(rid) && tj_records(&J) == 0, "successful replay removes the record");
    l = settlement_requests(S, rid, key);
    CHECK(l.n == 2, "%zu", l.n);
    CHECK(jnum(l.items[1], "received_at_ms", 0) >= nb, "no retry before the persisted not_before");
    CHECK(jnum(l.items[1], "status", 0) == 200, "200");
    CHECK(eq(jstr(l.items[0], "idempotency_key"), key) && eq(jstr(l.items[1], "idempotency_key"), key), "same key");
    jlist_free(&l);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "once");
}

/* -- CR-DURABLE-004 ---------------------------------------------------------------------- */

static bool record_contains(const char *api_key, const char *rid, const char *needle) {
    size_t len = 0;
    char *d = tj_record_bytes(&J, cycles_local_server_url(S), api_key, "acme", rid, &len);
    CHECK(d != NULL, "no record of %s under %s", rid, api_key);
    bool found = memmem(d, len, needle, strlen(needle)) != NULL;
    free(d);
    return found;
}

static void tenant_journal_survives_key_rotation(void) {
    const char *key = "d4:commit", *url = cycles_local_server_url(S);
    add_fault(S, "commitReservation", "{\"kind\":\"server_error\",\"status\":500}", NULL);
    jv *r1 = run_child("p1", (spec_t){ .api_key = "old-key", .tenant = "acme", .mode = "settle", .key = "d4",
                                       .amount = 400, .max_attempts = 1 });
    CHECK(eq(jstr(json_get(out_of(r1), "settlement"), "status"), "pending"), "pending");
    char rid[256];
    snprintf(rid, sizeof rid, "%s", jstr(out_of(r1), "reservation_id"));
    json_free(r1);
    jv *old_rec = tj_record(&J, url, "old-key", "acme", rid);
    CHECK(old_rec && tj_records(&J) == 1, "one record");
    json_free(old_rec);
    CHECK(!record_contains("old-key", rid, "old-key") && !record_contains("old-key", rid, "new-key"), "no API key stored");
    char *a = NULL, *b = NULL;
    OK(cycles_journal_fingerprint(url, "new-key", "acme", &a, &ERR));
    OK(cycles_journal_fingerprint(url, "old-key", "acme", &b, &ERR));
    CHECK(!strcmp(a, b), "the tenant partition does not depend on the key");
    cycles_string_free(a);
    cycles_string_free(b);
    jv *tenant_rec = tj_record(&J, url, "new-key", "acme", rid);
    CHECK(tenant_rec != NULL, "found under the new key's tenant partition");
    json_free(tenant_rec);

    /* The new key WITHOUT the tenant is another partition: nothing to replay there. */
    jv *other = run_child("p-other", (spec_t){ .api_key = "new-key", .tenant = "", .mode = "flush" });
    jv *rep = out_of(other);
    CHECK(json_get(rep, "outcomes")->n == 0 && remaining(other)->n == 0 && json_get(rep, "quarantined")->n == 0,
          "another partition: nothing");
    json_free(other);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 1, "nothing sent");
    jlist_free(&l);

    /* Rotated: a fresh process with only the new key and the tenant finds and settles it. */
    jv *r2 = run_child("p2", (spec_t){ .api_key = "new-key", .tenant = "acme", .mode = "drain" });
    CHECK(remaining(r2)->n == 0, "drained");
    const jv *settled = NULL;
    CHECK(result_events(r2, "settlement_settled", NULL, &settled) == 1 && eq(jstr(settled, "reservation_id"), rid), "settled");
    json_free(r2);
    tenant_rec = tj_record(&J, url, "new-key", "acme", rid);
    CHECK(tenant_rec == NULL && tj_records(&J) == 0, "removed");
    l = settlement_requests(S, rid, key);
    CHECK(l.n == 2, "%zu", l.n);
    CHECK(jnum(l.items[0], "status", 0) == 500 && jnum(l.items[1], "status", 0) == 200, "500 then 200");
    for (size_t i = 0; i < 2; i++)
        CHECK(eq(jstr(l.items[i], "operation"), "commitReservation") && eq(jstr(l.items[i], "idempotency_key"), key),
              "commit_same_key_after_restart");
    jlist_free(&l);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "once");
}

/* -- CR-DURABLE-005 ---------------------------------------------------------------------- */

/* A record as the official Python SDK writes it (spaced separators, \u escapes, no mode). */
static void python_sdk_record(char *out, size_t n, const char *rid, const char *base_url, const char *key, int amount) {
    snprintf(out, n,
             "{\"version\": 1, \"reservation_id\": \"%s\", \"base_url\": \"%s\", \"commit_body\": "
             "{\"idempotency_key\": \"%s\", \"actual\": {\"unit\": \"USD_MICROCENTS\", \"amount\": %d}, "
             "\"metadata\": {\"note\": \"caf\\u00e9\"}}, \"event_fallback_body\": null, \"recorded_at_ms\": %lld, "
             "\"not_before_ms\": null}",
             rid, base_url, key, amount, (long long)now_ms());
}

/* <part>/<rid's file name> (legacy: its legacy name); part NULL: the name alone. */
static char *in_part(const char *part, const char *rid, bool legacy) {
    char *name = NULL;
    if (legacy) OK(cycles_journal_legacy_file_name(rid, &name, &ERR));
    else OK(cycles_journal_file_name(rid, &name, &ERR));
    size_t n = (part ? strlen(part) : 0) + strlen(name) + 2;
    char *p = malloc(n);
    if (part) snprintf(p, n, "%s/%s", part, name);
    else snprintf(p, n, "%s", name);
    cycles_string_free(name);
    return p;
}

static void expect_journal_error(const char *data, const char *kind) {
    cycles_error *err = NULL;
    char *out = NULL;
    CHECK(cycles_journal_parse_record((const uint8_t *)data, strlen(data), &out, &err) == CYCLES_INVALID_ARGUMENT, "%s", kind);
    char want[64];
    snprintf(want, sizeof want, "{\"journal_error\":\"%s\"}", kind);
    CHECK(!strcmp(cycles_error_details_json(err), want), "%s", cycles_error_details_json(err));
    cycles_error_free(err);
}

static void corrupt_and_unsupported_quarantined(void) {
    const char *url = cycles_local_server_url(S), *api_key = cycles_local_server_api_key(S),
               *tenant = cycles_local_server_tenant(S);
    char *part = fingerprint(url, api_key, tenant);
    char rid[256], text[1024];
    reserve_direct("d5-reserve", rid, sizeof rid);
    const char *key = "d5-python-sdk-key";
    char *valid = in_part(NULL, rid, false), *corrupt = in_part(NULL, "rsv-corrupt", false),
         *future = in_part(NULL, "rsv-future", false);
    python_sdk_record(text, sizeof text, rid, url, key, 300);
    tj_put(&J, url, api_key, tenant, valid, text, strlen(text));
    const char *corrupt_text = "{\"version\": 1, \"reserv";
    const char *future_text = "{\"version\": 2, \"reservation_id\": \"rsv-future\", \"payload\": {}}";
    tj_put(&J, url, api_key, tenant, corrupt, corrupt_text, strlen(corrupt_text));
    tj_put(&J, url, api_key, tenant, future, future_text, strlen(future_text));
    expect_journal_error(corrupt_text, "corrupt");
    expect_journal_error(future_text, "unsupported");
    jv *p = tj_pending(&J);
    CHECK(p->n == 1 && eq(jstr(p->items[0], "reservation_id"), rid), "%s", json_dump(p));
    json_free(p);

    jv *result = run_child("restart", (spec_t){ .mode = "drain" });
    CHECK(remaining(result)->n == 0, "drained");
    /* corruption_is_reported: one event per quarantined record, naming it and its new name. */
    jv *evs = json_get(result, "events");
    int reported = 0;
    for (size_t i = 0; i < evs->n; i++) {
        jv *e = evs->items[i];
        if (!eq(jstr(e, "kind"), "journal_quarantined")) continue;
        reported++;
        const char *file = tj_located_name(&J, jstr(e, "file")), *as_name = jstr(e, "quarantined_as");
        if (strrchr(as_name, '/')) as_name = strrchr(as_name, '/') + 1;
        CHECK(eq(jstr(e, "disposition"), "quarantined"), "disposition");
        size_t len = 0;
        char *kept = tj_bytes(&J, part, as_name, true, &len);
        CHECK(kept != NULL, "quarantined as %s, kept", as_name);
        const char *why = eq(file, corrupt) ? "corrupt" : eq(file, future) ? "unsupported" : NULL;
        CHECK(why && strstr(jstr(e, "reason"), why), "reason %s for %s", jstr(e, "reason"), file);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s.%s-", file, why);
        CHECK(!strncmp(as_name, prefix, strlen(prefix)), "renamed %s", as_name);
        const char *was = eq(why, "corrupt") ? corrupt_text : future_text;
        CHECK(len == strlen(was) && !memcmp(kept, was, len), "evidence kept byte for byte");
        free(kept);
    }
    CHECK(reported == 2, "two quarantines reported: %d", reported);
    CHECK(tj_quarantined(&J) == 2, "both kept in quarantine");
    CHECK(!has_rec("rsv-corrupt") && !has_rec("rsv-future"), "moved aside");
    /* other_valid_records_still_replay: committed once, stored key, record removed. */
    const jv *settled = NULL;
    CHECK(result_events(result, "settlement_settled", NULL, &settled) == 1 && eq(jstr(settled, "reservation_id"), rid), "settled");
    json_free(result);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 1 && eq(jstr(l.items[0], "idempotency_key"), key) && jnum(l.items[0], "status", 0) == 200, "one commit");
    /* The body sent is the journaled commit body, byte for byte (as the Python SDK wrote it). */
    CHECK(strstr(jstr(l.items[0], "body"), "caf\\u00e9"), "journaled bytes replayed: %s", jstr(l.items[0], "body"));
    jlist_free(&l);
    int commits, e;
    settlements(S, rid, key, &commits, &e);
    CHECK(commits == 1 && e == 0, "once");
    CHECK(!has_rec(rid) && tj_records(&J) == 0, "removed");
    p = tj_pending(&J);
    CHECK(p->n == 0, "nothing pending");
    json_free(p);
    /* Nothing was ever sent for the quarantined records. */
    CHECK(count_ops(S, "commitReservation") == 1 && count_ops(S, "createEvent") == 0, "expected_requests: []");
    free(valid); free(corrupt); free(future); free(part);
}

/* -- CR-DURABLE-006 ---------------------------------------------------------------------- */

static void release_together(child *w, size_t n, const char *go) {
    for (size_t i = 0; i < n; i++) {
        char ready[600];
        snprintf(ready, sizeof ready, "%s.ready", w[i].result);
        WAIT_FOR(30, "the workers to be ready", exists(ready));
    }
    write_file(go, "", 0);
}

static void pending_commit(const char *rkey, int amount, char *rid, size_t n) {
    add_fault(S, "commitReservation", "{\"kind\":\"server_error\",\"status\":500}", NULL);
    jv *r0 = run_child("p0", (spec_t){ .mode = "settle", .key = rkey, .amount = amount, .max_attempts = 1 });
    CHECK(eq(jstr(json_get(out_of(r0), "settlement"), "status"), "pending"), "pending");
    snprintf(rid, n, "%s", jstr(out_of(r0), "reservation_id"));
    json_free(r0);
    CHECK(has_rec(rid), "the journal contains the commit");
}

static void two_processes_replaying_one_journal(void) {
    const char *key = "d6a:commit";
    char rid[256], go[600];
    pending_commit("d6a", 300, rid, sizeof rid);
    add_fault(S, "commitReservation", "{\"kind\":\"delay\",\"ms\":400}", NULL);
    snprintf(go, sizeof go, "%s/go-a", TMP);
    child w[2];
    spawn(&w[0], "w0", (spec_t){ .mode = "drain", .go = go });
    spawn(&w[1], "w1", (spec_t){ .mode = "drain", .go = go });
    release_together(w, 2, go);
    size_t settled = 0;
    for (int i = 0; i < 2; i++) {
        jv *r = child_finish(&w[i], 60);
        settled += result_events(r, "settlement_settled", rid, NULL);
        jv *rem = remaining(r);
        CHECK(rem->n == 0 || (rem->n == 1 && eq(jstr(rem->items[0], "reservation_id"), rid)), "remaining");
        json_free(r);
    }
    CHECK(settled == 1, "settled by one of them: %zu", settled);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 2, "commit (500), concurrent_commit_same_key: %zu", l.n);
    for (size_t i = 0; i < 2; i++)
        CHECK(eq(jstr(l.items[i], "operation"), "commitReservation") && eq(jstr(l.items[i], "idempotency_key"), key), "key");
    CHECK(jnum(l.items[1], "status", 0) == 200, "200");
    jlist_free(&l);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "settled at most once");
    CHECK(!has_rec(rid) && tj_records(&J) == 0, "the terminal record is removed");
}

static void two_processes_with_copies_commit_once(void) {
    const char *key = "d6b:commit", *url = cycles_local_server_url(S), *api_key = cycles_local_server_api_key(S),
               *tenant = cycles_local_server_tenant(S);
    char rid[256], go[600];
    pending_commit("d6b", 300, rid, sizeof rid);
    /* The record copied to two hosts' journals (two directories, or two Redis), and moved
     * out of the one that wrote it. */
    size_t len = 0;
    char *data = tj_record_bytes(&J, url, api_key, tenant, rid, &len), *name = in_part(NULL, rid, false);
    test_journal hosts[2];
    for (int i = 0; i < 2; i++) {
        char d[600];
        snprintf(d, sizeof d, "%s/host-%c", TMP, 'a' + i);
        tj_open(&hosts[i], d, tj_on_redis());
        tj_put(&hosts[i], url, api_key, tenant, name, data, len);
    }
    tj_remove(&J, url, api_key, tenant, rid);
    free(data);
    free(name);
    add_fault(S, "commitReservation", "{\"kind\":\"hold\",\"ms\":10000}", NULL);
    snprintf(go, sizeof go, "%s/go-b", TMP);
    child w[2];
    spawn(&w[0], "h0", (spec_t){ .mode = "drain", .go = go, .journal = &hosts[0] });
    spawn(&w[1], "h1", (spec_t){ .mode = "drain", .go = go, .journal = &hosts[1] });
    release_together(w, 2, go);
    for (int i = 0; i < 2; i++) {
        jv *r = child_finish(&w[i], 60);
        const jv *settled = NULL;
        CHECK(remaining(r)->n == 0, "drained");
        CHECK(result_events(r, "settlement_settled", NULL, &settled) == 1 && eq(jstr(settled, "reservation_id"), rid), "both settle");
        json_free(r);
    }
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n == 3, "%zu", l.n); /* process 0's 500, then the two concurrent commits */
    int replays = 0;
    for (size_t i = 1; i < 3; i++) {
        CHECK(eq(jstr(l.items[i], "idempotency_key"), key) && jnum(l.items[i], "status", 0) == 200, "same key, 200");
        replays += jbool(l.items[i], "replay");
    }
    long long gap = jnum(l.items[2], "received_mono_us", 0) - jnum(l.items[1], "received_mono_us", 0);
    CHECK(gap < 10000000, "the second commit arrived while the first was held (%lld us)", gap);
    CHECK(replays == 1, "one applied, one replayed");
    jlist_free(&l);
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "applied once");
    for (int i = 0; i < 2; i++) {
        CHECK(tj_records(&hosts[i]) == 0, "both terminal records removed");
        CHECK(tj_dir_untouched(&hosts[i]), "nothing written into an unused directory");
        tj_close(&hosts[i]);
    }
    CHECK(tj_records(&J) == 0, "nothing left where it was written");
}

/* -- CR-DURABLE-007 ---------------------------------------------------------------------- */

/* The distinct ids a lossy scheme merges, composed/decomposed forms, emoji, path characters. */
static const char *TRICKY[] = { "rsv/a", "rsv_a", "rsv.a", "rsv a", "rsv:a", "rsv%2Fa", "RSV/A", "rsv/a ", " rsv/a",
                                "r\xc3\xa9sum\xc3\xa9", "re\xcc\x81sume\xcc\x81", "\xd1\x80\xd1\x81\xd0\xb2",
                                "\xe4\xba\x88\xe7\xb4\x84-1", "\xf0\x9f\x92\xb8", "rsv\\a", "../rsv" };
#define N_TRICKY (sizeof TRICKY / sizeof *TRICKY)

static void file_names_are_sha256_of_the_exact_id(void) {
    /* sha256 computed independently (Python hashlib) of the exact UTF-8 ids; the distinct ids
     * a lossy scheme merges, composed/decomposed forms, emoji, and a 300-char id. */
    static const char *ids[][2] = {
        { "rsv/a", "e3edb9ca022de3c9c90c5667d47fa66448cee1f254e488a761313faee34141d7" },
    };
    char *name = NULL;
    OK(cycles_journal_file_name(ids[0][0], &name, &ERR));
    char want[128];
    snprintf(want, sizeof want, "v2-%s.json", ids[0][1]);
    CHECK(!strcmp(name, want), "%s", name);
    cycles_string_free(name);
    const char **tricky = TRICKY;
    size_t n = N_TRICKY;
    char names[N_TRICKY][80];
    for (size_t i = 0; i < n; i++) {
        OK(cycles_journal_file_name(tricky[i], &name, &ERR));
        CHECK(strlen(name) == 3 + 64 + 5 && !strncmp(name, "v2-", 3) && !strcmp(name + 67, ".json"), "%s", name);
        for (size_t k = 3; k < 67; k++) CHECK(strchr("0123456789abcdef", name[k]) != NULL, "lowercase hex: %s", name);
        snprintf(names[i], sizeof names[i], "%s", name);
        cycles_string_free(name);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]) != 0, "distinct ids, distinct files: %zu %zu", i, j);
    }
    /* The legacy scheme is lossy: these collide there, and only there. */
    char *l0 = NULL, *l1 = NULL;
    OK(cycles_journal_legacy_file_name("rsv/a", &l0, &ERR));
    for (size_t i = 1; i < 4; i++) {
        OK(cycles_journal_legacy_file_name(tricky[i], &l1, &ERR));
        CHECK(!strcmp(l0, l1), "legacy collision %s %s", l0, l1);
        cycles_string_free(l1);
    }
    cycles_string_free(l0);
}

/* CR-DURABLE-007 on Redis, which has no legacy names: the records the library journals for the
 * tricky ids (each assigned by the server) are keyed by the file store's name of the exact id,
 * one key each, in the identity's partition; each reads back as its own, and a fresh client
 * replays them all, each with its own key. Always on a Redis of its own. */
static void redis_record_keys_are_the_file_names_of_the_exact_ids(void) {
    const char *url = cycles_local_server_url(S), *api_key = cycles_local_server_api_key(S),
               *tenant = cycles_local_server_tenant(S);
    CHECK(J.url[0], "this test journals to Redis");
    cycles_client *c = client_in(&J, "\"settle_max_attempts\":1", NULL);
    for (size_t i = 0; i < N_TRICKY; i++) {
        jv id = { .kind = J_STR, .text = (char *)TRICKY[i], .len = strlen(TRICKY[i]) };
        char *quoted = json_dump(&id), fault[256], key[32], rid[256];
        snprintf(fault, sizeof fault, "{\"kind\":\"reservation_id\",\"id\":%s}", quoted);
        free(quoted);
        add_fault(S, "createReservation", fault, NULL);
        add_fault(S, "commitReservation", "{\"kind\":\"server_error\",\"status\":503}", NULL);
        snprintf(key, sizeof key, "d7r-%zu", i);
        jv *o = settle(c, key, 100 + (int64_t)i, rid, sizeof rid);
        CHECK(!strcmp(rid, TRICKY[i]), "the server assigned %s: %s", TRICKY[i], rid);
        CHECK(eq(settlement_status(o), "pending") && jbool(json_get(o, "settlement"), "journaled"), "%s", json_dump(o));
        json_free(o);
    }
    close_client(c);
    char *part = fingerprint(url, api_key, tenant);
    tj_entry *all;
    size_t n = tj_list(&J, false, &all);
    CHECK(n == N_TRICKY, "one key per id: %zu keys for %zu ids", n, N_TRICKY);
    for (size_t i = 0; i < n; i++) CHECK(!strcmp(all[i].part, part), "in the identity's partition: %s", all[i].part);
    tj_list_free(all, n);
    free(part);
    for (size_t i = 0; i < N_TRICKY; i++) {
        /* Read at cycles:journal:{<partition>}:r:<cycles_journal_file_name(id)>. */
        jv *rec = tj_record(&J, url, api_key, tenant, TRICKY[i]);
        char key[40];
        snprintf(key, sizeof key, "d7r-%zu:commit", i);
        CHECK(rec && eq(jstr(rec, "reservation_id"), TRICKY[i]) && eq(jstr(rec, "idempotency_key"), key),
              "the record of %s under its own name", TRICKY[i]);
        json_free(rec);
    }
    cycles_client *fresh = client_in(&J, NULL, NULL);
    char *report = NULL;
    OK(cycles_client_drain(fresh, 20000, &report, &ERR));
    close_client(fresh);
    CHECK(strstr(report, "\"remaining\":[]"), "%s", report);
    cycles_string_free(report);
    for (size_t i = 0; i < N_TRICKY; i++) {
        char key[40];
        snprintf(key, sizeof key, "d7r-%zu:commit", i);
        int commits, evs;
        settlements(S, TRICKY[i], key, &commits, &evs);
        CHECK(commits == 1 && evs == 0, "%s settled once with its own key", TRICKY[i]);
    }
    CHECK(tj_records(&J) == 0, "every record removed");
}

/* Legacy names exist only in the file store: this test journals to the directory whatever
 * CYCLES_TEST_JOURNAL_STORE says (the Redis claim maps CR-DURABLE-007 to the test above). */
static void legacy_record_migrates_without_deleting_a_collider(void) {
    const char *url = cycles_local_server_url(S);
    char *part = partition_dir(DIR_, url, cycles_local_server_api_key(S), cycles_local_server_tenant(S));
    events *ev = events_new();
    cycles_client *c = client_in(&J, "\"settle_max_attempts\":1", ev);
    cycles_reserve r = reserve_of("d7-r");
    cycles_guard *g = NULL;
    OK(cycles_guard_begin(c, &r, &g, &ERR));
    char rid[256], collider[256], c_text[1024];
    snprintf(rid, sizeof rid, "%s", cycles_guard_reservation_id(g));
    /* C differs from R, yet the lossy legacy scheme names both the same. */
    snprintf(collider, sizeof collider, "%s", rid);
    *strchr(collider, '_') = '.';
    char *legacy = in_part(part, rid, true), *legacy_c = in_part(part, collider, true);
    CHECK(!strcmp(legacy, legacy_c), "collide: %s %s", legacy, legacy_c);
    free(legacy_c);
    mkdir(DIR_, 0700);
    mkdir(part, 0700);
    python_sdk_record(c_text, sizeof c_text, collider, "http://127.0.0.1:9", "d7-collider-key", 111);
    write_file(legacy, c_text, strlen(c_text));
    add_fault(S, "commitReservation", "{\"kind\":\"server_error\",\"status\":503}", rid);
    OK(cycles_guard_set_actual(g, 400, &ERR));
    char *json = NULL;
    OK(cycles_guard_finish(g, true, NULL, &json, &ERR));
    cycles_guard_free(g);
    jv *o = json_parse(json);
    CHECK(eq(settlement_status(o), "pending") && jbool(json_get(o, "settlement"), "journaled"), "%s", json);
    json_free(o);
    cycles_string_free(json);
    char *standard = in_part(part, rid, false);
    CHECK(exists(standard) && record_files(DIR_) == 2, "two ids, two files");
    jv *rec = read_record(standard);
    CHECK(eq(jstr(rec, "reservation_id"), rid) && eq(jstr(rec, "idempotency_key"), "d7-r:commit"), "R's own record");
    json_free(rec);
    char *now = read_file(legacy, NULL);
    CHECK(!strcmp(now, c_text), "the colliding record is neither read nor touched");
    free(now);

    /* A matching legacy record of a real reservation R2 (as an older SDK named it). */
    char rid2[256], t2[1024];
    reserve_direct("d7-r2", rid2, sizeof rid2);
    char *legacy2 = in_part(part, rid2, true), *standard2 = in_part(part, rid2, false);
    python_sdk_record(t2, sizeof t2, rid2, url, "d7-r2-key", 222);
    write_file(legacy2, t2, strlen(t2));
    char *pending = NULL;
    OK(cycles_journal_pending(DIR_, NULL, NULL, NULL, &pending, &ERR));
    jv *p = json_parse(pending);
    CHECK(p->n == 3, "%s", pending);
    for (size_t i = 0; i < p->n; i++) {
        const char *id = jstr(p->items[i], "reservation_id");
        CHECK(eq(id, rid) ? !jbool(p->items[i], "legacy") : jbool(p->items[i], "legacy"), "legacy flags %s", pending);
        CHECK(eq(id, rid) || eq(id, rid2) || eq(id, collider), "%s", id);
    }
    json_free(p);
    cycles_string_free(pending);
    char *report = NULL;
    OK(cycles_client_flush(c, &report, &ERR));
    cycles_string_free(report);
    close_client(c); /* delivers every event; C stays journaled */

    int commits, evs;
    settlements(S, rid, "d7-r:commit", &commits, &evs);
    CHECK(commits == 1 && evs == 0, "R settled once with ITS key");
    CHECK(!exists(standard), "R's record is gone");
    settlements(S, rid2, "d7-r2-key", &commits, &evs);
    CHECK(commits == 1 && evs == 0, "R2 settled once with the stored key");
    CHECK(!exists(legacy2) && !exists(standard2), "no file of R2 is left");
    now = read_file(legacy, NULL);
    CHECK(now && !strcmp(now, c_text), "a colliding legacy record is never deleted");
    free(now);
    CHECK(record_files(DIR_) == 1, "only C's record is left");
    OK(cycles_journal_pending(DIR_, NULL, NULL, NULL, &pending, &ERR));
    p = json_parse(pending);
    CHECK(p->n == 1 && eq(jstr(p->items[0], "reservation_id"), collider) && jbool(p->items[0], "legacy") &&
              eq(jstr(p->items[0], "file"), strrchr(legacy, '/') + 1),
          "%s", pending);
    json_free(p);
    cycles_string_free(pending);
    CHECK(events_count(ev, "journal_migrated", NULL) == 1 && events_count(ev, "journal_migrated", rid2) == 1, "migrated R2");
    jlist l = settlement_requests(S, collider, "d7-collider-key");
    CHECK(l.n == 0, "never sent");
    jlist_free(&l);
    events_free(ev);
    free(legacy); free(legacy2); free(standard); free(standard2); free(part);
}

/* -------------------------------------------------------------------------------------- */

/* Where a test's journal J is: the store CYCLES_TEST_JOURNAL_STORE names, or always the
 * directory, or always a Redis of the test's own. */
typedef enum { STORE_TESTED, STORE_DIR, STORE_REDIS } store_t;

typedef struct {
    const char *name;
    void (*run)(void);
    const char *server_config; /* NULL: defaults; "" : no server */
    store_t store;
} test_t;

static const test_t TESTS[] = {
    { "lost_commit_response_is_retried_with_the_same_key_and_applied_once", lost_commit_response, NULL,
      STORE_TESTED },
    { "expired_commit_falls_back_to_one_event_with_the_original_subject_action_and_actual",
      expired_commit_falls_back_to_event, NULL, STORE_TESTED },
    { "heartbeat_transport_failure_is_observable_and_non_fatal", heartbeat_transport_failure, NULL, STORE_TESTED },
    { "protocol_invalid_commit_success_stays_ambiguous_and_is_retried_with_its_key", protocol_invalid_commit_success,
      NULL, STORE_TESTED },
    { "protocol_invalid_event_success_stays_ambiguous_and_is_retried_with_its_key", protocol_invalid_event_success,
      NULL, STORE_TESTED },
    { "missing_actual_is_surfaced_without_settlement", missing_actual, NULL, STORE_TESTED },
    { "first_commit_is_journaled_before_it_leaves_and_replayed_after_sigkill",
      first_commit_journaled_and_replayed_after_sigkill, NULL, STORE_TESTED },
    { "replayed_expired_commit_switches_durably_to_event_mode_across_sigkill", expired_replay_switches_durably_to_event,
      NULL, STORE_TESTED },
    { "rate_limit_floor_survives_sigkill_and_restart", rate_limit_floor_survives_sigkill, NULL, STORE_TESTED },
    { "tenant_journal_survives_api_key_rotation_across_processes", tenant_journal_survives_key_rotation,
      "{\"tenants\":[{\"id\":\"acme\",\"api_keys\":[\"old-key\",\"new-key\"]}]}", STORE_TESTED },
    { "corrupt_and_unsupported_records_are_quarantined_and_valid_records_still_replay",
      corrupt_and_unsupported_quarantined, NULL, STORE_TESTED },
    { "two_processes_replaying_one_journal_settle_the_record_once", two_processes_replaying_one_journal, NULL,
      STORE_TESTED },
    { "two_processes_with_copies_of_one_record_commit_concurrently_once", two_processes_with_copies_commit_once, NULL,
      STORE_TESTED },
    { "journal_file_names_are_sha256_of_the_exact_utf8_id_and_never_shared", file_names_are_sha256_of_the_exact_id, "",
      STORE_DIR },
    { "redis_record_keys_are_the_file_names_of_the_exact_ids", redis_record_keys_are_the_file_names_of_the_exact_ids,
      NULL, STORE_REDIS },
    { "legacy_record_migrates_to_its_standard_name_without_deleting_a_colliding_record",
      legacy_record_migrates_without_deleting_a_collider, NULL, STORE_DIR },
};

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) return child_main(argv[2]);
    size_t n = sizeof TESTS / sizeof *TESTS;
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < n; i++) printf("%s\n", TESTS[i].name);
        return 0;
    }
    CHECK(argc == 2, "usage: test_recovery NAME | --list | child SPEC");
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], TESTS[i].name)) continue;
        store_t store = TESTS[i].store;
        bool redis = store == STORE_REDIS || (store == STORE_TESTED && tj_on_redis());
        TMP = make_temp_dir();
        snprintf(DIR_, sizeof DIR_, "%s/journal", TMP);
        tj_open(&J, DIR_, redis);
        const char *cfg = TESTS[i].server_config;
        if (!cfg || cfg[0]) OK(cycles_local_server_start(cfg, &S, &ERR));
        TESTS[i].run();
        if (S) {
            OK(cycles_local_server_stop(S, &ERR));
            cycles_local_server_free(S);
        }
        CHECK(tj_dir_untouched(&J), "a Redis journal wrote nothing into the directory %s", DIR_);
        tj_close(&J);
        remove_tree(TMP);
        free(TMP);
        OK(cycles_shutdown(1000, NULL, &ERR));
        printf("recovery %s: ok\n", TESTS[i].name);
        return 0;
    }
    CHECK(0, "no test named %s", argv[1]);
}
