/* Helpers of the C recovery tests (see recovery.h). */
#include "recovery.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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

/* Whole, as another SDK's atomic write: staged as `<path>.staged.tmp` (a name the journal's
 * scan skips), then renamed in, since a client's background replay may be scanning the
 * directory and would quarantine a half-written record as corrupt. */
void write_file(const char *path, const char *data, size_t len) {
    char staged[4096];
    CHECK(snprintf(staged, sizeof staged, "%s.staged.tmp", path) < (int)sizeof staged,
          "path too long: %s", path);
    FILE *f = fopen(staged, "wb");
    CHECK(f != NULL, "open %s: %s", staged, strerror(errno));
    CHECK(fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", staged);
    CHECK(rename(staged, path) == 0, "rename %s: %s", path, strerror(errno));
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

/* -- the journal under test -------------------------------------------------------------- */

bool tj_on_redis(void) {
    const char *v = getenv("CYCLES_TEST_JOURNAL_STORE");
    if (!v || !v[0] || !strcmp(v, "file")) return false;
    CHECK(!strcmp(v, "redis"), "CYCLES_TEST_JOURNAL_STORE=%s: expected file or redis", v);
    return true;
}

char *fingerprint(const char *url, const char *api_key, const char *tenant) {
    char *fp = NULL;
    OK(cycles_journal_fingerprint(url, api_key, tenant, &fp, &ERR));
    char *out = strdup(fp);
    cycles_string_free(fp);
    return out;
}

/* Every redis-server started, killed at exit too: a failed CHECK exits without tj_close. */
static pid_t redis_pids[8];

static void kill_redis_servers(void) {
    for (size_t i = 0; i < sizeof redis_pids / sizeof *redis_pids; i++)
        if (redis_pids[i] > 0) {
            kill(redis_pids[i], SIGKILL);
            waitpid(redis_pids[i], NULL, 0);
            redis_pids[i] = 0;
        }
}

/* Runs `redis-cli -e -h 127.0.0.1 -p PORT [-x] args...` (-x: `in` is the last argument, from
 * a memory file; -e: an error reply fails it) and returns its stdout, NUL-terminated, with
 * its length in *len. Failing is a failed CHECK unless `quiet` (then NULL, stderr dropped). */
static char *redis_cli(const test_journal *j, const char *in, size_t in_len, size_t *len, bool quiet,
                       const char *const *args) {
    char port[16];
    snprintf(port, sizeof port, "%d", j->port);
    const char *argv[16] = { "redis-cli", "-e", "-h", "127.0.0.1", "-p", port };
    size_t n = 6;
    if (in) argv[n++] = "-x";
    for (size_t i = 0; args[i]; i++) {
        CHECK(n < 15, "too many redis-cli arguments");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    int out = memfd_create("redis-cli-out", MFD_CLOEXEC), input = -1;
    CHECK(out >= 0, "memfd_create: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in) {
        input = memfd_create("redis-cli-in", MFD_CLOEXEC);
        CHECK(input >= 0 && write(input, in, in_len) == (ssize_t)in_len && lseek(input, 0, SEEK_SET) == 0,
              "redis-cli input: %s", strerror(errno));
        posix_spawn_file_actions_adddup2(&fa, input, 0);
    } else {
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&fa, out, 1);
    if (quiet) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, "redis-cli", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK(rc == 0, "cannot run redis-cli (%s): install redis-server (apt-get install redis-server)", strerror(rc));
    if (input >= 0) close(input);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid redis-cli");
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        close(out);
        CHECK(quiet, "redis-cli %s on port %d failed (status %d)", args[0], j->port, status);
        return NULL;
    }
    struct stat st;
    CHECK(fstat(out, &st) == 0, "fstat");
    char *text = malloc((size_t)st.st_size + 1);
    CHECK(pread(out, text, (size_t)st.st_size, 0) == st.st_size, "read redis-cli output");
    text[st.st_size] = 0;
    close(out);
    if (len) *len = (size_t)st.st_size;
    return text;
}

/* A port free on loopback now (redis-server binds it next; a lost race is retried). */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t n = sizeof a;
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &n) == 0,
          "a free port: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

static bool redis_started(test_journal *j, const char *data) {
    char port[16], log[760];
    j->port = free_port();
    snprintf(port, sizeof port, "%d", j->port);
    snprintf(log, sizeof log, "%s/redis.log", data);
    const char *argv[] = { "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--dir", data,
                           "--logfile", log, "--daemonize", "no", "--protected-mode", "no", "--appendonly", "yes",
                           "--appendfsync", "always", NULL };
    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        /* It never outlives this test, however the test ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    j->redis = pid;
    size_t slot = 0;
    while (slot < sizeof redis_pids / sizeof *redis_pids && redis_pids[slot] > 0) slot++;
    CHECK(slot < sizeof redis_pids / sizeof *redis_pids, "too many redis-servers");
    redis_pids[slot] = pid;
    static bool registered;
    if (!registered) registered = atexit(kill_redis_servers) == 0;
    const char *ping[] = { "PING", NULL };
    for (double deadline = mono_s() + 10; mono_s() < deadline; usleep(10000)) {
        char *pong = redis_cli(j, NULL, 0, NULL, true, ping);
        bool up = pong && !strcmp(pong, "PONG\n");
        free(pong);
        if (up) return true;
        if (waitpid(pid, NULL, WNOHANG) == pid) break; /* exited: the port was taken meanwhile */
    }
    tj_close(j);
    return false;
}

void tj_open(test_journal *j, const char *dir, bool redis) {
    memset(j, 0, sizeof *j);
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    if (!redis) return;
    char data[700];
    snprintf(data, sizeof data, "%s.redis-data", dir);
    CHECK(mkdir(data, 0700) == 0, "mkdir %s: %s", data, strerror(errno));
    bool up = false;
    for (int attempt = 0; attempt < 3 && !up; attempt++) up = redis_started(j, data);
    CHECK(up, "redis-server did not come up (log: %s/redis.log)", data);
    snprintf(j->url, sizeof j->url, "redis://127.0.0.1:%d/0?lease_ms=3000", j->port);
}

void tj_close(test_journal *j) {
    if (j->redis <= 0) return;
    kill(j->redis, SIGKILL);
    waitpid(j->redis, NULL, 0);
    for (size_t i = 0; i < sizeof redis_pids / sizeof *redis_pids; i++)
        if (redis_pids[i] == j->redis) redis_pids[i] = 0;
    j->redis = 0;
}

void tj_options(const test_journal *j, char *out, size_t n) {
    /* On Redis its leases last 3 s: a SIGKILLed holder's record is taken over within a
     * drain's time (the default, 60 s, would outlast it). */
    if (j->url[0]) snprintf(out, n, "\"journal_dir\":\"%s\",\"journal_url\":\"%s\"", j->dir, j->url);
    else snprintf(out, n, "\"journal_dir\":\"%s\"", j->dir);
}

bool tj_dir_untouched(const test_journal *j) { return !j->url[0] || !exists(j->dir); }

static const char *QUARANTINE_MARKS[] = { ".corrupt-", ".unsupported-", ".unrecoverable-" };

static bool is_quarantine_name(const char *name) {
    for (size_t i = 0; i < 3; i++)
        if (strstr(name, QUARANTINE_MARKS[i])) return true;
    return false;
}

static int entry_order(const void *a, const void *b) {
    const tj_entry *x = a, *y = b;
    int c = strcmp(x->part, y->part);
    return c ? c : strcmp(x->name, y->name);
}

static void redis_key(char *out, size_t n, const char *part, bool quarantined, const char *name) {
    snprintf(out, n, "cycles:journal:{%s}:%s:%s", part, quarantined ? "q" : "r", name);
}

/* GET: the store never holds an empty record, so an empty reply is "no such key". */
static char *redis_get(const test_journal *j, const char *key, size_t *len) {
    const char *get[] = { "GET", key, NULL };
    size_t n = 0;
    char *v = redis_cli(j, NULL, 0, &n, false, get);
    CHECK(n > 0 && v[n - 1] == '\n', "GET %s: no newline", key);
    v[--n] = 0;
    if (n == 0) {
        free(v);
        return NULL;
    }
    if (len) *len = n;
    return v;
}

size_t tj_list(const test_journal *j, bool quarantined, tj_entry **out) {
    size_t n = 0, cap = 8;
    tj_entry *e = calloc(cap, sizeof *e);
    if (!j->url[0]) {
        DIR *top = opendir(j->dir);
        for (struct dirent *p; top && (p = readdir(top));) {
            if (p->d_name[0] == '.') continue;
            char part[900];
            snprintf(part, sizeof part, "%s/%s", j->dir, p->d_name);
            DIR *d = opendir(part);
            for (struct dirent *f; d && (f = readdir(d));) {
                size_t l = strlen(f->d_name);
                bool q = is_quarantine_name(f->d_name);
                bool record = !q && l > 5 && !strcmp(f->d_name + l - 5, ".json");
                if (quarantined ? !q : !record) continue;
                if (n == cap) e = realloc(e, (cap *= 2) * sizeof *e);
                e[n].part = strdup(p->d_name);
                e[n].name = strdup(f->d_name);
                e[n].data = tj_bytes(j, p->d_name, f->d_name, quarantined, &e[n].len);
                if (e[n].data) {
                    n++;
                } else { /* removed since readdir */
                    free(e[n].part);
                    free(e[n].name);
                }
            }
            if (d) closedir(d);
        }
        if (top) closedir(top);
    } else {
        char pattern[64];
        snprintf(pattern, sizeof pattern, "cycles:journal:*:%s:*", quarantined ? "q" : "r");
        const char *keys[] = { "KEYS", pattern, NULL };
        char *text = redis_cli(j, NULL, 0, NULL, false, keys), *save = NULL;
        char sep[8];
        snprintf(sep, sizeof sep, "}:%s:", quarantined ? "q" : "r");
        for (char *k = strtok_r(text, "\n", &save); k; k = strtok_r(NULL, "\n", &save)) {
            const char *prefix = "cycles:journal:{";
            char *end = strstr(k, sep);
            CHECK(!strncmp(k, prefix, strlen(prefix)) && end, "an unexpected key %s", k);
            if (n == cap) e = realloc(e, (cap *= 2) * sizeof *e);
            e[n].data = redis_get(j, k, &e[n].len);
            if (!e[n].data) continue; /* removed since KEYS */
            e[n].part = strndup(k + strlen(prefix), (size_t)(end - k) - strlen(prefix));
            e[n].name = strdup(end + strlen(sep));
            n++;
        }
        free(text);
    }
    qsort(e, n, sizeof *e, entry_order);
    *out = e;
    return n;
}

void tj_list_free(tj_entry *e, size_t n) {
    for (size_t i = 0; i < n; i++) free(e[i].part), free(e[i].name), free(e[i].data);
    free(e);
}

static size_t tj_count(const test_journal *j, bool quarantined) {
    tj_entry *e;
    size_t n = tj_list(j, quarantined, &e);
    tj_list_free(e, n);
    return n;
}

size_t tj_records(const test_journal *j) { return tj_count(j, false); }
size_t tj_quarantined(const test_journal *j) { return tj_count(j, true); }

char *tj_bytes(const test_journal *j, const char *part, const char *name, bool quarantined, size_t *len) {
    char at[1200];
    if (!j->url[0]) {
        (void)quarantined; /* one directory holds both */
        snprintf(at, sizeof at, "%s/%s/%s", j->dir, part, name);
        return read_file(at, len);
    }
    redis_key(at, sizeof at, part, quarantined, name);
    return redis_get(j, at, len);
}

static char *file_name_of(const char *rid) {
    char *name = NULL;
    OK(cycles_journal_file_name(rid, &name, &ERR));
    char *out = strdup(name);
    cycles_string_free(name);
    return out;
}

char *tj_record_bytes(const test_journal *j, const char *url, const char *api_key, const char *tenant,
                      const char *rid, size_t *len) {
    char *part = fingerprint(url, api_key, tenant), *name = file_name_of(rid);
    char *data = tj_bytes(j, part, name, false, len);
    free(part);
    free(name);
    return data;
}

jv *parse_record(const char *data, size_t len) {
    char *out = NULL;
    OK(cycles_journal_parse_record((const uint8_t *)data, len, &out, &ERR));
    jv *rec = json_parse(out);
    CHECK(rec != NULL, "record json %s", out);
    cycles_string_free(out);
    return rec;
}

jv *tj_record(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *rid) {
    size_t len = 0;
    char *data = tj_record_bytes(j, url, api_key, tenant, rid, &len);
    if (!data) return NULL;
    jv *rec = parse_record(data, len);
    free(data);
    return rec;
}

void tj_put(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *file,
            const char *data, size_t len) {
    char *part = fingerprint(url, api_key, tenant);
    char at[1200];
    if (!j->url[0]) {
        mkdir(j->dir, 0700);
        snprintf(at, sizeof at, "%s/%s", j->dir, part);
        mkdir(at, 0700);
        snprintf(at, sizeof at, "%s/%s/%s", j->dir, part, file);
        write_file(at, data, len);
    } else {
        char set[128];
        redis_key(at, sizeof at, part, false, file);
        snprintf(set, sizeof set, "cycles:journal:{%s}:records", part);
        const char *put[] = { "SET", at, NULL }, *add[] = { "SADD", set, file, NULL };
        free(redis_cli(j, data, len, NULL, false, put));
        free(redis_cli(j, NULL, 0, NULL, false, add));
    }
    free(part);
}

void tj_remove(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *rid) {
    char *part = fingerprint(url, api_key, tenant), *name = file_name_of(rid);
    char at[1200];
    if (!j->url[0]) {
        snprintf(at, sizeof at, "%s/%s/%s", j->dir, part, name);
        CHECK(unlink(at) == 0, "unlink %s: %s", at, strerror(errno));
    } else {
        char set[128];
        redis_key(at, sizeof at, part, false, name);
        snprintf(set, sizeof set, "cycles:journal:{%s}:records", part);
        const char *del[] = { "DEL", at, NULL }, *rem[] = { "SREM", set, name, NULL };
        char *gone = redis_cli(j, NULL, 0, NULL, false, del);
        CHECK(!strcmp(gone, "1\n"), "DEL %s: %s", at, gone);
        free(gone);
        free(redis_cli(j, NULL, 0, NULL, false, rem));
    }
    free(part);
    free(name);
}

jv *tj_pending(const test_journal *j) {
    char *text = NULL;
    if (!j->url[0]) {
        char *out = NULL;
        OK(cycles_journal_pending(j->dir, NULL, NULL, NULL, &out, &ERR));
        text = strdup(out);
        cycles_string_free(out);
    } else {
        /* What cycles_journal_pending reports of a directory, for the keys: every record
         * that parses (what does not is left for quarantine). */
        tj_entry *e;
        size_t n = tj_list(j, false, &e);
        text = strdup("[");
        for (size_t i = 0; i < n; i++) {
            char *out = NULL, *piece = NULL;
            cycles_error *err = NULL;
            if (cycles_journal_parse_record((const uint8_t *)e[i].data, e[i].len, &out, &err) != CYCLES_OK) {
                cycles_error_free(err);
                continue;
            }
            jv *rec = json_parse(out);
            cycles_string_free(out);
            char *rid = json_dump(json_get(rec, "reservation_id")), *mode = json_dump(json_get(rec, "mode"));
            CHECK(asprintf(&piece, "%s{\"reservation_id\":%s,\"mode\":%s,\"file\":\"%s\",\"partition\":\"%s\","
                           "\"legacy\":false}", text[1] ? "," : "", rid, mode, e[i].name, e[i].part) > 0, "asprintf");
            text = realloc(text, strlen(text) + strlen(piece) + 2);
            strcat(text, piece);
            free(piece);
            free(rid);
            free(mode);
            json_free(rec);
        }
        text = realloc(text, strlen(text) + 2);
        strcat(text, "]");
        tj_list_free(e, n);
    }
    jv *p = json_parse(text);
    CHECK(p && p->kind == J_ARR, "pending: %s", text);
    free(text);
    return p;
}

const char *tj_located_name(const test_journal *j, const char *location) {
    CHECK(location != NULL, "no location");
    if (!j->url[0]) {
        CHECK(!strncmp(location, j->dir, strlen(j->dir)), "%s is not under %s", location, j->dir);
        return strrchr(location, '/') + 1;
    }
    char at[64];
    snprintf(at, sizeof at, "redis://127.0.0.1:%d/", j->port);
    const char *key = strstr(location, " cycles:journal:{"), *r = key ? strstr(key, "}:r:") : NULL;
    CHECK(!strncmp(location, at, strlen(at)) && r, "%s is not a record key of %s", location, at);
    return r + 4;
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

/* The child: a FRESH client from the spec (only the journal, spec.dir or on Redis
 * spec.journal_url, crosses from an earlier process),
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
    /* The journal of the spec: its directory, and on Redis its journal_url too. */
    const char *journal_url = jstr(spec, "journal_url");
    char opts[1024], url_member[200] = "";
    if (journal_url) snprintf(url_member, sizeof url_member, ",\"journal_url\":\"%s\"", journal_url);
    snprintf(opts, sizeof opts,
             "{\"journal_dir\":\"%s\"%s,\"settle_max_attempts\":%lld,\"replay_interval_ms\":3600000}",
             jstr(spec, "dir"), url_member, jnum(spec, "max_attempts", 5));
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
