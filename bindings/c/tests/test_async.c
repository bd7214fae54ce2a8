/* Completion callbacks (cycles_client_call_async, cycles_guard_begin_async,
 * cycles_guard_finish_async) against the local server over real HTTP: results and errors
 * arrive once each, on the completion thread (not the caller's), with the caller's user data;
 * a blocking call from a completion callback is refused; a chain of async calls started from
 * callbacks settles a guarded action (the ledger shows the actual); argument errors return at
 * once without a callback; cycles_shutdown joins the completion thread (valgrind-clean). */
#include <pthread.h>
#include <string.h>

#include "check.h"

static cycles_error *ERR;

/* One awaited completion: filled by the callback, waited for by main. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    cycles_status status;
    char text[8192];
    char err_name[64];
    pthread_t thread;
    cycles_guard *guard;
    cycles_outcome outcome;
    cycles_status blocking_status;
    const cycles_client *client;
} done_t;

static void init(done_t *d, const cycles_client *c) {
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->client = c;
}

static void finish(done_t *d) {
    d->calls++;
    d->thread = pthread_self();
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void wait_for(done_t *d, int calls) {
    pthread_mutex_lock(&d->mu);
    while (d->calls < calls) pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static void on_call(void *user, cycles_status st, const char *json, size_t len,
                    const cycles_error *err) {
    done_t *d = user;
    pthread_mutex_lock(&d->mu);
    d->status = st;
    if (json) {
        CHECK(strlen(json) == len, "len %zu", len);
        snprintf(d->text, sizeof d->text, "%s", json);
    }
    if (err) snprintf(d->err_name, sizeof d->err_name, "%s", cycles_error_name(err));
    CHECK((st == CYCLES_OK) == (json != NULL) && (st == CYCLES_OK) == (err == NULL),
          "status %d json %p err %p", (int)st, (const void *)json, (const void *)err);
    /* A blocking call from here would hold up every later completion: refused. */
    cycles_error *e = NULL;
    d->blocking_status = cycles_client_call(d->client, "get_evidence_jwks", "{}", NULL, &e);
    cycles_error_free(e);
    finish(d);
}

static void on_begin(void *user, cycles_status st, cycles_guard *g, const cycles_error *err) {
    done_t *d = user;
    pthread_mutex_lock(&d->mu);
    d->status = st;
    d->guard = g;
    if (err) snprintf(d->err_name, sizeof d->err_name, "%s", cycles_error_name(err));
    finish(d);
}

static void on_outcome(void *user, cycles_status st, const cycles_outcome *o, const char *json,
                       size_t len, const cycles_error *err) {
    done_t *d = user;
    pthread_mutex_lock(&d->mu);
    d->status = st;
    CHECK(o != NULL && json != NULL && err == NULL && strlen(json) == len, "outcome %d", (int)st);
    d->outcome = *o;
    snprintf(d->text, sizeof d->text, "%s", json);
    finish(d);
}

/* A chain started from callbacks: begin -> (set actual, finish_async) -> outcome. */
static done_t CHAIN_END;

static void chain_outcome(void *user, cycles_status st, const cycles_outcome *o, const char *json,
                          size_t len, const cycles_error *err) {
    on_outcome(user, st, o, json, len, err);
}

static void chain_begun(void *user, cycles_status st, cycles_guard *g, const cycles_error *err) {
    (void)user;
    CHECK(st == CYCLES_OK && g != NULL, "chain begin: %d %s", (int)st,
          err ? cycles_error_message(err) : "");
    OK(cycles_guard_set_actual(g, 321, &ERR));
    OK(cycles_guard_finish_async(g, true, chain_outcome, &CHAIN_END, &ERR));
    cycles_guard_free(g); /* allowed as soon as finish_async returned */
}

int main(void) {
    cycles_local_server *s = NULL;
    cycles_client *c = NULL;
    OK(cycles_local_server_start(NULL, &s, &ERR));
    OK(cycles_client_new(cycles_local_server_url(s), cycles_local_server_api_key(s), "acme",
                         "{\"journal_enabled\":false}", &c, &ERR));

    /* A read: the reply arrives on the completion thread with the user data. */
    done_t d;
    init(&d, c);
    OK(cycles_client_call_async(c, "get_balances", "{\"tenant\":\"acme\"}", on_call, &d, &ERR));
    wait_for(&d, 1);
    CHECK(d.status == CYCLES_OK && strstr(d.text, "\"balances\"") && strstr(d.text, "\"status\":200"),
          "%s", d.text);
    CHECK(!pthread_equal(d.thread, pthread_self()), "the callback ran on the caller's thread");
    CHECK(d.blocking_status == CYCLES_RUNTIME, "blocking call in a callback: %d",
          (int)d.blocking_status);

    /* A server error arrives as the callback's error. */
    init(&d, c);
    OK(cycles_client_call_async(c, "get_reservation", "{\"reservation_id\":\"rsv_missing\"}",
                                on_call, &d, &ERR));
    wait_for(&d, 1);
    CHECK(d.status == CYCLES_NOT_FOUND && strcmp(d.err_name, "NOT_FOUND") == 0, "%d %s",
          (int)d.status, d.err_name);

    /* Argument errors return at once; the callback is never called. */
    init(&d, c);
    CHECK(cycles_client_call_async(c, "no_such_op", "{}", on_call, &d, &ERR) ==
              CYCLES_INVALID_ARGUMENT, "unknown op");
    cycles_error_free(ERR);
    ERR = NULL;
    CHECK(cycles_client_call_async(c, "get_balances", "{}", NULL, &d, &ERR) ==
              CYCLES_INVALID_ARGUMENT, "NULL callback");
    cycles_error_free(ERR);
    ERR = NULL;

    /* A guarded action begun and finished without blocking. */
    cycles_reserve r = {0};
    r.idempotency_key = "c-async-1";
    r.action_kind = "llm.completion";
    r.action_name = "async";
    r.estimate = 1000;
    init(&d, c);
    OK(cycles_guard_begin_async(c, &r, on_begin, &d, &ERR));
    wait_for(&d, 1);
    CHECK(d.status == CYCLES_OK && d.guard != NULL, "begin_async: %d %s", (int)d.status,
          d.err_name);
    cycles_guard *g = d.guard;
    OK(cycles_guard_set_actual(g, 800, &ERR));
    init(&d, c);
    OK(cycles_guard_finish_async(g, true, on_outcome, &d, &ERR));
    CHECK(cycles_guard_finish_async(g, true, on_outcome, &d, &ERR) == CYCLES_INVALID_ARGUMENT,
          "a second finish");
    cycles_error_free(ERR);
    ERR = NULL;
    cycles_guard_free(g);
    wait_for(&d, 1);
    CHECK(d.outcome.kind == CYCLES_OUTCOME_SETTLED &&
              d.outcome.settlement == CYCLES_SETTLEMENT_COMMITTED && d.outcome.charged == 800,
          "%s", d.text);

    /* A denial arrives as begin_async's error, with no guard. */
    cycles_reserve big = r;
    big.idempotency_key = "c-async-big";
    big.estimate = (int64_t)1 << 60;
    init(&d, c);
    OK(cycles_guard_begin_async(c, &big, on_begin, &d, &ERR));
    wait_for(&d, 1);
    CHECK(d.status == CYCLES_BUDGET_EXCEEDED && d.guard == NULL, "%d %s", (int)d.status,
          d.err_name);

    /* A chain driven entirely from callbacks settles too. */
    cycles_reserve chained = r;
    chained.idempotency_key = "c-async-chain";
    init(&CHAIN_END, c);
    OK(cycles_guard_begin_async(c, &chained, chain_begun, NULL, &ERR));
    wait_for(&CHAIN_END, 1);
    CHECK(CHAIN_END.outcome.charged == 321, "%s", CHAIN_END.text);

    char *ledger = NULL;
    OK(cycles_local_server_ledger(s, &ledger, &ERR));
    CHECK(strstr(ledger, "c-async-1:commit") && strstr(ledger, "c-async-chain:commit"), "%s",
          ledger);
    cycles_string_free(ledger);

    cycles_client_free(c);
    cycles_local_server_free(s);
    /* Joins the completion thread: nothing of ours is left for valgrind to report. */
    OK(cycles_shutdown(1000, NULL, &ERR));
    printf("async: ok\n");
    return 0;
}
