/* Every case of conformance/vectors/heartbeat.json, journal.json and pricing.json through the C
 * timing, journal and pricing exports, compared exactly; the number of cases run is asserted
 * against the files.
 * Usage: test_vectors <conformance/vectors dir> */
#include <string.h>

#include "check.h"
#include "json.h"

static cycles_error *ERR;
static int cases;

/* The library's JSON result of one call, parsed (the string freed). */
static jv *result(char *text) {
    jv *v = json_parse(text);
    CHECK(v != NULL, "unparsable result %s", text);
    cycles_string_free(text);
    return v;
}

static jv *timing(const char *fn, const jv *args) {
    char *a = json_dump(args), *out = NULL;
    OK(cycles_timing_call(fn, a, &out, &ERR));
    free(a);
    return result(out);
}

/* `want` (a vector number) equals the result `got`. */
static void same(const char *c, const char *what, const jv *want, const jv *got) {
    char *w = json_dump(want), *g = json_dump(got);
    CHECK(json_equal(want, got), "%s %s: want %s got %s", c, what, w, g);
    free(w); free(g);
}

static const char *name(const jv *c) { jv *n = json_get(c, "name"); return n && n->kind == J_STR ? n->text : "?"; }

static void schedule(const jv *c) {
    jv *in = json_get(c, "input"), *e = json_get(c, "expect"), *s = timing("schedule", in);
    const char *keys[] = { "lead_floor_ms", "attempt_budget_ms", "safety_margin_ms", "retry_reserve_ms", "next_delay_ms" };
    for (int i = 0; i < 5; i++) same(name(c), keys[i], json_get(e, keys[i]), json_get(s, keys[i]));
    json_free(s);
}

static void retry_after(const jv *c) {
    /* {"raw": <the case's raw>} */
    char *raw = json_dump(json_get(c, "raw")), buf[512];
    snprintf(buf, sizeof buf, "{\"raw\":%s}", raw);
    free(raw);
    char *out = NULL;
    OK(cycles_timing_call("parse_retry_after", buf, &out, &ERR));
    jv *r = result(out);
    same(buf, "kind", json_get(c, "kind"), json_get(r, "kind"));
    same(buf, "ms", json_get(c, "ms"), json_get(r, "ms"));
    json_free(r);
}

static void retry(const jv *c) {
    jv *in = json_get(c, "input"), *e = json_get(c, "expect");
    char buf[1024], *a, *b;
    a = json_dump(json_get(in, "last_lead_floor_ms")); b = json_dump(json_get(in, "elapsed_ms"));
    snprintf(buf, sizeof buf, "{\"last_lead_floor_ms\":%s,\"elapsed_ms\":%s}", a, b);
    free(a); free(b);
    char *out = NULL;
    OK(cycles_timing_call("current_lead_estimate", buf, &out, &ERR));
    jv *est = result(out);
    same(name(c), "current_lead_estimate_ms", json_get(e, "current_lead_estimate_ms"), est);
    char *es = json_dump(est), *ab = json_dump(json_get(in, "attempt_budget_ms")), *sm = json_dump(json_get(in, "safety_margin_ms"));
    snprintf(buf, sizeof buf, "{\"current_lead_estimate_ms\":%s,\"attempt_budget_ms\":%s,\"safety_margin_ms\":%s}", es, ab, sm);
    free(ab); free(sm);
    OK(cycles_timing_call("retry_window", buf, &out, &ERR));
    jv *win = result(out);
    same(name(c), "retry_window_ms", json_get(e, "retry_window_ms"), win);
    jv *want_delay = json_get(e, "transient_retry_delay_ms");
    char *ws_ = json_dump(win);
    if (want_delay->kind == J_NULL) {
        CHECK(ws_[0] == '-' || (ws_[0] == '"' && ws_[1] == '-'), "%s: a null delay needs a negative window, got %s", name(c), ws_);
    } else {
        snprintf(buf, sizeof buf, "{\"current_lead_estimate_ms\":%s,\"retry_window_ms\":%s}", es, ws_);
        OK(cycles_timing_call("transient_retry_delay", buf, &out, &ERR));
        jv *d = result(out);
        same(name(c), "transient_retry_delay_ms", want_delay, d);
        json_free(d);
    }
    free(es); free(ws_);
    json_free(est); json_free(win);
}

/* A decision against the vector's: extend (delay, key) or stop (reason, code, status). */
static void decision(const char *c, const jv *want, const jv *got) {
    jv *we = json_get(want, "extend");
    if (we) {
        jv *ge = json_get(got, "extend");
        CHECK(ge != NULL, "%s: want extend, got %s", c, json_dump(got));
        same(c, "delay_ms", json_get(we, "delay_ms"), json_get(ge, "delay_ms"));
        same(c, "key", json_get(we, "key"), json_get(ge, "key"));
        return;
    }
    same(c, "stop", json_get(want, "stop"), json_get(got, "stop"));
    if (json_get(want, "code")) same(c, "code", json_get(want, "code"), json_get(got, "code"));
    if (json_get(want, "status")) same(c, "status", json_get(want, "status"), json_get(got, "status"));
}

static void planner(const jv *c, bool derived) {
    jv *steps = json_get(c, "steps"), *expect = json_get(c, "expect");
    CHECK(steps->n == expect->n, "%s: steps and expectations differ in number", name(c));
    char *t = json_dump(json_get(c, derived ? "configured_timeout_ms" : "request_timeout_ms"));
    cycles_primary_planner *p = NULL;
    OK(cycles_primary_planner_new(t, derived, &p, &ERR));
    free(t);
    for (size_t i = 0; i < steps->n; i++) {
        char *s = json_dump(steps->items[i]), *out = NULL;
        OK(cycles_primary_planner_step(p, s, &out, &ERR));
        free(s);
        jv *d = result(out);
        decision(name(c), expect->items[i], d);
        json_free(d);
        if (derived) {
            OK(cycles_primary_planner_attempt_timeout(p, &out, &ERR));
            jv *at = result(out);
            same(name(c), "attempt_timeout_ms", json_get(expect->items[i], "attempt_timeout_ms"), at);
            json_free(at);
        }
    }
    cycles_primary_planner_free(p);
}

static long long num(const jv *v) { return strtoll(v->text, NULL, 10); }

static void fallback(const jv *c) {
    jv *create = json_get(c, "create"), *e = json_get(c, "expect"), *steps = json_get(c, "steps");
    jv *decisions = json_get(e, "decisions"), *regimes = json_get(e, "regimes");
    cycles_fallback_planner *p = NULL;
    OK(cycles_fallback_planner_new((uint64_t)num(json_get(c, "requested_ttl_ms")), (uint64_t)num(json_get(create, "at_us")),
                                   num(json_get(create, "expires_at_ms")), &p, &ERR));
    char *out = NULL;
    OK(cycles_fallback_planner_first_beat(p, json_get(c, "prime")->b, &out, &ERR));
    jv *d = result(out);
    decision(name(c), json_get(e, "first_beat"), d);
    json_free(d);
    CHECK(steps->n == decisions->n, "%s: steps and decisions differ in number", name(c));
    long long last_at = num(json_get(create, "at_us"));
    for (size_t i = 0; i < steps->n; i++) {
        char *s = json_dump(steps->items[i]);
        last_at = num(json_get(steps->items[i], "at_us"));
        OK(cycles_fallback_planner_step(p, s, &out, &ERR));
        free(s);
        d = result(out);
        decision(name(c), decisions->items[i], d);
        json_free(d);
        if (regimes && i < regimes->n)
            CHECK(json_is(regimes->items[i], cycles_fallback_planner_regime(p)), "%s: regime %s", name(c), cycles_fallback_planner_regime(p));
    }
    jv *fl = json_get(e, "final_lead_min_ms");
    if (fl) {
        int64_t lead = 0;
        CHECK(cycles_fallback_planner_lead_min_ms(p, (uint64_t)last_at, &lead), "%s: lead out of range", name(c));
        CHECK(lead == num(fl), "%s: final lead %lld", name(c), (long long)lead);
    }
    cycles_fallback_planner_free(p);
}

static void extend_timeout(const jv *c) {
    jv *e = json_get(c, "expect"), *t = timing("extend_timeout", json_get(c, "input"));
    const char *keys[] = { "source", "timeout_ms", "min_lead_floor_ms", "max_keeping_timeout_ms", "target_timeout_ms", "attempt_cutoff_ms" };
    for (int i = 0; i < 6; i++) same(name(c), keys[i], json_get(e, keys[i]), json_get(t, keys[i]));
    json_free(t);
}

static size_t run_section(const jv *doc, const char *section, void (*f)(const jv *)) {
    jv *s = json_get(doc, section);
    CHECK(s && s->kind == J_ARR && s->n > 0, "section %s missing or empty", section);
    for (size_t i = 0; i < s->n; i++) { f(s->items[i]); cases++; }
    return s->n;
}

static void planner_plain(const jv *c) { planner(c, false); }
static void planner_derived(const jv *c) { planner(c, true); }

/* Journal vectors. */
static void jok(cycles_status st) { CHECK(st == CYCLES_OK, "journal call: %s", cycles_error_json(ERR)); }

static void partition(const jv *c) {
    jv *t = json_get(c, "tenant");
    char *fp = NULL;
    jok(cycles_journal_fingerprint(json_get(c, "base_url")->text, json_get(c, "api_key")->text,
                                   t->kind == J_NULL ? NULL : t->text, &fp, &ERR));
    CHECK(json_is(json_get(c, "fp16"), fp), "fingerprint %s", fp);
    cycles_string_free(fp);
}

static void file_names(const jv *c) {
    const char *rid = json_get(c, "reservation_id")->text;
    char *std_ = NULL, *legacy = NULL;
    jok(cycles_journal_file_name(rid, &std_, &ERR));
    jok(cycles_journal_legacy_file_name(rid, &legacy, &ERR));
    CHECK(json_is(json_get(c, "standard"), std_), "%s: %s", rid, std_);
    CHECK(json_is(json_get(c, "legacy"), legacy), "%s: %s", rid, legacy);
    cycles_string_free(std_);
    cycles_string_free(legacy);
}

static void record(const jv *c) {
    jv *e = json_get(c, "expect"), *text = json_get(c, "text");
    char *out = NULL;
    cycles_error *err = NULL;
    cycles_status st = cycles_journal_parse_record((const uint8_t *)text->text, text->len, &out, &err);
    if (!json_get(e, "ok")->b) {
        CHECK(st == CYCLES_INVALID_ARGUMENT && out == NULL, "%s: parsed a bad record", name(c));
        char want[128], prefix[64];
        snprintf(want, sizeof want, "{\"journal_error\":\"%s\"}", json_get(e, "error")->text);
        snprintf(prefix, sizeof prefix, "%s record: ", json_get(e, "error")->text);
        CHECK(!strcmp(cycles_error_details_json(err), want), "%s: details %s", name(c), cycles_error_details_json(err));
        CHECK(!strncmp(cycles_error_message(err), prefix, strlen(prefix)), "%s: message %s", name(c), cycles_error_message(err));
        cycles_error_free(err);
        return;
    }
    CHECK(st == CYCLES_OK, "%s: %s", name(c), cycles_error_json(err));
    jv *r = result(out);
    const char *keys[] = { "reservation_id", "base_url", "mode", "idempotency_key", "recorded_at_ms", "not_before_ms", "extra_keys" };
    for (int i = 0; i < 7; i++) same(name(c), keys[i], json_get(e, keys[i]), json_get(r, keys[i]));
    CHECK(!strcmp(json_get(r, "version")->text, "1"), "%s: version", name(c));
    same(name(c), "commit_body_wire", json_get(e, "commit_body_wire"), json_get(r, "commit_body"));
    same(name(c), "event_fallback_body_wire", json_get(e, "event_fallback_body_wire"), json_get(r, "event_fallback_body"));
    const char *bodies[][2] = { { "commit_body", "commit_body" }, { "event_fallback_body", "event_fallback_body" } };
    for (int i = 0; i < 2; i++) {
        jv *want = json_get(e, bodies[i][0]), *got = json_get(r, bodies[i][1]);
        if (!want) continue;
        if (want->kind == J_NULL) { CHECK(got->kind == J_NULL, "%s: %s not null", name(c), bodies[i][0]); continue; }
        jv *parsed = json_parse(got->text);
        CHECK(parsed != NULL, "%s: body not JSON", name(c));
        same(name(c), bodies[i][0], want, parsed);
        json_free(parsed);
    }
    json_free(r);
}

/* Pricing vectors: one function per section; `expect` is the exact result, `error` the kind
 * and a part of the message. */
static const char *pricing_fn;

static void pricing_case(const jv *c) {
    char *a = json_dump(json_get(c, "input")), *out = NULL;
    cycles_status st = cycles_pricing_call(pricing_fn, a, &out, &ERR);
    free(a);
    jv *want = json_get(c, "expect"), *err = json_get(c, "error");
    CHECK((want == NULL) != (err == NULL), "%s %s: exactly one of expect and error", pricing_fn, name(c));
    if (want) {
        CHECK(st == CYCLES_OK, "%s %s: %s", pricing_fn, name(c), cycles_error_json(ERR));
        jv *got = result(out);
        same(name(c), pricing_fn, want, got);
        json_free(got);
        return;
    }
    CHECK(st == CYCLES_INVALID_ARGUMENT && out == NULL, "%s %s must fail", pricing_fn, name(c));
    CHECK(json_is(json_get(err, "kind"), cycles_error_name(ERR)), "%s %s: kind %s", pricing_fn, name(c), cycles_error_name(ERR));
    const char *part = json_get(err, "message_contains")->text;
    CHECK(strstr(cycles_error_message(ERR), part) != NULL, "%s %s: %s lacks %s", pricing_fn, name(c), cycles_error_message(ERR), part);
    cycles_error_free(ERR);
    ERR = NULL;
}

/* Every function the C library documents has a section, and the file names no other. */
static size_t pricing(const jv *doc) {
    static const char *fns[] = { "text_tokens", "prompt_texts", "prompt_tokens", "output_bound", "lookup_price", "cost",
        "estimate", "estimate_request", "actual", "settlement", "lower_bound", "tool_allowed",
        "filter_tools", "plan_caps", "usage", "stream_request", "call_failed",
        "observe" };
    const size_t n = sizeof fns / sizeof fns[0];
    jv *f = json_get(doc, "functions");
    CHECK(f && f->kind == J_OBJ && f->n == n, "pricing.json has %zu functions, this test knows %zu", f ? f->n : 0, n);
    size_t want = 0;
    for (size_t i = 0; i < n; i++) {
        pricing_fn = fns[i];
        want += run_section(f, fns[i], pricing_case);
    }
    return want;
}

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: test_vectors <vectors dir>");
    char path[4096];
    snprintf(path, sizeof path, "%s/heartbeat.json", argv[1]);
    char *text = read_file(path, NULL);
    CHECK(text != NULL, "cannot read %s", path);
    jv *doc = json_parse(text);
    CHECK(doc != NULL, "cannot parse %s", path);
    CHECK(json_is(json_get(doc, "format"), "cycles-heartbeat-vectors"), "format");
    /* Every section is run: a new section needs a test here. */
    const char *known[] = { "format", "version", "about", "schedule", "retry_after", "retry", "planner", "fallback", "extend_timeout", "planner_derived" };
    CHECK(doc->n == 10, "heartbeat.json has %zu sections, this test knows 10", doc->n);
    for (size_t i = 0; i < 10; i++) CHECK(json_get(doc, known[i]) != NULL, "section %s missing", known[i]);
    size_t want = 0;
    want += run_section(doc, "schedule", schedule);
    want += run_section(doc, "retry_after", retry_after);
    want += run_section(doc, "retry", retry);
    want += run_section(doc, "planner", planner_plain);
    want += run_section(doc, "fallback", fallback);
    want += run_section(doc, "extend_timeout", extend_timeout);
    want += run_section(doc, "planner_derived", planner_derived);
    int heartbeat = cases;
    CHECK((size_t)heartbeat == want && heartbeat > 0, "ran %d of %zu heartbeat cases", heartbeat, want);
    json_free(doc);
    free(text);

    snprintf(path, sizeof path, "%s/journal.json", argv[1]);
    text = read_file(path, NULL);
    CHECK(text != NULL, "cannot read %s", path);
    doc = json_parse(text);
    CHECK(doc != NULL && doc->n == 4, "journal.json: 4 sections expected");
    want = run_section(doc, "partition", partition) + run_section(doc, "file_names", file_names) +
           run_section(doc, "records", record);
    int journal = cases - heartbeat;
    CHECK((size_t)journal == want, "ran %d of %zu journal cases", journal, want);
    json_free(doc);
    free(text);

    snprintf(path, sizeof path, "%s/pricing.json", argv[1]);
    text = read_file(path, NULL);
    CHECK(text != NULL, "cannot read %s", path);
    doc = json_parse(text);
    CHECK(doc != NULL && json_is(json_get(doc, "format"), "cycles-pricing-vectors"), "pricing.json format");
    want = pricing(doc);
    int priced = cases - heartbeat - journal;
    CHECK((size_t)priced == want && priced > 0, "ran %d of %zu pricing cases", priced, want);
    json_free(doc);
    free(text);
    printf("heartbeat vectors: %d cases; journal vectors: %d cases; pricing vectors: %d cases\n", heartbeat, journal, priced);
    return 0;
}
