/* Fork detection: after a client has been used (core's runtime is running), a forked child
 * that calls into the library gets CYCLES_RUNTIME naming fork() at once, instead of hanging
 * on a runtime whose threads did not survive the fork. The child reports through its exit
 * status (it never returns into the parent's code) and is killed by alarm() if it hangs; the
 * parent, untouched, keeps working. A second child exits through exit(), which runs the
 * thread's destructors: the runtime and connections the parent's thread drives its calls on
 * (its third call on) were copied into the child, and dropping them there must not unregister
 * the parent's sockets from the epoll instance both share; the parent's next calls on the
 * same connection still get their responses. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static cycles_error *ERR;

/* In the child: 0 when `st` is CYCLES_RUNTIME with a message naming fork(), else a code. */
static int refused(cycles_status st, cycles_error *e, int code) {
    int ok = st == CYCLES_RUNTIME && e && strstr(cycles_error_message(e), "fork");
    if (!ok) fprintf(stderr, "child call %d: status %d: %s\n", code, (int)st, e ? cycles_error_json(e) : "no error");
    cycles_error_free(e);
    return ok ? 0 : code;
}

static int child(cycles_client *c) {
    alarm(5); /* a hang is a failure (SIGALRM), not a stuck test */
    cycles_error *e = NULL;
    char *out = NULL;
    cycles_status st = cycles_client_call(c, "get_balances", "{\"tenant\":\"acme\"}", &out, &e);
    int rc = refused(st, e, 10);
    if (rc) return rc;
    cycles_reserve r = { 0 };
    r.subject.tenant = "acme";
    r.action_kind = "llm.completion";
    r.action_name = "test-model";
    r.estimate = 10;
    cycles_guard *g = NULL;
    e = NULL;
    st = cycles_guard_begin(c, &r, &g, &e);
    if ((rc = refused(st, e, 11))) return rc;
    if (g) return 12;
    e = NULL;
    cycles_local_server *s = NULL;
    st = cycles_local_server_start(NULL, &s, &e);
    if ((rc = refused(st, e, 13))) return rc;
    e = NULL;
    st = cycles_shutdown(0, NULL, &e);
    if ((rc = refused(st, e, 14))) return rc;
    return 0;
}

int main(void) {
    cycles_local_server *s = NULL;
    OK(cycles_local_server_start(NULL, &s, &ERR));
    cycles_client *c = NULL;
    OK(cycles_client_new(cycles_local_server_url(s), cycles_local_server_api_key(s), NULL,
                         "{\"journal_enabled\":false,\"request_timeout_ms\":2000}", &c, &ERR));
    char *out = NULL;
    /* Three calls: the third is driven on this thread, over a connection of its own. */
    for (int i = 0; i < 3; i++) {
        OK(cycles_client_call(c, "get_balances", "{\"tenant\":\"acme\"}", &out, &ERR));
        cycles_string_free(out);
    }
    fflush(NULL);
    pid_t quiet = fork();
    CHECK(quiet >= 0, "fork");
    if (quiet == 0) exit(0); /* exit: this thread's destructors run in the child */
    int quiet_status = 0;
    CHECK(waitpid(quiet, &quiet_status, 0) == quiet, "waitpid");
    CHECK(WIFEXITED(quiet_status) && WEXITSTATUS(quiet_status) == 0, "the exiting child failed");
    for (int i = 0; i < 3; i++) {
        OK(cycles_client_call(c, "get_balances", "{\"tenant\":\"acme\"}", &out, &ERR));
        cycles_string_free(out);
    }
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) _exit(child(c)); /* _exit: no atexit handlers or destructors in the child */
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status), "the child did not exit (signal %d: a hang killed by alarm?)",
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WEXITSTATUS(status) == 0, "the child's call %d was not refused with CYCLES_RUNTIME naming fork()",
          WEXITSTATUS(status));
    /* The parent is unaffected. */
    OK(cycles_client_call(c, "get_balances", "{\"tenant\":\"acme\"}", &out, &ERR));
    cycles_string_free(out);
    OK(cycles_client_close(c, 0, NULL, &ERR));
    cycles_client_free(c);
    cycles_local_server_free(s);
    OK(cycles_shutdown(1000, NULL, &ERR));
    printf("fork: the child's calls are refused with CYCLES_RUNTIME, the parent works: ok\n");
    return 0;
}
