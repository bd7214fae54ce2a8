/* Journal interop between the C library, the Rust CLI (`cycles journal drain`) and the Python
 * wheel, against the local server in this process over real HTTP:
 *   C writes (a C child process whose commit the server failed; it exits, or is SIGKILLed with
 *   the record on disk), Rust drains; C writes, Python drains;
 *   Python writes (its commit failed, it exits), C drains;
 *   Rust rewrites (the CLI's replay meets a 429 and persists the floor in the record), C drains.
 * Each record is applied exactly once (the ledger), and the commit the drainer sends is
 * byte for byte the commit body the writer journaled (the server's request log).
 * usage: test_interop CYCLES_CLI PYTHON  (PYTHON: a venv interpreter with the cycles wheel) */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "recovery.h"

static cycles_local_server *S;
static char *TMP;

static bool eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* Runs argv to completion; returns its exit status. */
static int run(char *const argv[]) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The reservation the server created under `key`. */
static void rid_of(const char *key, char *rid, size_t n) {
    jv *ledger = server_json(S, true);
    rid[0] = 0;
    for (size_t i = 0; i < ledger->n; i++)
        if (eq(jstr(ledger->items[i], "kind"), "reserve") && eq(jstr(ledger->items[i], "idempotency_key"), key))
            snprintf(rid, n, "%s", jstr(ledger->items[i], "reservation_id"));
    json_free(ledger);
    CHECK(rid[0], "no reservation for %s", key);
}

/* The pending record's exact commit body, read before the drain. */
static char *journaled_body(const char *dir, const char *rid) {
    char *path = record_path(dir, cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), rid);
    jv *rec = read_record(path);
    CHECK(rec != NULL, "a pending record at %s", path);
    char *body = strdup(jstr(rec, "commit_body"));
    json_free(rec);
    free(path);
    return body;
}

/* After the drain: applied once, the drained commit carried the journaled bytes, no record. */
static void applied_once(const char *what, const char *dir, const char *rid, const char *key, const char *body, int amount) {
    int commits, evs;
    settlements(S, rid, key, &commits, &evs);
    CHECK(commits == 1 && evs == 0, "%s: applied once (%d commits, %d events)", what, commits, evs);
    jlist l = settlement_requests(S, rid, key);
    CHECK(l.n >= 2, "%s: %zu commits", what, l.n);
    jv *last = l.items[l.n - 1];
    CHECK(jnum(last, "status", 0) == 200 && eq(jstr(last, "idempotency_key"), key), "%s: the drain's commit", what);
    CHECK(eq(jstr(last, "body"), body), "%s: the drained commit is the journaled body byte for byte:\n%s\n%s", what,
          jstr(last, "body"), body);
    jlist_free(&l);
    jv *ledger = server_json(S, true);
    for (size_t i = 0; i < ledger->n; i++)
        if (eq(jstr(ledger->items[i], "kind"), "commit") && eq(jstr(ledger->items[i], "reservation_id"), rid))
            CHECK(jnum(ledger->items[i], "amount", 0) == amount, "%s: amount", what);
    json_free(ledger);
    CHECK(record_files(dir) == 0, "%s: the record is removed", what);
    printf("interop %s: ok\n", what);
}

static void fail_next_commit(int status) {
    char f[96];
    snprintf(f, sizeof f, "{\"kind\":\"server_error\",\"status\":%d}", status);
    add_fault(S, "commitReservation", f, NULL);
}

/* A C child process settles `key`; the server fails the commit; it exits (or is killed). */
static void c_writes(const char *dir, const char *key, int amount, bool killed) {
    char spec[2048], result[600];
    snprintf(result, sizeof result, "%s/%s.json", TMP, key);
    snprintf(spec, sizeof spec,
             "{\"url\":\"%s\",\"api_key\":\"%s\",\"tenant\":\"%s\",\"dir\":\"%s\",\"mode\":\"settle\",\"key\":\"%s\","
             "\"amount\":%d,\"max_attempts\":%d,\"result\":\"%s\"}",
             cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), dir, key, amount,
             killed ? 5 : 1, result);
    child c;
    if (!killed) {
        fail_next_commit(500);
        child_start(&c, spec, result);
        jv *r = child_finish(&c, 60);
        CHECK(eq(jstr(json_get(json_get(r, "out"), "settlement"), "status"), "pending"), "pending");
        json_free(r);
        return;
    }
    /* Killed: the server holds the (unapplied) commit; SIGKILL once the record is on disk. */
    add_fault(S, "commitReservation", "{\"kind\":\"delay\",\"ms\":3000}", NULL);
    int before = count_ops(S, "commitReservation");
    child_start(&c, spec, result);
    WAIT_FOR(20, "the record", record_files(dir) == 1 && count_ops(S, "commitReservation") > before);
    child_kill9(&c);
}

static void rust_drains(const char *cli, const char *dir) {
    char *argv[] = { (char *)cli, "journal", "drain", "--dir", (char *)dir, "--base-url", (char *)cycles_local_server_url(S),
                     "--api-key", (char *)cycles_local_server_api_key(S), "--tenant", (char *)cycles_local_server_tenant(S),
                     "--deadline-ms", "20000", NULL };
    CHECK(run(argv) == 0, "cycles journal drain exits 0 (every record settled)");
}

static const char *PY_DRAIN =
    "import sys, cycles\n"
    "url, key, tenant, d = sys.argv[1:5]\n"
    "c = cycles.Client(url, key, tenant=tenant, journal_dir=d, replay_interval=3600)\n"
    "r = c.drain(20.0)\n"
    "c.close(timeout=0)\n"
    "assert r.remaining == (), r\n";

static const char *PY_WRITE =
    "import sys, cycles\n"
    "url, key, tenant, d, k = sys.argv[1:6]\n"
    "c = cycles.Client(url, key, tenant=tenant, journal_dir=d, settle_max_attempts=1, replay_interval=3600)\n"
    "with c.reserve(1000, action={'kind': 'llm.completion', 'name': 'test-model'}, idempotency_key=k,\n"
    "               heartbeat=False) as r:\n"
    "    r.set_actual(321)\n"
    "    r.set_metadata({'note': 'caf\\u00e9', 'big': 12345678901234567890})\n"
    "assert r.settlement.status == 'pending', r.settlement\n"
    "c.close(timeout=0)\n";

static void python(const char *py, const char *script, const char *dir, const char *key) {
    char *argv[] = { (char *)py, "-I", "-c", (char *)script, (char *)cycles_local_server_url(S),
                     (char *)cycles_local_server_api_key(S), (char *)cycles_local_server_tenant(S), (char *)dir,
                     (char *)key, NULL };
    CHECK(run(argv) == 0, "python exited 0");
}

static void c_drains(const char *dir) {
    char opts[700], *report = NULL;
    snprintf(opts, sizeof opts, "{\"journal_dir\":\"%s\",\"replay_interval_ms\":3600000}", dir);
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), opts, &c, &ERR));
    OK(cycles_client_drain(c, 20000, &report, &ERR));
    CHECK(strstr(report, "\"remaining\":[]"), "%s", report);
    cycles_string_free(report);
    OK(cycles_client_close(c, 0, NULL, &ERR));
    cycles_client_free(c);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "child")) return child_main(argv[2]);
    CHECK(argc == 3, "usage: test_interop CYCLES_CLI PYTHON");
    const char *cli = argv[1], *py = argv[2];
    CHECK(access(cli, X_OK) == 0, "no cycles CLI at %s", cli);
    CHECK(access(py, X_OK) == 0, "no Python at %s (python/scripts/test.sh leaves its test venv)", py);
    OK(cycles_local_server_start(NULL, &S, &ERR));
    TMP = make_temp_dir();
    char dir[700], rid[256], key[64];
    int cases = 0;

    struct { const char *writer, *drainer; bool killed; } matrix[] = {
        { "c", "rust", false }, { "c", "rust", true }, { "c", "python", false }, { "c", "python", true },
        { "python", "c", false },
    };
    for (size_t i = 0; i < sizeof matrix / sizeof *matrix; i++) {
        snprintf(dir, sizeof dir, "%s/j%zu", TMP, i);
        snprintf(key, sizeof key, "interop-%zu", i);
        int amount = 321;
        if (eq(matrix[i].writer, "c")) {
            amount = 400;
            c_writes(dir, key, amount, matrix[i].killed);
            if (matrix[i].killed) usleep(3200 * 1000); /* the held commit ends at the server, unapplied */
        } else {
            fail_next_commit(500);
            python(py, PY_WRITE, dir, key);
        }
        rid_of(key, rid, sizeof rid);
        char *body = journaled_body(dir, rid);
        if (eq(matrix[i].drainer, "rust")) rust_drains(cli, dir);
        else if (eq(matrix[i].drainer, "python")) python(py, PY_DRAIN, dir, key);
        else c_drains(dir);
        char what[96], ckey[96];
        snprintf(what, sizeof what, "%s writes%s, %s drains", matrix[i].writer, matrix[i].killed ? " (SIGKILLed)" : "",
                 matrix[i].drainer);
        snprintf(ckey, sizeof ckey, "%s:commit", key);
        applied_once(what, dir, rid, ckey, body, amount);
        if (eq(matrix[i].writer, "python")) CHECK(strstr(body, "12345678901234567890") != NULL, "big integer kept");
        free(body);
        cases++;
    }

    /* Rust rewrites: the CLI's replay meets a 429 and persists the floor into the record. */
    snprintf(dir, sizeof dir, "%s/j-rust", TMP);
    c_writes(dir, "interop-rust", 400, false);
    rid_of("interop-rust", rid, sizeof rid);
    char *before = journaled_body(dir, rid);
    /* Every commit of this replay is rate-limited, so it ends with the floor persisted. */
    OK(cycles_local_server_add_fault(S, "{\"operation\":\"commitReservation\",\"fault\":{\"kind\":\"rate_limited\","
                                        "\"retry_after\":\"1\"},\"times\":0}", &ERR));
    char *replay[] = { (char *)cli, "journal", "replay", "--dir", dir, "--base-url", (char *)cycles_local_server_url(S),
                       "--api-key", (char *)cycles_local_server_api_key(S), "--tenant", (char *)cycles_local_server_tenant(S),
                       NULL };
    CHECK(run(replay) == 1, "the replay leaves the record pending (exit 1)");
    char *path = record_path(dir, cycles_local_server_url(S), cycles_local_server_api_key(S), cycles_local_server_tenant(S), rid);
    jv *rec = read_record(path);
    CHECK(rec && !jnull(rec, "not_before_ms"), "Rust wrote the floor into the record");
    json_free(rec);
    free(path);
    OK(cycles_local_server_clear_faults(S, &ERR));
    c_drains(dir);
    applied_once("rust rewrites (429 floor), c drains", dir, rid, "interop-rust:commit", before, 400);
    free(before);
    cases++;

    OK(cycles_local_server_stop(S, &ERR));
    cycles_local_server_free(S);
    remove_tree(TMP);
    free(TMP);
    OK(cycles_shutdown(1000, NULL, &ERR));
    printf("interop: %d cases: ok\n", cases);
    return 0;
}
