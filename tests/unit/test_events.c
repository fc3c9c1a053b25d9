/* The event logs of streamed executions (server/events.h), without HTTP: caps, the memory
 * budget, findable or not, ids, closing, and the end of everything at stop. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/events.h"
#include "tap.h"

static json_t *text(size_t n)
{
    char buf[8192];
    memset(buf, 'x', n < sizeof(buf) ? n : sizeof(buf) - 1);
    buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
    return json_pack("{s:s}", "text", buf);
}

TEST(cap_and_force)
{
    struct tc_events *e = NULL;
    CHECK(tc_events_new("00000000-0000-7000-8000-000000000001", 4096, true, &e) == 0);
    json_t *d = text(1000);
    int r = 0, pushed = 0;
    while ((r = tc_events_push(e, "stdout", "1-0", d, false)) == 0)
        pushed++;
    CHECK(r == -ENOSPC);
    CHECK(pushed >= 2 && pushed <= 4);
    CHECK(tc_events_push(e, "result", "end", d, true) == 0); /* the result always fits */
    tc_events_close(e);
    CHECK(tc_events_closed(e));
    CHECK(tc_events_push(e, "result", "end", d, true) == -EPIPE);
    /* lingering: still found by its id */
    struct tc_events *f = tc_events_find("00000000-0000-7000-8000-000000000001");
    CHECK(f == e);
    tc_events_unref(f);
    tc_events_unref(e);
    json_decref(d);
}

TEST(not_findable)
{
    struct tc_events *e = NULL;
    CHECK(tc_events_new("00000000-0000-7000-8000-000000000002", 1 << 20, false, &e) == 0);
    CHECK(tc_events_find("00000000-0000-7000-8000-000000000002") == NULL);
    CHECK(tc_events_find("no-such") == NULL);
    tc_events_close(e);
    tc_events_unref(e);
}

TEST(memory_budget)
{
    /* Many logs each under their own cap: together they stop at TC_EVENTS_MAX_BYTES. */
    json_t *d = text(8000);
    struct tc_events *logs[64] = {0};
    size_t total = 0;
    int refused = 0;
    for (int i = 0; i < 64; i++) {
        char id[40];
        snprintf(id, sizeof(id), "00000000-0000-7000-8000-%012d", 100 + i);
        CHECK(tc_events_new(id, 64u << 20, true, &logs[i]) == 0);
        for (int k = 0; k < 1000 && logs[i]; k++) {
            int r = tc_events_push(logs[i], "stdout", "1-0", d, false);
            if (r == -ENOSPC) {
                refused++;
                break;
            }
            CHECK(r == 0);
            total += 8000;
        }
    }
    CHECK(refused > 0);
    CHECK(total <= TC_EVENTS_MAX_BYTES);
    CHECK(total > TC_EVENTS_MAX_BYTES / 2);
    for (int i = 0; i < 64; i++) {
        tc_events_close(logs[i]);
        tc_events_unref(logs[i]);
    }
    json_decref(d);
}

static int polls;
static bool poll_twice(struct tc_events *e, void *ud)
{
    (void)ud;
    if (++polls < 2)
        return false;
    tc_events_close(e);
    return true;
}
static int dones;
static void count_done(void *ud)
{
    (void)ud;
    dones++;
}

TEST(watch_and_stop)
{
    struct tc_events *e = NULL, *w = NULL;
    CHECK(tc_events_new("00000000-0000-7000-8000-000000000003", 1 << 20, false, &e) == 0);
    CHECK(tc_events_watch(e, poll_twice, count_done, NULL) == 0);
    CHECK(tc_events_watch(e, poll_twice, count_done, NULL) == -EBUSY);
    for (int i = 0; i < 100 && !tc_events_closed(e); i++)
        usleep(20 * 1000);
    CHECK(tc_events_closed(e) && polls == 2);
    for (int i = 0; i < 50 && dones < 1; i++)
        usleep(20 * 1000);
    CHECK(dones == 1);
    tc_events_unref(e);
    /* a watch still running at stop is let go (done called), its log closed */
    CHECK(tc_events_new("00000000-0000-7000-8000-000000000004", 1 << 20, true, &w) == 0);
    polls = -1000000;
    CHECK(tc_events_watch(w, poll_twice, count_done, NULL) == 0);
    tc_events_stop();
    CHECK(dones == 2);
    CHECK(tc_events_closed(w));
    CHECK(tc_events_find("00000000-0000-7000-8000-000000000004") == NULL);
    struct tc_events *x = NULL;
    CHECK(tc_events_new("00000000-0000-7000-8000-000000000005", 1 << 20, true, &x) == -ESHUTDOWN);
    tc_events_unref(w);
}

int main(void)
{
    if (tc_events_start(1000) < 0)
        return 2;
    RUN(cap_and_force);
    RUN(not_findable);
    RUN(memory_budget);
    RUN(watch_and_stop);
    tc_events_stop();
    return TAP_DONE();
}
