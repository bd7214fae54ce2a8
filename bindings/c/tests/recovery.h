/* Helpers of the C recovery tests (test_recovery.c): the local server's request log and ledger
 * as parsed JSON, journal paths and records through the library's own journal exports, events
 * collected from the callback, and child processes (this program re-executed) that settle,
 * flush or drain, and are killed with SIGKILL. Nothing stands in for the server: every request
 * goes over real HTTP to the local server running in the test process. */
#ifndef CYCLES_TEST_RECOVERY_H
#define CYCLES_TEST_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "check.h"
#include "json.h"

extern cycles_error *ERR;

/* The string member `key` of an object, or NULL when absent or not a string. */
const char *jstr(const jv *obj, const char *key);
/* The integer member `key`, or `dflt` when absent or null. */
long long jnum(const jv *obj, const char *key, long long dflt);
bool jnull(const jv *obj, const char *key); /* absent or null */
bool jbool(const jv *obj, const char *key);

/* A list of pointers into a parsed array (the tree stays owned by `root`). */
typedef struct {
    jv *root;
    jv **items;
    size_t n;
} jlist;
void jlist_free(jlist *l);

jv *server_json(cycles_local_server *s, bool ledger); /* parsed requests or ledger */
/* Commits of `rid` and events carrying `key`, in arrival order. */
jlist settlement_requests(cycles_local_server *s, const char *rid, const char *key);
/* Applied commits of `rid` and applied events with `key`. */
void settlements(cycles_local_server *s, const char *rid, const char *key, int *commits, int *events);
int count_ops(cycles_local_server *s, const char *operation);
void no_release(cycles_local_server *s);
void add_fault(cycles_local_server *s, const char *operation, const char *fault_json, const char *rid);

/* <dir>/<fp16 of the identity>/<v2 file name of rid>; free() it. */
char *record_path(const char *dir, const char *url, const char *api_key, const char *tenant, const char *rid);
char *partition_dir(const char *dir, const char *url, const char *api_key, const char *tenant);
/* The parsed record of a file (cycles_journal_parse_record), NULL when there is no file. */
jv *read_record(const char *path);
jv *parse_record(const char *data, size_t len); /* cycles_journal_parse_record, parsed */
size_t record_files(const char *dir); /* *.json files under dir, recursively */
bool exists(const char *path);
void write_file(const char *path, const char *data, size_t len);
char *make_temp_dir(void); /* free() it; remove_tree() it */
void remove_tree(const char *dir);
int64_t now_ms(void);
double mono_s(void);

/* -- the journal under test ------------------------------------------------------------
 * CYCLES_TEST_JOURNAL_STORE=redis puts the journal of the tests that use one in a redis-server
 * each test_journal starts (AOF with appendfsync always, as the store requires; its data
 * beside the directory; SIGKILLed by tj_close or at exit); unset, empty or "file" is the
 * directory; any other value fails the test. The tests look into the journal only through
 * tj_*, so the same assertions hold for both stores: files under dir/<partition> on the file
 * store, the keys cycles:journal:{<partition>}:r:<file> and :q:<name> (with the sets
 * :records and :quarantined) on Redis, read and written with redis-cli. */
bool tj_on_redis(void);

typedef struct {
    char dir[600];  /* the file store's directory; on Redis it must stay unused */
    char url[128];  /* the journal_url on Redis, "" on the file store */
    int port;
    pid_t redis;    /* 0 on the file store */
} test_journal;

/* The journal at `dir` (need not exist): the directory, or with `redis` a new redis-server. */
void tj_open(test_journal *j, const char *dir, bool redis);
void tj_close(test_journal *j); /* kills its redis-server */
/* The client options' members that journal there: "journal_dir":"..."[,"journal_url":"..."] */
void tj_options(const test_journal *j, char *out, size_t n);
bool tj_dir_untouched(const test_journal *j); /* the file store, or Redis and no directory */

typedef struct {
    char *part; /* the partition (fp16) */
    char *name; /* the record's file name, or the quarantine name */
    char *data;
    size_t len;
} tj_entry;
/* The records (or quarantined records) of every partition, sorted; tj_list_free() them. */
size_t tj_list(const test_journal *j, bool quarantined, tj_entry **out);
void tj_list_free(tj_entry *e, size_t n);
size_t tj_records(const test_journal *j);
size_t tj_quarantined(const test_journal *j);
/* The bytes of record (or quarantined) `name` of partition `part`, NULL when absent; free(). */
char *tj_bytes(const test_journal *j, const char *part, const char *name, bool quarantined, size_t *len);
/* The bytes / parsed record (cycles_journal_parse_record) of `rid`'s record in the partition
 * of (url, api_key, tenant), NULL when absent. */
char *tj_record_bytes(const test_journal *j, const char *url, const char *api_key, const char *tenant,
                      const char *rid, size_t *len);
jv *tj_record(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *rid);
/* Puts `data` as record `file` of the partition of (url, api_key, tenant), as another
 * writer would have (another SDK's record, a corrupt one, a copy from another host). */
void tj_put(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *file,
            const char *data, size_t len);
void tj_remove(const test_journal *j, const char *url, const char *api_key, const char *tenant, const char *rid);
/* The valid pending records of every partition, as cycles_journal_pending reports them for a
 * directory (reservation_id, mode, file, partition on Redis too). */
jv *tj_pending(const test_journal *j);
/* The record name an event's `file` (core's location: the path, or "<url> <record key>" on
 * Redis) names, checked to be in this journal. */
const char *tj_located_name(const test_journal *j, const char *location);
char *fingerprint(const char *url, const char *api_key, const char *tenant); /* free() it */

/* Events delivered to a callback, kept as parsed objects. */
typedef struct events events;
events *events_new(void);
void events_free(events *e);
void on_event(void *user, const char *json, size_t len);
size_t events_count(events *e, const char *kind, const char *rid);
/* The first such event (owned by `e`), or NULL. Call once the events stopped arriving. */
const jv *events_first(events *e, const char *kind, const char *rid);

/* A child process: this program run as `child SPEC_JSON`. */
typedef struct {
    pid_t pid;
    char result[512];
} child;
void child_start(child *c, const char *spec_json, const char *result_path);
jv *child_finish(child *c, double limit_s); /* exit 0 required; the result document */
void child_kill9(child *c);
void child_stop(child *c);
int child_main(const char *spec_json);
/* Events of a child's result of `kind` (and `rid` unless NULL). */
size_t result_events(const jv *result, const char *kind, const char *rid, const jv **first);

#define WAIT_FOR(limit_s, what, cond)                                                       \
    do {                                                                                    \
        double wf_deadline_ = mono_s() + (limit_s);                                         \
        while (!(cond)) {                                                                   \
            CHECK(mono_s() < wf_deadline_, "timed out waiting for %s", what);               \
            usleep(1000);                                                                   \
        }                                                                                   \
    } while (0)

#endif
