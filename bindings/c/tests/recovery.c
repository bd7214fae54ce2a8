/* Helpers of the C recovery tests (see recovery.h). */
#include "recovery.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

cycles_error *ERR;

const char *jstr(const jv *obj, const char *key) {
    jv *v = obj ? json_get(obj, key) : NULL;
    return v && v->kind == J_STR ? v->text : NULL;
}

long long jnum(const jv *obj, const char *key, long long dflt) {
    jv *v = obj ? json_get(obj, key) : NULL;
    return v && v->kind == J_NUM ? strtoll(v->text, NULL, 10) : dflt;
}

bool jnull(const jv *obj, const char *key) {
    jv *v = obj ? json_get(obj, key) : NULL;
    return v == NULL || v->kind == J_NULL;
}

bool jbool(const jv *obj, const char *key) {
    jv *v = obj ? json_get(obj, key) : NULL;
    return v && v->kind == J_BOOL && v->b;
}

void jlist_free(jlist *l) {
    json_free(l->root);
    free(l->items);
    l->root = NULL;
    l->items = NULL;
    l->n = 0;
}

jv *server_json(cycles_local_server *s, bool ledger) {
    char *out = NULL;
    if (ledger) OK(cycles_local_server_ledger(s, &out, &ERR));
    else OK(cycles_local_server_requests(s, &out, &ERR));
    jv *v = json_parse(out);
    CHECK(v && v->kind == J_ARR, "server json: %s", out);
    cycles_string_free(out);
    return v;
}

static bool eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

jlist settlement_requests(cycles_local_server *s, const char *rid, const char *key) {
    jlist l = { server_json(s, false), NULL, 0 };
    l.items = calloc(l.root->n + 1, sizeof *l.items);
    for (size_t i = 0; i < l.root->n; i++) {
        jv *r = l.root->items[i];
        const char *op = jstr(r, "operation");
        if ((eq(op, "commitReservation") && eq(jstr(r, "reservation_id"), rid)) ||
            (eq(op, "createEvent") && eq(jstr(r, "idempotency_key"), key)))
            l.items[l.n++] = r;
    }
    return l;
}

void settlements(cycles_local_server *s, const char *rid, const char *key, int *commits, int *events) {
    jv *ledger = server_json(s, true);
    *commits = *events = 0;
    for (size_t i = 0; i < ledger->n; i++) {
        jv *e = ledger->items[i];
        if (eq(jstr(e, "kind"), "commit") && eq(jstr(e, "reservation_id"), rid)) (*commits)++;
        if (eq(jstr(e, "kind"), "event") && eq(jstr(e, "idempotency_key"), key)) (*events)++;
    }
    json_free(ledger);
}

int count_ops(cycles_local_server *s, const char *operation) {
    jv *reqs = server_json(s, false);
    int n = 0;
    for (size_t i = 0; i < reqs->n; i++) n += eq(jstr(reqs->items[i], "operation"), operation);
    json_free(reqs);
    return n;
}

void no_release(cycles_local_server *s) {
    CHECK(count_ops(s, "releaseReservation") == 0, "nothing releases a settled reservation");
}

void add_fault(cycles_local_server *s, const char *operation, const char *fault_json, const char *rid) {
    char rule[1024];
    if (rid)
        snprintf(rule, sizeof rule, "{\"operation\":\"%s\",\"fault\":%s,\"times\":1,\"reservation_id\":\"%s\"}",
                 operation, fault_json, rid);
    else
        snprintf(rule, sizeof rule, "{\"operation\":\"%s\",\"fault\":%s,\"times\":1}", operation, fault_json);
    OK(cycles_local_server_add_fault(s, rule, &ERR));
}

char *partition_dir(const char *dir, const char *url, const char *api_key, const char *tenant) {
    char *fp = NULL;
    OK(cycles_journal_fingerprint(url, api_key, tenant, &fp, &ERR));
    size_t n = strlen(dir) + strlen(fp) + 2;
    char *out = malloc(n);
    snprintf(out, n, "%s/%s", dir, fp);
    cycles_string_free(fp);
    return out;
}

char *record_path(const char *dir, const char *url, const char *api_key, const char *tenant, const char *rid) {
    char *part = partition_dir(dir, url, api_key, tenant);
    char *name = NULL;
    OK(cycles_journal_file_name(rid, &name, &ERR));
    size_t n = strlen(part) + strlen(name) + 2;
    char *out = malloc(n);
    snprintf(out, n, "%s/%s", part, name);
    free(part);
    cycles_string_free(name);
    return out;
}

jv *read_record(const char *path) {
    size_t len = 0;
    char *data = read_file(path, &len);
    if (!data) return NULL;
    char *out = NULL;
    OK(cycles_journal_parse_record((const uint8_t *)data, len, &out, &ERR));
    free(data);
    jv *rec = json_parse(out);
    CHECK(rec != NULL, "record json %s", out);
    cycles_string_free(out);
    return rec;
}

static size_t json_files;
static int count_json(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    size_t n = strlen(path);
    if (flag == FTW_F && n > 5 && !strcmp(path + n - 5, ".json")) json_files++;
    return 0;
}

size_t record_files(const char *dir) {
    json_files = 0;
    if (exists(dir)) CHECK(nftw(dir, count_json, 16, FTW_PHYS) == 0, "walk %s", dir);
    return json_files;
}

bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

void write_file(const char *path, const char *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "open %s: %s", path, strerror(errno));
    CHECK(fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", path);
}

char *make_temp_dir(void) {
    char *dir = strdup("/tmp/cycles-c-recovery.XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void remove_tree(const char *dir) {
    if (exists(dir)) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* -- events ------------------------------------------------------------------------------ */

struct events {
    pthread_mutex_t lock;
    jv **items;
    size_t n;
};

events *events_new(void) {
    events *e = calloc(1, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    return e;
}

void events_free(events *e) {
    for (size_t i = 0; i < e->n; i++) json_free(e->items[i]);
    free(e->items);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void on_event(void *user, const char *json, size_t len) {
    events *e = user;
    (void)len;
    jv *v = json_parse(json);
    if (!v) return;
    pthread_mutex_lock(&e->lock);
    e->items = realloc(e->items, (e->n + 1) * sizeof *e->items);
    e->items[e->n++] = v;
    pthread_mutex_unlock(&e->lock);
}

size_t events_count(events *e, const char *kind, const char *rid) {
    size_t n = 0;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->n; i++)
        n += eq(jstr(e->items[i], "kind"), kind) && (rid == NULL || eq(jstr(e->items[i], "reservation_id"), rid));
    pthread_mutex_unlock(&e->lock);
    return n;
}

const jv *events_first(events *e, const char *kind, const char *rid) {
    const jv *found = NULL;
    pthread_mutex_lock(&e->lock);
    for (size_t i = 0; i < e->n && !found; i++)
        if (eq(jstr(e->items[i], "kind"), kind) && (rid == NULL || eq(jstr(e->items[i], "reservation_id"), rid)))
            found = e->items[i];
    pthread_mutex_unlock(&e->lock);
    return found;
}

/* -- child processes --------------------------------------------------------------------- */

void child_start(child *c, const char *spec_json, const char *result_path) {
    snprintf(c->result, sizeof c->result, "%s", result_path);
    unlink(c->result);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink /proc/self/exe");
    self[n] = 0;
    pid_t parent = getpid();
    c->pid = fork();
    CHECK(c->pid >= 0, "fork");
    if (c->pid == 0) {
        /* A child must never outlive a failed test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        execl(self, self, "child", spec_json, (char *)NULL);
        _exit(127);
    }
}

jv *child_finish(child *c, double limit_s) {
    int status = 0;
    double deadline = mono_s() + limit_s;
    for (;;) {
        pid_t got = waitpid(c->pid, &status, WNOHANG);
        if (got == c->pid) break;
        if (mono_s() > deadline) {
            child_stop(c);
            CHECK(0, "child did not finish within %.0fs", limit_s);
        }
        usleep(2000);
    }
    c->pid = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed with status %d", status);
    char *text = read_file(c->result, NULL);
    CHECK(text != NULL, "no child result %s", c->result);
    jv *out = json_parse(text);
    CHECK(out != NULL, "child result %s", text);
    free(text);
    return out;
}

void child_kill9(child *c) {
    CHECK(kill(c->pid, SIGKILL) == 0, "kill");
    int status = 0;
    CHECK(waitpid(c->pid, &status, 0) == c->pid, "waitpid");
    c->pid = 0;
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "killed by SIGKILL: %d", status);
    CHECK(!exists(c->result), "the child had not finished");
}

void child_stop(child *c) {
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = 0;
    }
}

size_t result_events(const jv *result, const char *kind, const char *rid, const jv **first) {
    jv *evs = json_get(result, "events");
    CHECK(evs && evs->kind == J_ARR, "no events in the child result");
    size_t n = 0;
    for (size_t i = 0; i < evs->n; i++) {
        jv *e = evs->items[i];
        if (eq(jstr(e, "kind"), kind) && (rid == NULL || eq(jstr(e, "reservation_id"), rid))) {
            if (n == 0 && first) *first = e;
            n++;
        }
    }
    return n;
}

/* The child: a FRESH client from the spec (only the journal crosses from an earlier process),
 * one thing through the public API, the client closed without a drain (what is left stays
 * journaled), the result written atomically to spec.result. A process killed writes nothing.
 *   settle  reserve (no heartbeat) with spec.key, set spec.amount, finish: the outcome JSON
 *   flush   cycles_client_flush: the drain report
 *   drain   cycles_client_drain(spec.timeout_ms): the drain report */
typedef struct {
    pthread_mutex_t lock;
    char *buf;
    size_t len, cap;
} textbuf;

static void buf_add(textbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->buf = realloc(b->buf, b->cap);
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void child_event(void *user, const char *json, size_t len) {
    textbuf *b = user;
    pthread_mutex_lock(&b->lock);
    if (b->len) buf_add(b, ",", 1);
    buf_add(b, json, len);
    pthread_mutex_unlock(&b->lock);
}

int child_main(const char *spec_json) {
    jv *spec = json_parse(spec_json);
    CHECK(spec != NULL, "spec %s", spec_json);
    const char *url = jstr(spec, "url"), *key = jstr(spec, "api_key"), *tenant = jstr(spec, "tenant");
    const char *mode = jstr(spec, "mode"), *go = jstr(spec, "go"), *result = jstr(spec, "result");
    char opts[1024];
    snprintf(opts, sizeof opts, "{\"journal_dir\":\"%s\",\"settle_max_attempts\":%lld,\"replay_interval_ms\":3600000}",
             jstr(spec, "dir"), jnum(spec, "max_attempts", 5));
    cycles_client *c = NULL;
    OK(cycles_client_new(url, key, tenant, opts, &c, &ERR));
    textbuf events = { 0 };
    pthread_mutex_init(&events.lock, NULL);
    buf_add(&events, "", 0);
    if (go) {
        /* Ready first (the identity's PBKDF2 is computed once per process and cached), then
         * released together with the other workers. */
        char *fp = NULL, ready[600];
        OK(cycles_journal_fingerprint(url, key, tenant, &fp, &ERR));
        cycles_string_free(fp);
        snprintf(ready, sizeof ready, "%s.ready", result);
        write_file(ready, "", 0);
        while (!exists(go)) usleep(500);
    }
    /* Registering the callback starts the lifecycle (its background replay's first pass). */
    OK(cycles_client_set_event_callback(c, child_event, &events, &ERR));
    char *out = NULL;
    if (!strcmp(mode, "settle")) {
        cycles_reserve r = { 0 };
        r.idempotency_key = jstr(spec, "key");
        r.action_kind = "llm.completion";
        r.action_name = "test-model";
        r.estimate = 1000;
        r.no_heartbeat = true;
        cycles_guard *g = NULL;
        OK(cycles_guard_begin(c, &r, &g, &ERR));
        OK(cycles_guard_set_actual(g, jnum(spec, "amount", 0), &ERR));
        OK(cycles_guard_finish(g, true, NULL, &out, &ERR));
        cycles_guard_free(g);
    } else if (!strcmp(mode, "flush")) {
        OK(cycles_client_flush(c, &out, &ERR));
    } else if (!strcmp(mode, "drain")) {
        OK(cycles_client_drain(c, (uint64_t)jnum(spec, "timeout_ms", 20000), &out, &ERR));
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    /* timeout 0: no drain at close; close still delivers every queued event. */
    OK(cycles_client_close(c, 0, NULL, &ERR));
    cycles_client_free(c);
    pthread_mutex_lock(&events.lock);
    size_t n = strlen(out) + events.len + 128;
    char *doc = malloc(n);
    snprintf(doc, n, "{\"pid\":%d,\"out\":%s,\"events\":[%s]}", (int)getpid(), out, events.buf);
    pthread_mutex_unlock(&events.lock);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", result);
    write_file(tmp, doc, strlen(doc));
    CHECK(rename(tmp, result) == 0, "rename result");
    free(doc);
    free(events.buf);
    pthread_mutex_destroy(&events.lock);
    cycles_string_free(out);
    json_free(spec);
    OK(cycles_shutdown(1000, NULL, &ERR));
    return 0;
}
