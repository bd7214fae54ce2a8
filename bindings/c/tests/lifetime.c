/* Process lifetime: each mode leaves something running when main returns, and the process
 * must still exit by itself with status 0 (bindings/c/scripts/test.sh runs every mode as a
 * plain program under a time limit, not under CTest's harness):
 *   idle      a client that was used once and is never closed or freed
 *   pending   a settlement left pending in the journal (the server failed it), client open
 *   guard     a guarded action begun (heartbeat running) and never finished or freed
 *   callback  a registered event callback that has received events, client open
 * No cycles_shutdown is called: exit must not depend on it. */
#include <string.h>
#include <unistd.h>

#include "check.h"

static cycles_error *ERR;

static void on_event(void *user, const char *json, size_t len) {
    (void)json;
    (void)len;
    ++*(int *)user;
}

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: lifetime idle|pending|guard|callback");
    const char *mode = argv[1];
    cycles_local_server *s = NULL;
    OK(cycles_local_server_start(NULL, &s, &ERR));
    char dir[] = "/tmp/cycles-c-lifetime.XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char opts[256];
    snprintf(opts, sizeof opts, "{\"journal_dir\":\"%s\",\"settle_max_attempts\":1}", dir);
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(s), cycles_local_server_api_key(s), NULL, opts, &c, &ERR));
    static int events;
    if (!strcmp(mode, "callback")) OK(cycles_client_set_event_callback(c, on_event, &events, &ERR));
    cycles_reserve r = { 0 };
    r.subject.tenant = "acme";
    r.action_kind = "llm.completion";
    r.action_name = "test-model";
    r.estimate = 1000;
    r.ttl_ms = 60000;
    cycles_guard *g = NULL;
    if (!strcmp(mode, "idle")) {
        char *out = NULL;
        OK(cycles_client_call(c, "get_balances", "{\"tenant\":\"acme\"}", &out, &ERR));
        cycles_string_free(out);
    } else if (!strcmp(mode, "pending")) {
        OK(cycles_local_server_add_fault(s, "{\"operation\":\"commitReservation\",\"fault\":{\"kind\":\"server_error\",\"status\":500},\"times\":0}", &ERR));
        OK(cycles_guard_begin(c, &r, &g, &ERR));
        OK(cycles_guard_set_actual(g, 10, &ERR));
        cycles_outcome o;
        OK(cycles_guard_finish(g, true, &o, NULL, &ERR));
        CHECK(o.settlement == CYCLES_SETTLEMENT_PENDING, "pending: %d", (int)o.settlement);
        cycles_guard_free(g);
        char *pending = NULL;
        OK(cycles_journal_pending(dir, NULL, NULL, NULL, &pending, &ERR));
        CHECK(strstr(pending, "reservation_id"), "a record is pending: %s", pending);
        cycles_string_free(pending);
    } else if (!strcmp(mode, "guard")) {
        r.ttl_ms = 2000;
        OK(cycles_guard_begin(c, &r, &g, &ERR));
        OK(cycles_guard_add(g, 5, &ERR));
        usleep(1200 * 1000); /* the heartbeat is running */
    } else if (!strcmp(mode, "callback")) {
        OK(cycles_guard_begin(c, &r, &g, &ERR));
        OK(cycles_guard_set_actual(g, 10, &ERR));
        OK(cycles_guard_finish(g, true, NULL, NULL, &ERR));
        cycles_guard_free(g);
        for (int i = 0; i < 200 && events == 0; i++) usleep(10 * 1000);
        CHECK(events > 0, "events reached the callback");
    } else {
        CHECK(0, "unknown mode %s", mode);
    }
    printf("lifetime %s: returning from main\n", mode);
    return 0;
}
