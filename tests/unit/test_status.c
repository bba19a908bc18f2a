/* fs/outlive/status.c on its own: the health `ckptctl status` reports,
 * from a state memfd filled by hand. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "outlive/status.h"

static int setup(void **state)
{
    State *st = g_new0(State, 1);
    assert_int_equal(state_open(st, -1), 0);
    g_strlcpy(st->hdr->mountpoint, "/mnt/ckpt", sizeof st->hdr->mountpoint);
    *state = st;
    return 0;
}

static int teardown(void **state)
{
    State *st = *state;
    state_close(st);
    g_free(st);
    return 0;
}

/* The document of a mount served by this process (alive, running). */
static JsonObject *status_of(State *st, bool *healthy, JsonParser **keep)
{
    StatusProcs p = {.supervisor_pid = getpid(), .state = "serving", .daemon_pid = getpid()};
    g_autofree char *json = status_json(st, &p, healthy);
    *keep = json_parser_new();
    assert_true(json_parser_load_from_data(*keep, json, -1, NULL));
    return json_node_get_object(json_parser_get_root(*keep));
}

static void test_no_request_waits(void **state)
{
    State *st = *state;
    bool healthy = false;
    g_autoptr(JsonParser) keep = NULL;
    JsonObject *o = status_of(st, &healthy, &keep);
    assert_true(healthy);
    assert_true(json_object_get_null_member(o, "oldest_request_seconds"));
}

/* A request read and not answered for longer than STATUS_HUNG_AFTER_S: a
 * daemon alive but wedged (or blocked on its storage) is unhealthy. */
static void test_a_request_waiting_too_long_is_a_problem(void **state)
{
    State *st = *state;
    InflightRec *r = &st->inflight[3];
    atomic_store(&r->since_us, g_get_monotonic_time() - (STATUS_HUNG_AFTER_S + 5) * G_USEC_PER_SEC);
    atomic_store(&r->unique, 42);
    bool healthy = true;
    g_autoptr(JsonParser) keep = NULL;
    JsonObject *o = status_of(st, &healthy, &keep);
    assert_false(healthy);
    assert_true(json_object_get_double_member(o, "oldest_request_seconds") >= STATUS_HUNG_AFTER_S);
    JsonArray *problems = json_object_get_array_member(o, "problems");
    assert_int_equal(json_array_get_length(problems), 1);
    assert_non_null(strstr(json_array_get_string_element(problems, 0), "has waited"));
    /* answered: healthy again */
    atomic_store(&r->unique, 0);
    g_autoptr(JsonParser) keep2 = NULL;
    o = status_of(st, &healthy, &keep2);
    assert_true(healthy);
}

/* A request waiting a moment is shown, and is no problem. */
static void test_a_request_waiting_briefly_is_fine(void **state)
{
    State *st = *state;
    InflightRec *r = &st->inflight[0];
    atomic_store(&r->since_us, g_get_monotonic_time() - G_USEC_PER_SEC);
    atomic_store(&r->unique, 7);
    bool healthy = false;
    g_autoptr(JsonParser) keep = NULL;
    JsonObject *o = status_of(st, &healthy, &keep);
    assert_true(healthy);
    assert_true(json_object_get_double_member(o, "oldest_request_seconds") >= 1.0);
    atomic_store(&r->unique, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_request_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_request_waiting_too_long_is_a_problem, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_request_waiting_briefly_is_fine, setup, teardown),
    };
    return cmocka_run_group_tests_name("unit/status", tests, NULL, NULL);
}
