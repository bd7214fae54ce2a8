/* Guarded lifecycles of libcycles (the C API) in one process, in alternating rounds, journal
 * off and on (and, when built with CYCLES_BENCH_CURL, a bare libcurl create + commit pair);
 * then core's own `lifecycle-cpu` in the same run and the ratios C / core; then the memory of
 * CONCURRENT guarded calls in flight at once through the async API (docs/benchmarks.md, "C
 * guarded lifecycle against core"). bindings/c/scripts/bench.sh builds everything and starts
 * the server.
 *
 * One lifecycle at a time: reserve (heartbeat armed), trivial work, commit 800 of 1,000,
 * outcome checked. Client CPU is CLOCK_PROCESS_CPUTIME_ID over a round (this thread and core's
 * runtime, completion and event threads alike), divided by its lifecycles.
 *
 *   lifecycle --url URL [--key K] [--rounds 7] [--lifecycles 1000] [--warmup 300]
 *       [--paths off,on,curl] [--journal-dir DIR] [--lifecycle-cpu BIN --cycles-bin BIN]
 *       [--concurrent 10000] [--passes 2]
 */
#define _POSIX_C_SOURCE 200809L

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cycles.h>
#ifdef CYCLES_BENCH_CURL
#include <curl/curl.h>
#endif

#define MAX_ROUNDS 64

static void die(const char *what, const char *detail) {
    fprintf(stderr, "lifecycle bench: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

/* Exits with the error's JSON unless the call returned CYCLES_OK. */
static void must(cycles_status st, cycles_error *e, const char *what) {
    if (st == CYCLES_OK) return;
    char detail[1024];
    snprintf(detail, sizeof detail, "status %d %s", (int)st, e ? cycles_error_json(e) : "");
    die(what, detail);
}

static double now_us(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* ---- the paths under test ------------------------------------------------------------- */

static volatile uint64_t WORK; /* the trivial work: kept so the compiler cannot drop it */

static cycles_reserve reserve_spec(void) {
    cycles_reserve r = {0}; /* idempotency key NULL: core makes a fresh one */
    r.action_kind = "llm.completion";
    r.action_name = "bench";
    r.estimate = 1000;
    r.ttl_ms = 60000;
    return r;
}

static void check_committed(const cycles_outcome *o, const char *json) {
    if (o->kind != CYCLES_OUTCOME_SETTLED || o->settlement != CYCLES_SETTLEMENT_COMMITTED ||
        !o->has_charged || o->charged != 800)
        die("not committed", json);
}

/* The binding's guarded lifecycle (blocking calls, as an application thread makes them). */
static void guarded(void *ctx) {
    const cycles_client *c = ctx;
    cycles_reserve r = reserve_spec();
    cycles_guard *g = NULL;
    cycles_error *e = NULL;
    must(cycles_guard_begin(c, &r, &g, &e), e, "cycles_guard_begin");
    WORK = WORK + 1;
    must(cycles_guard_set_actual(g, 800, &e), e, "cycles_guard_set_actual");
    cycles_outcome o;
    must(cycles_guard_finish(g, true, &o, NULL, &e), e, "cycles_guard_finish");
    check_committed(&o, "(sync lifecycle)");
    cycles_guard_free(g);
}

#ifdef CYCLES_BENCH_CURL
/* The baseline: the same two requests through one reused libcurl easy handle (keep-alive);
 * the id read from the body with strstr, no JSON library (as the JVM bench's baseline). */
typedef struct {
    CURL *h;
    struct curl_slist *headers;
    const char *base;
    char body[16384];
    size_t len;
    unsigned long seq;
} bare_t;

static size_t on_body(char *p, size_t size, size_t n, void *user) {
    bare_t *b = user;
    size_t len = size * n;
    if (b->len + len >= sizeof b->body) die("libcurl", "response body too large");
    memcpy(b->body + b->len, p, len);
    b->len += len;
    b->body[b->len] = '\0';
    return len;
}

static void bare_init(bare_t *b, const char *url, const char *key) {
    char header[256];
    memset(b, 0, sizeof *b);
    b->base = url;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) die("curl_global_init", "");
    b->h = curl_easy_init();
    if (!b->h) die("curl_easy_init", "");
    snprintf(header, sizeof header, "X-Cycles-API-Key: %s", key);
    b->headers = curl_slist_append(NULL, header);
    b->headers = curl_slist_append(b->headers, "Content-Type: application/json");
    curl_easy_setopt(b->h, CURLOPT_HTTPHEADER, b->headers);
    curl_easy_setopt(b->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(b->h, CURLOPT_WRITEDATA, b);
}

static void bare_post(bare_t *b, const char *path, const char *json) {
    char url[512];
    long status = 0;
    snprintf(url, sizeof url, "%s%s", b->base, path);
    b->len = 0;
    b->body[0] = '\0';
    curl_easy_setopt(b->h, CURLOPT_URL, url);
    curl_easy_setopt(b->h, CURLOPT_POSTFIELDS, json);
    CURLcode rc = curl_easy_perform(b->h);
    if (rc != CURLE_OK) die("libcurl", curl_easy_strerror(rc));
    curl_easy_getinfo(b->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) die(path, b->body);
}

static void bare(void *ctx) {
    bare_t *b = ctx;
    char json[512], path[256];
    snprintf(json, sizeof json,
             "{\"idempotency_key\":\"bench-curl-%ld-%lu\",\"subject\":{\"tenant\":\"acme\"},"
             "\"action\":{\"kind\":\"llm.completion\",\"name\":\"bench\"},"
             "\"estimate\":{\"unit\":\"USD_MICROCENTS\",\"amount\":1000},\"ttl_ms\":60000}",
             (long)getpid(), b->seq++);
    bare_post(b, "/v1/reservations", json);
    const char *at = strstr(b->body, "\"reservation_id\":\"");
    if (!at) die("no reservation_id", b->body);
    at += strlen("\"reservation_id\":\"");
    const char *end = strchr(at, '"');
    if (!end || end - at > 128) die("bad reservation_id", b->body);
    snprintf(path, sizeof path, "/v1/reservations/%.*s/commit", (int)(end - at), at);
    snprintf(json, sizeof json,
             "{\"idempotency_key\":\"bench-curl-commit-%ld-%lu\","
             "\"actual\":{\"unit\":\"USD_MICROCENTS\",\"amount\":800}}",
             (long)getpid(), b->seq++);
    bare_post(b, path, json);
    if (!strstr(b->body, "\"COMMITTED\"")) die("not committed", b->body);
}
#endif

typedef struct {
    const char *key;
    const char *name;
    void (*run)(void *);
    void *ctx;
    double rate[MAX_ROUNDS], cpu[MAX_ROUNDS];
    double med_rate, med_cpu;
} path_t;

/* ---- CPU rounds ---------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return s[n / 2];
}

static void cpu_rounds(path_t *paths, int np, int rounds, int n, int warmup) {
    for (int k = 0; k < np; k++)
        for (int i = 0; i < warmup; i++) paths[k].run(paths[k].ctx); /* pools, allocator, server */
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < np; k++) {
            double c0 = now_us(CLOCK_PROCESS_CPUTIME_ID), t0 = now_us(CLOCK_MONOTONIC);
            for (int i = 0; i < n; i++) paths[k].run(paths[k].ctx);
            double wall = now_us(CLOCK_MONOTONIC) - t0;
            paths[k].cpu[r] = (now_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / n;
            paths[k].rate[r] = n * 1e6 / wall;
            printf("round %d %-28s %7.0f lifecycles/s %8.1f us CPU per lifecycle\n", r + 1,
                   paths[k].name, paths[k].rate[r], paths[k].cpu[r]);
            fflush(stdout);
        }
    }
    for (int k = 0; k < np; k++) {
        paths[k].med_rate = median(paths[k].rate, rounds);
        paths[k].med_cpu = median(paths[k].cpu, rounds);
        printf("median  %-28s %7.0f lifecycles/s %8.1f us CPU per lifecycle\n", paths[k].name,
               paths[k].med_rate, paths[k].med_cpu);
    }
}

/* ---- core's lifecycle-cpu, same run --------------------------------------------------- */

typedef struct {
    double core_cpu, bare_cpu, core_wall, bare_wall;
} core_t;

static double json_number(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(json, pat);
    if (!at) die("lifecycle-cpu printed no", key);
    return strtod(at + strlen(pat), NULL);
}

static bool core_figures(const char *bin, const char *cycles_bin, int rounds, int n,
                         core_t *out) {
    char cmd[2048], line[4096], last[4096] = "";
    if (!bin) return false;
    if (!cycles_bin) die("--lifecycle-cpu needs", "--cycles-bin");
    snprintf(cmd, sizeof cmd, "'%s' --cycles-bin '%s' --rounds %d --lifecycles %d --json", bin,
             cycles_bin, rounds, n);
    FILE *p = popen(cmd, "r");
    if (!p) die("popen", cmd);
    while (fgets(line, sizeof line, p))
        if (line[0] == '{') snprintf(last, sizeof last, "%s", line);
    if (pclose(p) != 0) die("lifecycle-cpu failed", cmd);
    out->core_cpu = json_number(last, "core_cpu_us");
    out->bare_cpu = json_number(last, "bare_cpu_us");
    out->core_wall = json_number(last, "core_wall_us");
    out->bare_wall = json_number(last, "bare_wall_us");
    printf("core    %-28s %7.0f lifecycles/s %8.1f us CPU per lifecycle\n",
           "core guarded lifecycle", 1e6 / out->core_wall, out->core_cpu);
    printf("core    %-28s %7.0f lifecycles/s %8.1f us CPU per lifecycle\n",
           "bare reqwest create+commit", 1e6 / out->bare_wall, out->bare_cpu);
    return true;
}

/* ---- memory in flight ---------------------------------------------------------------- */

/* Resident set size in bytes (/proc/self/statm, second field, in pages). */
static long rss_bytes(void) {
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &size, &resident) != 2) die("/proc/self/statm", "");
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cycles_guard **guards;
    size_t begun, failed, settled, committed, want;
    char first_error[1024];
    atomic_bool stop;
    atomic_long peak;
} flight_t;

static void note_error(flight_t *f, const char *what, const cycles_error *e) {
    if (!f->first_error[0])
        snprintf(f->first_error, sizeof f->first_error, "%s: %s", what,
                 e ? cycles_error_json(e) : "");
}

/* Completion of cycles_guard_begin_async (the completion thread): the guard is ours. */
static void on_begun(void *user, cycles_status st, cycles_guard *g, const cycles_error *e) {
    flight_t *f = user;
    pthread_mutex_lock(&f->mu);
    if (st == CYCLES_OK) {
        f->guards[f->begun++] = g;
    } else {
        f->failed++;
        note_error(f, "begin", e);
    }
    if (f->begun + f->failed == f->want) pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Completion of cycles_guard_finish_async: counts the checked commits. */
static void on_settled(void *user, cycles_status st, const cycles_outcome *o, const char *json,
                       size_t len, const cycles_error *e) {
    flight_t *f = user;
    (void)len;
    pthread_mutex_lock(&f->mu);
    if (st == CYCLES_OK && o->kind == CYCLES_OUTCOME_SETTLED &&
        o->settlement == CYCLES_SETTLEMENT_COMMITTED && o->charged == 800)
        f->committed++;
    else if (st == CYCLES_OK && !f->first_error[0])
        snprintf(f->first_error, sizeof f->first_error, "not committed: %.900s", json);
    else if (st != CYCLES_OK)
        note_error(f, "finish", e);
    if (++f->settled == f->want) pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void *sampler(void *user) {
    flight_t *f = user;
    const struct timespec tick = {0, 10 * 1000 * 1000};
    while (!atomic_load(&f->stop)) {
        long rss = rss_bytes();
        if (rss > atomic_load(&f->peak)) atomic_store(&f->peak, rss);
        nanosleep(&tick, NULL);
    }
    return NULL;
}

static void row(const char *what, long delta, size_t n) {
    if (n)
        printf("| %s | %.1f MiB | %.0f B |\n", what, delta / 1048576.0, (double)delta / (double)n);
    else
        printf("| %s | %.1f MiB | |\n", what, delta / 1048576.0);
}

/*
 * CONCURRENT guarded calls in flight at once (journal off): each begun with
 * cycles_guard_begin_async (reserved, heartbeat armed); "held" is measured once every begin
 * has completed and all of them wait, then again after malloc_trim(0) (glibc hands back the
 * free pages the ramp's transient buffers left: what remains is what the calls hold); then
 * each gets its actual and cycles_guard_finish_async. RSS is sampled every 10 ms for the peak.
 * "After" is once all have committed (checked), before and after malloc_trim(0): a leak would
 * stay after the trim. Each pass measures from its own base line (the next pass's base is the
 * trimmed heap).
 */
static void in_flight(const cycles_client *c, size_t n, int pass) {
    flight_t f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    f.want = n;
    f.guards = calloc(n, sizeof *f.guards);
    if (!f.guards) die("calloc", "guards");
    guarded((void *)c); /* every native path touched before the base line */
    long base = rss_bytes();
    atomic_store(&f.peak, base);
    pthread_t th;
    if (pthread_create(&th, NULL, sampler, &f) != 0) die("pthread_create", "sampler");

    double t0 = now_us(CLOCK_MONOTONIC);
    cycles_reserve r = reserve_spec();
    for (size_t i = 0; i < n; i++) {
        cycles_error *e = NULL;
        must(cycles_guard_begin_async(c, &r, on_begun, &f, &e), e, "cycles_guard_begin_async");
    }
    pthread_mutex_lock(&f.mu);
    while (f.begun + f.failed < n) pthread_cond_wait(&f.cv, &f.mu);
    pthread_mutex_unlock(&f.mu);
    if (f.failed) die("begin failed", f.first_error);
    double ramp = now_us(CLOCK_MONOTONIC) - t0;
    long held = rss_bytes();
    malloc_trim(0); /* the ramp's freed transients out of the figure: what the calls hold */
    long held_trimmed = rss_bytes();

    for (size_t i = 0; i < n; i++) {
        cycles_error *e = NULL;
        WORK = WORK + 1;
        must(cycles_guard_set_actual(f.guards[i], 800, &e), e, "cycles_guard_set_actual");
        must(cycles_guard_finish_async(f.guards[i], true, on_settled, &f, &e), e,
             "cycles_guard_finish_async");
        cycles_guard_free(f.guards[i]); /* allowed once finish_async returned */
    }
    pthread_mutex_lock(&f.mu);
    while (f.settled < n) pthread_cond_wait(&f.cv, &f.mu);
    pthread_mutex_unlock(&f.mu);
    double total = now_us(CLOCK_MONOTONIC) - t0;
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    if (f.committed != n) die("not all committed", f.first_error);
    free(f.guards);
    long peak = atomic_load(&f.peak);
    if (held > peak) peak = held;
    long after = rss_bytes();
    malloc_trim(0); /* what glibc gives back: retained free pages, not live memory */
    long trimmed = rss_bytes();

    printf("in flight, pass %d: %zu guarded calls (journal off), all reserved after %.1f s, all "
           "committed after %.1f s\n",
           pass, n, ramp / 1e6, total / 1e6);
    printf("| measure | delta from base | per in-flight call |\n|---|---:|---:|\n");
    row("RSS, peak (sampled every 10 ms)", peak - base, n);
    row("RSS, held (all reserved and waiting)", held - base, n);
    row("RSS, held, after malloc_trim(0)", held_trimmed - base, n);
    row("RSS after all settled", after - base, 0);
    row("RSS after all settled and malloc_trim(0)", trimmed - base, 0);
    fflush(stdout);
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
}

/* ---- main ------------------------------------------------------------------------------ */

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
    for (int i = 1; i + 1 < argc; i += 2)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return dflt;
}

static int int_arg(int argc, char **argv, const char *name, const char *dflt) {
    const char *v = arg(argc, argv, name, dflt);
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < 0 || x > 100000000) die("bad number for", name);
    return (int)x;
}

int main(int argc, char **argv) {
    if (argc % 2 != 1) die("usage", "options come as --name value pairs");
    const char *url = arg(argc, argv, "--url", NULL);
    if (!url) die("usage", "--url URL is required (a running `cycles serve`)");
    const char *key = arg(argc, argv, "--key", "cycles-local-key");
    int rounds = int_arg(argc, argv, "--rounds", "7");
    int n = int_arg(argc, argv, "--lifecycles", "1000");
    int warmup = int_arg(argc, argv, "--warmup", "300");
    int concurrent = int_arg(argc, argv, "--concurrent", "10000");
    int passes = int_arg(argc, argv, "--passes", "2");
    const char *paths_arg = arg(argc, argv, "--paths", "off,on");
    const char *journal = arg(argc, argv, "--journal-dir", NULL);
    if (rounds < 1 || rounds > MAX_ROUNDS || n < 1) die("bad", "--rounds (1-64) or --lifecycles");

    cycles_client *off = NULL, *on = NULL;
    cycles_error *e = NULL;
    must(cycles_client_new(url, key, "acme", "{\"journal_enabled\":false}", &off, &e), e,
         "client (journal off)");
    path_t paths[3];
    int np = 0;
    char list[256];
    snprintf(list, sizeof list, "%s", paths_arg);
#ifdef CYCLES_BENCH_CURL
    bare_t curl;
#endif
    for (char *save = NULL, *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        if (np == 3) die("too many paths", paths_arg);
        path_t *p = &paths[np++];
        memset(p, 0, sizeof *p);
        if (strcmp(k, "off") == 0) {
            *p = (path_t){.key = "off", .name = "c guarded, journal off", .run = guarded, .ctx = off};
        } else if (strcmp(k, "on") == 0) {
            char opts[1024];
            if (!journal) die("path on needs", "--journal-dir DIR");
            snprintf(opts, sizeof opts, "{\"journal_dir\":\"%s\"}", journal);
            must(cycles_client_new(url, key, "acme", opts, &on, &e), e, "client (journal on)");
            *p = (path_t){.key = "on", .name = "c guarded, journal on", .run = guarded, .ctx = on};
        } else if (strcmp(k, "curl") == 0) {
#ifdef CYCLES_BENCH_CURL
            bare_init(&curl, url, key);
            *p = (path_t){.key = "curl", .name = "libcurl create+commit", .run = bare, .ctx = &curl};
#else
            die("path curl", "this build has no libcurl (compile with -DCYCLES_BENCH_CURL -lcurl)");
#endif
        } else {
            die("unknown path (off, on, curl)", k);
        }
    }

    if (np) cpu_rounds(paths, np, rounds, n, warmup);
    core_t core = {0};
    bool have_core = core_figures(arg(argc, argv, "--lifecycle-cpu", NULL),
                                  arg(argc, argv, "--cycles-bin", NULL), rounds, n, &core);
    const path_t *baseline = NULL;
    for (int k = 0; k < np; k++)
        if (strcmp(paths[k].key, "curl") == 0) baseline = &paths[k];
    for (int k = 0; k < np; k++) {
        const path_t *p = &paths[k];
        if (p == baseline) continue;
        if (baseline)
            printf("ratio %s / libcurl: rate %.2fx, CPU %.2fx\n", p->name,
                   p->med_rate / baseline->med_rate, p->med_cpu / baseline->med_cpu);
        if (have_core)
            printf("ratio %s / core: rate %.2fx, CPU %.2fx\n", p->name,
                   p->med_rate * core.core_wall / 1e6, p->med_cpu / core.core_cpu);
    }
    if (have_core)
        printf("ratio core / bare reqwest (lifecycle-cpu): CPU %.2fx, wall %.2fx\n",
               core.core_cpu / core.bare_cpu, core.core_wall / core.bare_wall);
    fflush(stdout);

    for (int p = 1; concurrent > 0 && p <= passes; p++) in_flight(off, (size_t)concurrent, p);

    cycles_client_free(off);
    cycles_client_free(on);
#ifdef CYCLES_BENCH_CURL
    if (baseline) {
        curl_slist_free_all(curl.headers);
        curl_easy_cleanup(curl.h);
        curl_global_cleanup();
    }
#endif
    must(cycles_shutdown(5000, NULL, &e), e, "cycles_shutdown");
    return 0;
}
