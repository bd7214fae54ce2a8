/* The captured reference-server corpus (../shared/fixtures/reference-server/exchanges.jsonl,
 * 217 exchanges) through cycles_decode_captured, core's own response path: every 2xx decodes
 * to what the server sent with its nulls dropped (status, request and trace ids from the
 * headers), every error has the kind the corpus README says, with its HTTP status, server code,
 * message, request/trace ids, details, Retry-After and retryability, as
 * core/tests/reference_corpus.rs and python/tests/test_reference_corpus.py check.
 * argv[1] is the corpus path; a missing corpus FAILS naming the path. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "check.h"
#include "json.h"

static cycles_error *ERR;

#define EXPECTED_EXCHANGES 217
#define EXPECTED_OK 109
#define EXPECTED_UNMATCHED 6

static const char *jstr(const jv *o, const char *k) {
    jv *v = json_get(o, k);
    return v && v->kind == J_STR ? v->text : NULL;
}

static bool same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* A header of the captured response (names compared case-insensitively), or NULL. */
static const char *header(const jv *headers, const char *name) {
    for (size_t i = 0; headers && i < headers->n; i++)
        if (!strcasecmp(headers->keys[i], name) && headers->items[i]->kind == J_STR) return headers->items[i]->text;
    return NULL;
}

/* Drops every null member of every object (array elements stay), in place. */
static void without_nulls(jv *v) {
    if (v->kind == J_OBJ) {
        size_t k = 0;
        for (size_t i = 0; i < v->n; i++) {
            if (v->items[i]->kind == J_NULL) {
                json_free(v->items[i]);
                free(v->keys[i]);
                continue;
            }
            without_nulls(v->items[i]);
            v->items[k] = v->items[i];
            v->keys[k] = v->keys[i];
            k++;
        }
        v->n = k;
    } else if (v->kind == J_ARR) {
        for (size_t i = 0; i < v->n; i++) without_nulls(v->items[i]);
    }
}

typedef struct {
    const char *name;
    jv *decoded; /* success: the reply; NULL for errors */
    cycles_error *err;
} result_t;

static result_t RESULTS[EXPECTED_EXCHANGES + 8];
static size_t N;

static const result_t *find(const char *name) {
    for (size_t i = 0; i < N; i++)
        if (!strcmp(RESULTS[i].name, name)) return &RESULTS[i];
    CHECK(0, "no exchange %s", name);
    return NULL;
}

static void check_success(const char *name, const jv *resp, const char *out) {
    jv *reply = json_parse(out);
    CHECK(reply != NULL, "%s: %s", name, out);
    const jv *headers = json_get(resp, "headers");
    CHECK(!strcmp(json_get(reply, "status")->text, json_get(resp, "status")->text), "%s: status", name);
    CHECK(same(jstr(reply, "request_id"), header(headers, "X-Request-Id")), "%s: request id", name);
    CHECK(same(jstr(reply, "trace_id"), header(headers, "X-Cycles-Trace-Id")), "%s: trace id", name);
    jv *sent = json_parse(jstr(resp, "body"));
    CHECK(sent != NULL, "%s: body", name);
    without_nulls(sent);
    CHECK(json_equal(json_get(reply, "body"), sent), "%s: the values survive, nulls dropped:\n%s\n%s", name,
          json_dump(json_get(reply, "body")), json_dump(sent));
    json_free(sent);
    RESULTS[N - 1].decoded = reply;
}

static void check_error(const char *name, const jv *resp, cycles_status st, cycles_error *e) {
    const jv *headers = json_get(resp, "headers");
    long status = strtol(json_get(resp, "status")->text, NULL, 10);
    jv *body = json_parse(jstr(resp, "body"));
    if (body && body->kind != J_OBJ) {
        json_free(body);
        body = NULL;
    }
    const char *code = jstr(body, "error");
    const char *kind = status == 429 ? "RATE_LIMITED"
                       : status >= 500 ? "SERVER_ERROR"
                       : code          ? code /* every code the reference server sent is a spec code */
                                       : "INVALID_REQUEST";
    CHECK(status == 429 || status >= 500 || code || status == 400, "%s: no code and status %ld", name, status);
    CHECK(!strcmp(cycles_error_name(e), kind), "%s: kind %s, want %s", name, cycles_error_name(e), kind);
    CHECK((cycles_status)cycles_error_code(e) == st && cycles_error_status(e) == st, "%s: status", name);
    CHECK(cycles_error_http_status(e) == status, "%s: http status", name);
    CHECK(same(cycles_error_server_code(e), code), "%s: server code", name);
    if (body && jstr(body, "message")) CHECK(!strcmp(cycles_error_message(e), jstr(body, "message")), "%s: message", name);
    else CHECK(strstr(cycles_error_message(e), "non-JSON") != NULL, "%s: %s", name, cycles_error_message(e));
    CHECK(same(cycles_error_request_id(e), header(headers, "X-Request-Id")), "%s: request id", name);
    CHECK(same(cycles_error_trace_id(e), header(headers, "X-Cycles-Trace-Id")), "%s: trace id", name);
    if (body) {
        CHECK(same(cycles_error_request_id(e), jstr(body, "request_id")), "%s: body request id", name);
        CHECK(same(cycles_error_trace_id(e), jstr(body, "trace_id")), "%s: body trace id", name);
    }
    jv *details = json_get(body, "details");
    if (details && details->kind != J_NULL) {
        jv *got = json_parse(cycles_error_details_json(e) ? cycles_error_details_json(e) : "null");
        CHECK(got && json_equal(got, details), "%s: details", name);
        json_free(got);
    } else {
        CHECK(cycles_error_details_json(e) == NULL, "%s: no details", name);
    }
    const jv *evidence = json_get(body, "cycles_evidence");
    CHECK(same(cycles_error_evidence_id(e), jstr(evidence, "evidence_id")), "%s: evidence id", name);
    CHECK(same(cycles_error_evidence_url(e), jstr(evidence, "cycles_evidence_url")), "%s: evidence url", name);
    const char *ra = header(headers, "Retry-After");
    CHECK(same(cycles_error_retry_after_raw(e), ra), "%s: Retry-After", name);
    uint64_t secs = 0;
    bool has = cycles_error_retry_after_seconds(e, &secs);
    if (ra) CHECK(has && secs == strtoull(ra, NULL, 10), "%s: Retry-After seconds", name);
    else CHECK(!has, "%s: no Retry-After", name);
    CHECK(cycles_error_retryable(e) == (status == 429 || status >= 500), "%s: retryable", name);
    json_free(body);
    RESULTS[N - 1].err = e;
}

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: test_corpus exchanges.jsonl");
    char *text = read_file(argv[1], NULL);
    CHECK(text != NULL,
          "the reference-server corpus is missing: %s does not exist. It lives in the shared folder next to this "
          "repository (shared/fixtures/reference-server/exchanges.jsonl); set CYCLES_REFERENCE_CORPUS to its path.",
          argv[1]);
    size_t ok = 0, failed = 0, unmatched = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        while (isspace((unsigned char)*line)) line++;
        if (!*line) continue;
        CHECK(N < EXPECTED_EXCHANGES + 8, "too many exchanges");
        jv *x = json_parse(line);
        CHECK(x != NULL, "exchange %zu is not JSON", N + 1);
        const char *name = jstr(x, "name"), *op = jstr(x, "operation");
        const jv *resp = json_get(x, "response");
        long status = strtol(json_get(resp, "status")->text, NULL, 10);
        const char *body = jstr(resp, "body");
        char *headers = json_dump(json_get(resp, "headers"));
        RESULTS[N].name = strdup(name);
        N++;
        unmatched += op == NULL;
        char *out = NULL;
        cycles_error *e = NULL;
        cycles_status st = cycles_decode_captured(op, (uint16_t)status, headers, (const uint8_t *)body, strlen(body), &out, &e);
        if (status >= 200 && status < 300) {
            CHECK(st == CYCLES_OK, "%s: %d %s", name, (int)st, e ? cycles_error_json(e) : "");
            check_success(name, resp, out);
            ok++;
        } else {
            CHECK(st != CYCLES_OK && out == NULL && e != NULL, "%s: an error", name);
            check_error(name, resp, st, e);
            failed++;
        }
        cycles_string_free(out);
        free(headers);
        json_free(x);
    }
    free(text);
    CHECK(N == EXPECTED_EXCHANGES && ok + failed == N, "%zu exchanges", N);
    CHECK(ok == EXPECTED_OK && unmatched == EXPECTED_UNMATCHED, "%zu successes, %zu unmatched", ok, unmatched);

    /* What the server meant, on the cases its README calls out. */
    const jv *b = json_get(find("get.active_minimal")->decoded, "body");
    CHECK(!strcmp(jstr(json_get(b, "subject"), "tenant"), "acme") && !json_get(json_get(b, "subject"), "workspace"), "minimal");
    CHECK(!json_get(json_get(b, "action"), "tags"), "no tags");
    b = json_get(find("list.page_1")->decoded, "body");
    CHECK(json_get(b, "has_more")->b && jstr(b, "next_cursor"), "page 1");
    b = json_get(find("list.page_3")->decoded, "body");
    CHECK(!json_get(b, "has_more")->b && !json_get(b, "next_cursor"), "page 3");
    b = json_get(find("create.replay_of_expired")->decoded, "body");
    CHECK(!strcmp(json_get(b, "remaining_ttl_ms")->text, "0"), "remaining_ttl_ms 0 kept");
    const char *unauthorized[][2] = { { "auth.missing_key_create", "Missing API key" }, { "auth.wrong_key_create", "KEY_NOT_FOUND" },
                                      { "tenant_suspended.create", "TENANT_SUSPENDED" }, { "tenant_closed.decide", "TENANT_CLOSED" } };
    for (size_t i = 0; i < 4; i++) {
        cycles_error *e = find(unauthorized[i][0])->err;
        CHECK(cycles_error_status(e) == CYCLES_UNAUTHORIZED && !strcmp(cycles_error_message(e), unauthorized[i][1]), "%s", unauthorized[i][0]);
    }
    uint64_t secs = 0;
    CHECK(cycles_error_retry_after_seconds(find("evidence_on.rate_limited")->err, &secs) && secs == 14, "retry after 14");
    cycles_error *html = find("get.encoded_slash")->err;
    CHECK(cycles_error_status(html) == CYCLES_INVALID_REQUEST && !cycles_error_request_id(html) && !cycles_error_server_code(html), "html 400");
    CHECK(cycles_error_status(find("routing.unknown_path")->err) == CYCLES_SERVER_ERROR, "unknown path");
    CHECK(cycles_error_status(find("routing.unknown_path_no_key")->err) == CYCLES_UNAUTHORIZED, "no key");
    CHECK(strstr(cycles_error_details_json(find("create.unit_mismatch")->err), "requested_unit"), "unit mismatch details");
    CHECK(cycles_error_status(find("get.expired")->err) == CYCLES_RESERVATION_EXPIRED, "expired");
    cycles_error *denied = find("evidence_on.create_denied")->err;
    CHECK(cycles_error_status(denied) == CYCLES_BUDGET_EXCEEDED && cycles_error_evidence_id(denied), "denial evidence");

    /* What it cannot decode: an unknown operation id, a 2xx without one, bad headers. */
    cycles_error *e = NULL;
    CHECK(cycles_decode_captured("GetReservation", 200, NULL, (const uint8_t *)"{}", 2, NULL, &e) == CYCLES_INVALID_ARGUMENT, "op id");
    cycles_error_free(e);
    CHECK(cycles_decode_captured(NULL, 200, NULL, (const uint8_t *)"{}", 2, NULL, &e) == CYCLES_INVALID_ARGUMENT, "no op");
    cycles_error_free(e);
    CHECK(cycles_decode_captured("getReservation", 200, "[1]", NULL, 0, NULL, &e) == CYCLES_INVALID_ARGUMENT, "headers");
    cycles_error_free(e);
    CHECK(cycles_decode_captured("getReservation", 200, "{\"X-Request-Id\":\"r\"}", (const uint8_t *)"{}", 2, NULL, &e) ==
              CYCLES_INVALID_RESPONSE, "a read's invalid 2xx");
    cycles_error_free(e);
    CHECK(cycles_decode_captured("commitReservation", 200, NULL, (const uint8_t *)"{}", 2, NULL, &e) == CYCLES_AMBIGUOUS_SUCCESS,
          "a write's invalid 2xx");
    cycles_error_free(e);
    CHECK(cycles_decode_captured("getReservation", 200, NULL, NULL, 3, NULL, &e) == CYCLES_INVALID_ARGUMENT, "NULL body");
    cycles_error_free(e);

    for (size_t i = 0; i < N; i++) {
        free((char *)RESULTS[i].name);
        json_free(RESULTS[i].decoded);
        cycles_error_free(RESULTS[i].err);
    }
    (void)ERR;
    printf("corpus: %zu exchanges (%zu successes, %zu errors, %zu unmatched): ok\n", N, ok, failed, unmatched);
    return 0;
}
