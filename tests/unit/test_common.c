/* common/ and execution/request.c: bounded parsing, UTF-8, buffers with caps, request validation.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "execution/request.h"
#include "common/buf.h"
#include "common/util.h"
#include "tap.h"

TEST(parse_i64_rejects_garbage)
{
    int64_t v = 7;
    CHECK(tc_parse_i64("42", 0, 100, &v) == 0 && v == 42);
    CHECK(tc_parse_i64("42x", 0, 100, &v) == -EINVAL);
    CHECK(tc_parse_i64("", 0, 100, &v) == -EINVAL);
    CHECK(tc_parse_i64(" 4", 0, 100, &v) == -EINVAL);
    CHECK(tc_parse_i64("+4", 0, 100, &v) == -EINVAL);
    CHECK(tc_parse_i64("-4", -10, 100, &v) == 0 && v == -4);
    CHECK(tc_parse_i64("101", 0, 100, &v) == -ERANGE);
    CHECK(tc_parse_i64("99999999999999999999999", 0, INT64_MAX, &v) == -ERANGE);
}

TEST(iso_utc_names_real_instants_only)
{
    int64_t ms = 0;
    CHECK(tc_parse_iso_utc("1970-01-02", &ms) == 0 && ms == 86400000);
    CHECK(tc_parse_iso_utc("2024-02-29T23:59:59Z", &ms) == 0 && ms == 1709251199000);
    CHECK(tc_parse_iso_utc("2024-02-29T23:59:59.250Z", &ms) == 0 && ms == 1709251199250);
    CHECK(tc_parse_iso_utc("2023-02-29", &ms) == -EINVAL); /* not a leap year */
    CHECK(tc_parse_iso_utc("2024-13-01", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc("2024-04-31", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc("2024-01-01T24:00:00Z", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc("2024-01-01T10:00:00", &ms) == -EINVAL); /* no zone */
    CHECK(tc_parse_iso_utc("2024-01-01T10:00:00+01:00", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc("2024-1-01", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc("", &ms) == -EINVAL);
    CHECK(tc_parse_iso_utc(NULL, &ms) == -EINVAL);
}

TEST(utf8_validation)
{
    CHECK(tc_utf8_valid("héllo ✓ 😀", strlen("héllo ✓ 😀"), false));
    CHECK(!tc_utf8_valid("\xc0\xaf", 2, false));         /* overlong */
    CHECK(!tc_utf8_valid("\xed\xa0\x80", 3, false));     /* surrogate */
    CHECK(!tc_utf8_valid("\xf4\x90\x80\x80", 4, false)); /* > U+10FFFF */
    CHECK(!tc_utf8_valid("ab\xe2\x82", 4, false));       /* truncated */
    CHECK(!tc_utf8_valid("a\0b", 3, false));
    CHECK(tc_utf8_valid("a\0b", 3, true));
}

TEST(path_clean)
{
    static const char *const cases[][2] = {
        {"/app", "/app"},
        {"/app/", "/app"},
        {"//app//x/", "/app/x"},
        {"app", "/app"},
        {"", "/"},
        {"/", "/"},
        {"/./a/./b/.", "/a/b"},
        {"/a/../b", "/b"},
        {"/../../etc", "/etc"},
        {"a/b/../..", "/"},
        {"/a/b/..", "/a"},
        {"/..a/b..", "/..a/b.."},
        {"/.../x", "/.../x"},
        {"/a/./../../b/c/../d/", "/b/d"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK(tc_path_clean(cases[i][0], out, sizeof(out)) == 0);
        if (strcmp(out, cases[i][1]) != 0)
            fprintf(stderr, "    %s -> %s, expected %s\n", cases[i][0], out, cases[i][1]);
        CHECK(strcmp(out, cases[i][1]) == 0);
    }
    CHECK(tc_path_clean(NULL, out, sizeof(out)) == 0 && !strcmp(out, "/"));
    char big[300];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK(tc_path_clean(big, out, sizeof(out)) == -ENAMETOOLONG);
    CHECK(tc_path_clean("/aaaa/bbbb", out, 8) == -ENAMETOOLONG);
    CHECK(tc_path_clean("/aaa", out, 5) == 0 && !strcmp(out, "/aaa"));
}

TEST(buf_cap_holds)
{
    struct tc_buf b;
    tc_buf_init(&b, 8);
    CHECK(tc_buf_append(&b, "1234", 4) == 0);
    CHECK(tc_buf_appendf(&b, "%d", 5678) == 0);
    CHECK(b.len == 8 && strcmp(b.data, "12345678") == 0);
    CHECK(tc_buf_append(&b, "9", 1) == -E2BIG);
    CHECK(b.len == 8);
    tc_buf_free(&b);
    tc_buf_free(&b);
}

TEST(uuid7_shape)
{
    char a[37], b[37];
    tc_uuid7(a);
    tc_uuid7(b);
    CHECK(tc_uuid_valid(a) && tc_uuid_valid(b));
    CHECK(strcmp(a, b) != 0);
    CHECK(a[14] == '7');
    CHECK(!tc_uuid_valid("not-a-uuid"));
    CHECK(!tc_uuid_valid("0191f7a0-0000-7000-8000-00000000000G"));
}

static json_t *parse_errors(const char *text)
{
    json_t *body = json_loads(text, JSON_ALLOW_NUL, NULL);
    struct tc_exec_request req;
    json_t *errors = NULL;
    int r = tc_exec_request_parse(body, &req, &errors);
    json_decref(body);
    if (r == 0) {
        tc_exec_request_done(&req);
        return NULL;
    }
    return errors;
}

static bool has_error(json_t *errors, const char *path)
{
    size_t i;
    json_t *e;
    json_array_foreach(errors, i, e) if (strcmp(json_string_value(json_object_get(e, "path")),
                                                path) == 0) return true;
    return false;
}

TEST(exec_request_validation_names_each_field)
{
    CHECK(parse_errors("{\"tool\":\"python\",\"code\":\"print(1)\"}") == NULL);
    json_t *e = parse_errors("{\"tool\":5,\"extra\":1,\"limits\":{\"memory_mb\":0,\"x\":1},"
                             "\"files\":[{\"path\":\"../etc/passwd\",\"content\":\"x\"}]}");
    CHECK(e != NULL);
    CHECK(has_error(e, "tool"));
    CHECK(has_error(e, "code"));
    CHECK(has_error(e, "extra"));
    CHECK(has_error(e, "limits.memory_mb"));
    CHECK(has_error(e, "limits.x"));
    CHECK(has_error(e, "files[0].path"));
    json_decref(e);
    e = parse_errors("{\"tool\":\"python\",\"code\":\"a\\u0000b\"}");
    CHECK(e && has_error(e, "code"));
    json_decref(e);
    e = parse_errors("{\"tool\":\"Py\",\"code\":\"\",\"files\":[{\"path\":\"a\",\"content\":\"!!\","
                     "\"encoding\":\"base64\"}]}");
    CHECK(e && has_error(e, "tool") && has_error(e, "files[0].content"));
    json_decref(e);
}

TEST(exec_view_makes_output_valid_utf8)
{
    /* "ok\0\xff" in base64 */
    json_t *result = json_pack("{s:s, s:i, s:s, s:s}", "status", "completed", "exit_code", 0,
                               "stdout_b64", "b2sA/w==", "stderr_b64", "");
    int64_t limits[TC_LIMIT__COUNT] = {0};
    json_t *v = tc_exec_view("id", "python", result, limits, "t0", "t1", NULL, NULL);
    CHECK(strcmp(json_string_value(json_object_get(v, "stdout")), "ok\xef\xbf\xbd\xef\xbf\xbd") ==
          0);
    CHECK(json_integer_value(json_object_get(v, "exit_code")) == 0);
    CHECK(json_is_null(json_object_get(v, "killed_reason")));
    json_decref(v);
    json_decref(result);
}

int main(void)
{
    if (sodium_init() < 0)
        return 1;
    RUN(parse_i64_rejects_garbage);
    RUN(iso_utc_names_real_instants_only);
    RUN(utf8_validation);
    RUN(path_clean);
    RUN(buf_cap_holds);
    RUN(uuid7_shape);
    RUN(exec_request_validation_names_each_field);
    RUN(exec_view_makes_output_valid_utf8);
    return TAP_DONE();
}
