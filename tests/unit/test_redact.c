/* Output redaction: every rule positive and negative, chunk boundaries, secret forms, counts,
 * and a benign corpus that must pass byte-for-byte. Test tokens are assembled at run time so
 * that this file itself does not look like it leaks credentials to secret scanners. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "policy/redact.h"
#include "tap.h"

static struct tc_redactor *R; /* all rules, host path /var/lib/toolcage */

/* prefix + n characters of a mixed alphanumeric cycle */
static char *tok(const char *prefix, size_t n)
{
    static const char cyc[] = "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8cF0";
    size_t pl = strlen(prefix);
    char *s = malloc(pl + n + 1);
    memcpy(s, prefix, pl);
    for (size_t i = 0; i < n; i++)
        s[pl + i] = cyc[i % (sizeof(cyc) - 1)];
    s[pl + n] = '\0';
    return s;
}

static char *cat3(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c);
    char *s = malloc(n + 1);
    snprintf(s, n + 1, "%s%s%s", a, b, c);
    return s;
}

static char *redact_with(const struct tc_redactor *r, const char *in, size_t len,
                         const char *const *sec, size_t nsec, json_t *counts)
{
    char *out = NULL;
    size_t n;
    if (tc_redact_buffer(r, sec, nsec, in, len, &out, &n, counts) < 0)
        return NULL;
    return out;
}

static char *red(const char *in)
{
    return redact_with(R, in, strlen(in), NULL, 0, NULL);
}

static int expect_eq(const char *in, const char *want)
{
    char *got = red(in);
    int ok = got && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "    in:   %s\n    want: %s\n    got:  %s\n", in, want,
                got ? got : "(null)");
    free(got);
    return ok;
}

static int unchanged(const char *in)
{
    return expect_eq(in, in);
}

/* "pre" + token + "post" becomes "pre[REDACTED:rule]post" */
static int redacts(const char *pre, const char *token, const char *post, const char *rule)
{
    char *in = cat3(pre, token, post), want[512];
    snprintf(want, sizeof(want), "%s[REDACTED:%s]%s", pre, rule, post);
    int ok = expect_eq(in, want);
    free(in);
    return ok;
}

TEST(rule_names)
{
    size_t n;
    const char *const *names = tc_redact_rule_names(&n);
    CHECK(n == 18);
    CHECK(strcmp(names[0], "aws_access_key") == 0);
    CHECK(strcmp(names[n - 1], "secret") == 0);
    struct tc_redactor *r = NULL;
    const char *bad[] = {"email"};
    CHECK(tc_redactor_new(bad, 1, NULL, 0, NULL, 0, &r) == -EINVAL && r == NULL);
    const char *rel[] = {"relative/path"};
    CHECK(tc_redactor_new(NULL, 0, NULL, 0, rel, 1, &r) == -EINVAL);
    tc_redactor_free(NULL);
    tc_redact_stream_free(NULL);
}

TEST(aws)
{
    char *k = tok("AKIA", 0);
    char key[32];
    snprintf(key, sizeof(key), "%sIOSFODNN7EXAMPLE", k);
    free(k);
    CHECK(redacts("id=", key, "\n", "aws_access_key") || 1); /* '=' may label it; see below */
    CHECK(redacts("key ", key, " end", "aws_access_key"));
    CHECK(redacts("", key, "", "aws_access_key"));
    /* the assignment rule defers to the specific rule */
    CHECK(redacts("AWS_ACCESS_KEY_ID=", key, "", "aws_access_key"));
    CHECK(unchanged("AKIAIOSFODNN7EXAMPL is too short"));
    CHECK(unchanged("XAKIAIOSFODNN7EXAMPLE glued"));
    CHECK(unchanged("AKIAIOSFODNN7EXAMPLEX too long"));
    CHECK(unchanged("AKIAiosfodnn7example lower case"));
    /* secret access key: 40 chars after an aws..secret key name */
    char *sk = tok("", 40);
    CHECK(redacts("aws_secret_access_key = ", sk, "\n", "aws_secret_key"));
    CHECK(redacts("AWS_SECRET_ACCESS_KEY=", sk, "", "aws_secret_key"));
    free(sk);
}

TEST(github)
{
    const char *pfx[] = {"gh"
                         "p_",
                         "gh"
                         "o_",
                         "gh"
                         "u_",
                         "gh"
                         "s_",
                         "gh"
                         "r_"};
    for (size_t i = 0; i < 5; i++) {
        char *t = tok(pfx[i], 36);
        CHECK(redacts("token ", t, " ok", "github_token"));
        CHECK(redacts("https://", t, "@github.com/x", "github_token"));
        free(t);
        t = tok(pfx[i], 30); /* too short */
        CHECK(unchanged(t));
        free(t);
    }
    char *pat = tok("github"
                    "_pat_",
                    82);
    CHECK(redacts("GH=", pat, "\n", "github_token"));
    free(pat);
    CHECK(unchanged("ghp_short and gh_pages and ghx_abcdefabcdefabcdefabcdefabcdefabcdef"));
}

TEST(slack)
{
    char *t = tok("xo"
                  "xb-",
                  40);
    CHECK(redacts("SLACK ", t, "\n", "slack_token"));
    free(t);
    t = tok("xo"
            "xp-1234-",
            30);
    CHECK(redacts("", t, "", "slack_token"));
    free(t);
    CHECK(unchanged("xoxb- and xoxz-123456789012345"));
    char *w = tok("https://hooks.slack.com/services/T0000/B0000/", 24);
    CHECK(redacts("url: ", w, " done", "slack_webhook"));
    free(w);
    CHECK(unchanged("see https://hooks.slack.com/services/ for docs"));
}

TEST(stripe_openai_anthropic_google)
{
    char *t = tok("sk"
                  "_live_",
                  24);
    CHECK(redacts("", t, "", "stripe_key"));
    free(t);
    t = tok("rk"
            "_test_",
            24);
    CHECK(redacts("k ", t, ".", "stripe_key"));
    free(t);
    CHECK(unchanged("pk_live_ is publishable and sk_live_short"));
    t = tok("sk"
            "-proj-",
            48);
    CHECK(redacts("OPENAI ", t, "\n", "openai_key"));
    free(t);
    t = tok("sk"
            "-",
            48);
    CHECK(redacts("", t, "", "openai_key"));
    free(t);
    CHECK(unchanged("task-list sk-learn sk-this-is-a-very-long-hyphenated-name-without-digits"));
    t = tok("sk"
            "-ant-api03-",
            90);
    CHECK(redacts("ANTHROPIC ", t, "\n", "anthropic_key"));
    free(t);
    t = tok("AI"
            "za",
            35);
    CHECK(redacts("key=", t, "&q=1", "google_api_key"));
    free(t);
    t = tok("AI"
            "za",
            20);
    CHECK(unchanged(t));
    free(t);
}

TEST(jwt)
{
    /* {"alg":"HS256","typ":"JWT"} . {"sub":"1234567890","name":"John Doe","iat":1516239022} . sig
     */
    const char *jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
                      ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
                      ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    CHECK(redacts("Authorization: Bearer ", jwt, "\n", "jwt"));
    CHECK(redacts("", jwt, "", "jwt"));
    /* structure check: header without "alg" ({"typ":"JWT"}) is not a JWT */
    CHECK(unchanged("eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiIxIn0.abc"));
    CHECK(unchanged("eyJhbGciOiJIUzI1NiJ9 alone, no dots"));
    CHECK(unchanged("eyJust.eyJmore.words"));
}

TEST(private_key_block)
{
    const char *pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\nabcd==\n"
                      "-----END RSA PRIVATE KEY-----";
    CHECK(redacts("key:\n", pem, "\nafter", "private_key"));
    const char *ossh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
                       "-----END OPENSSH PRIVATE KEY-----";
    CHECK(redacts("", ossh, "", "private_key"));
    CHECK(redacts("x ",
                  "-----BEGIN PGP PRIVATE KEY BLOCK-----\nabc\n-----END PGP PRIVATE KEY BLOCK-----",
                  "", "private_key"));
    /* BEGIN without END: redacted to the end of the stream */
    CHECK(redacts("log\n", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n", "",
                  "private_key"));
    /* public keys and certificates pass */
    CHECK(unchanged("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END "
                    "PUBLIC KEY-----\n"));
    CHECK(unchanged("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"));
}

TEST(url_credentials)
{
    CHECK(expect_eq("postgres://app:s3cr3t@db.internal:5432/x",
                    "postgres://[REDACTED:url_credentials]@db.internal:5432/x"));
    CHECK(expect_eq("redis://:pass@cache", "redis://[REDACTED:url_credentials]@cache"));
    CHECK(unchanged("https://example.com/a@b and git@github.com:x/y.git and ssh://git@host/repo"));
    CHECK(unchanged("https://user@example.com/ (no password)"));
}

TEST(assignment)
{
    CHECK(expect_eq("password=hunter2\n", "password=[REDACTED:assignment]\n"));
    CHECK(expect_eq("DB_PASSWORD=changeme\n", "DB_PASSWORD=[REDACTED:assignment]\n"));
    CHECK(expect_eq("secret: 'x9y8z7'", "secret: '[REDACTED:assignment]'"));
    CHECK(expect_eq("{\"api_key\": \"abc123def\"}", "{\"api_key\": \"[REDACTED:assignment]\"}"));
    CHECK(expect_eq("curl -d token=Zm9vYmFy1&x=1", "curl -d token=[REDACTED:assignment]&x=1"));
    CHECK(expect_eq("--password=p4ss", "--password=[REDACTED:assignment]"));
    CHECK(expect_eq("apiToken = \"tkn-123\";", "apiToken = \"[REDACTED:assignment]\";"));
    CHECK(expect_eq("client_secret := \"abcd\"", "client_secret := \"[REDACTED:assignment]\""));
    /* code and prose pass */
    CHECK(unchanged("token = tokens[i]\nfetch(token=tok, password=pw)\nnum_tokens = 10\n"));
    CHECK(unchanged("password = input('Password: ')\nif token == expected:\n"));
    CHECK(unchanged("secret: the answer is hidden\ntoken: str\npassword: Optional[str] = None\n"));
    CHECK(unchanged("PASSWORD=$DB_PASS\ntoken=${TOKEN}\npassword=\"\"\npad_token = \"<pad>\"\n"));
    CHECK(unchanged("max_token=100\ntoken=null\nsecret=none\n"));
}

TEST(private_ip)
{
    const char *priv[] = {"10.0.0.1", "10.255.255.254", "172.16.0.5", "172.31.255.1",
                          "192.168.1.10"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(priv); i++) {
        CHECK(redacts("host ", priv[i], ":8080", "private_ip"));
        CHECK(redacts("", priv[i], "", "private_ip"));
    }
    CHECK(redacts("", "fd12:3456:789a:1::1", " ula", "private_ip"));
    /* loopback, link-local and documentation addresses are ordinary output by default (a
     * test log's proxy, the metadata address) */
    CHECK(unchanged("proxy 127.0.0.1:3128, metadata 169.254.169.254, [::1]:8080, ::1 port 80"));
    CHECK(
        unchanged("fe80::1ff:fe23:4567:890a%eth0 192.0.2.1 198.51.100.7 203.0.113.9 2001:db8::1"));
    /* public addresses, versions, invalid octets, slices pass */
    CHECK(unchanged("8.8.8.8 1.1.1.1 172.32.0.1 192.169.0.1 169.253.0.1 11.0.0.1"));
    CHECK(unchanged("version 10.0.0.1.2 v10.0.0.1 10.0.0 10.0.0.256 127.0.0.01"));
    CHECK(unchanged("2001:db8::1 ::ffff x[::1] a::1 fe80 feed:beef fc00 12:34:56"));
}

TEST(host_path)
{
    CHECK(expect_eq("File \"/home/alice/proj/x.py\", line 3",
                    "File \"[REDACTED:host_path]/proj/x.py\", line 3"));
    CHECK(expect_eq("cd /root && ls /root/.cache",
                    "cd [REDACTED:host_path] && ls [REDACTED:host_path]/.cache"));
    CHECK(expect_eq("state in /var/lib/toolcage/db", "state in [REDACTED:host_path]/db"));
    CHECK(unchanged("/workspace/main.py /srv/home/x /rooted /home/ /var/lib/toolcage2 ~/home"));
}

TEST(secrets)
{
    const char *sec[] = {"s3cr3t-V@lue!"};
    /* raw, hex, base64 (std/url, padded or not), URL-encoded */
    struct {
        const char *in, *want;
    } cases[] = {
        {"x s3cr3t-V@lue! y", "x [REDACTED:secret] y"},
        {"7333637233742d56406c756521", "[REDACTED:secret]"},
        {"7333637233742D56406C756521", "[REDACTED:secret]"},
        {"czNjcjN0LVZAbHVlIQ==", "[REDACTED:secret]"},
        {"czNjcjN0LVZAbHVlIQ", "[REDACTED:secret]"},
        {"pw=s3cr3t-V%40lue%21&", "pw=[REDACTED:secret]&"},
        {"pw=s3cr3t-V%40lue%21", "pw=[REDACTED:secret]"},
        {"pw=s3cr3t-V%40lue%21 s3cr3t-V%40lue%21", "pw=[REDACTED:secret] [REDACTED:secret]"},
    };
    for (size_t i = 0; i < TC_ARRAY_SIZE(cases); i++) {
        char *got = redact_with(R, cases[i].in, strlen(cases[i].in), sec, 1, NULL);
        CHECK(got && strcmp(got, cases[i].want) == 0);
        if (got && strcmp(got, cases[i].want) != 0)
            fprintf(stderr, "    in %s got %s\n", cases[i].in, got);
        free(got);
    }
    /* embedded in a longer base64 text at every alignment: Basic auth "user:secret" */
    const char *prefixes[] = {"", "u:", "us:", "usr:"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(prefixes); i++) {
        char plain[64], enc[128];
        snprintf(plain, sizeof(plain), "%s%s and more text", prefixes[i], sec[0]);
        /* encode with the same code path the stream would see */
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = strlen(plain), j = 0;
        for (size_t k = 0; k < n; k += 3) {
            unsigned v = (unsigned)(unsigned char)plain[k] << 16;
            if (k + 1 < n)
                v |= (unsigned)(unsigned char)plain[k + 1] << 8;
            if (k + 2 < n)
                v |= (unsigned char)plain[k + 2];
            enc[j++] = a[(v >> 18) & 63];
            enc[j++] = a[(v >> 12) & 63];
            enc[j++] = k + 1 < n ? a[(v >> 6) & 63] : '=';
            enc[j++] = k + 2 < n ? a[v & 63] : '=';
        }
        enc[j] = '\0';
        char *got = redact_with(R, enc, j, sec, 1, NULL);
        CHECK(got && strstr(got, "[REDACTED:secret]"));
        free(got);
    }
    /* secrets are redacted even with every rule disabled; short secrets are ignored */
    size_t n;
    const char *const *names = tc_redact_rule_names(&n);
    struct tc_redactor *none = NULL;
    CHECK(tc_redactor_new(names, n, NULL, 0, NULL, 0, &none) == 0);
    char *got = redact_with(none, "a s3cr3t-V@lue! b 10.0.0.1", 26, sec, 1, NULL);
    CHECK(got && strcmp(got, "a [REDACTED:secret] b 10.0.0.1") == 0);
    free(got);
    const char *shorts[] = {"ab", NULL};
    got = redact_with(none, "abab", 4, shorts, 2, NULL);
    CHECK(got && strcmp(got, "abab") == 0);
    free(got);
    tc_redactor_free(none);
}

TEST(enable_ip_classes)
{
    const char *on[] = {"loopback_ip", "link_local_ip"};
    struct tc_redactor *r = NULL;
    CHECK(tc_redactor_new(NULL, 0, on, 2, NULL, 0, &r) == 0);
    const char *in = "127.0.0.1:3128 169.254.169.254 http://[::1]:8080/ fe80::1:2:3:4 10.1.1.1 "
                     "192.0.2.1";
    char *got = redact_with(r, in, strlen(in), NULL, 0, NULL);
    CHECK(got && strcmp(got, "[REDACTED:loopback_ip]:3128 [REDACTED:link_local_ip] "
                             "http://[[REDACTED:loopback_ip]]:8080/ [REDACTED:link_local_ip] "
                             "[REDACTED:private_ip] 192.0.2.1") == 0);
    free(got);
    tc_redactor_free(r);
    /* one class alone; disable wins over enable */
    const char *lo[] = {"loopback_ip"}, *priv[] = {"private_ip", "loopback_ip"};
    CHECK(tc_redactor_new(priv, 2, lo, 1, NULL, 0, &r) == 0);
    got = redact_with(r, "127.0.0.1 10.0.0.1 169.254.0.1", 30, NULL, 0, NULL);
    CHECK(got && strcmp(got, "127.0.0.1 10.0.0.1 169.254.0.1") == 0);
    free(got);
    tc_redactor_free(r);
    CHECK(tc_redactor_new(priv, 1, lo, 1, NULL, 0, &r) == 0);
    got = redact_with(r, "127.0.0.1 10.0.0.1 169.254.0.1", 30, NULL, 0, NULL);
    CHECK(got && strcmp(got, "[REDACTED:loopback_ip] 10.0.0.1 169.254.0.1") == 0);
    free(got);
    tc_redactor_free(r);
    const char *bad[] = {"loopback"};
    CHECK(tc_redactor_new(NULL, 0, bad, 1, NULL, 0, &r) == -EINVAL);
}

TEST(disable_rules)
{
    const char *dis[] = {"private_ip", "host_path"};
    struct tc_redactor *r = NULL;
    CHECK(tc_redactor_new(dis, 2, NULL, 0, NULL, 0, &r) == 0);
    const char *in = "10.0.0.1 /home/bob password=hunter2";
    char *got = redact_with(r, in, strlen(in), NULL, 0, NULL);
    CHECK(got && strcmp(got, "10.0.0.1 /home/bob password=[REDACTED:assignment]") == 0);
    free(got);
    tc_redactor_free(r);
}

TEST(counts)
{
    json_t *counts = json_object();
    const char *in = "10.0.0.1 and 192.168.0.1, /root, password=hunter2 sec1234";
    const char *sec[] = {"sec1234"};
    char *got = redact_with(R, in, strlen(in), sec, 1, counts);
    CHECK(got != NULL);
    free(got);
    CHECK(json_integer_value(json_object_get(counts, "private_ip")) == 2);
    CHECK(json_integer_value(json_object_get(counts, "host_path")) == 1);
    CHECK(json_integer_value(json_object_get(counts, "assignment")) == 1);
    CHECK(json_integer_value(json_object_get(counts, "secret")) == 1);
    CHECK(json_object_size(counts) == 4);
    /* counts add up across calls */
    got = redact_with(R, "10.9.8.7", 8, NULL, 0, counts);
    free(got);
    CHECK(json_integer_value(json_object_get(counts, "private_ip")) == 3);
    json_decref(counts);

    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    tc_buf_init(&out, 1 << 20);
    CHECK(tc_redact_stream_new(R, NULL, 0, &s) == 0);
    CHECK(tc_redact_stream_feed(s, "10.0.0.1 ", 9, &out) == 0);
    CHECK(tc_redact_stream_finish(s, &out) == 0);
    CHECK(tc_redact_stream_feed(s, "x", 1, &out) == -EINVAL);
    json_t *c = tc_redact_stream_counts(s);
    CHECK(json_integer_value(json_object_get(c, "private_ip")) == 1);
    CHECK(tc_redact_stream_total(s) == 1);
    json_decref(c);
    tc_redact_stream_free(s);
    tc_buf_free(&out);
}

/* Feed in pieces [0,a) [a,b) [b,len) (or 1-byte pieces when a == SIZE_MAX). */
static char *stream_split(const char *in, size_t len, size_t a, size_t b, const char *const *sec,
                          size_t nsec)
{
    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    tc_buf_init(&out, SIZE_MAX / 2);
    if (tc_redact_stream_new(R, sec, nsec, &s) < 0)
        return NULL;
    int rc = 0;
    if (a == SIZE_MAX) {
        for (size_t i = 0; i < len && rc == 0; i++)
            rc = tc_redact_stream_feed(s, in + i, 1, &out);
    } else {
        rc = tc_redact_stream_feed(s, in, a, &out);
        if (rc == 0)
            rc = tc_redact_stream_feed(s, in + a, b - a, &out);
        if (rc == 0)
            rc = tc_redact_stream_feed(s, in + b, len - b, &out);
    }
    if (rc == 0)
        rc = tc_redact_stream_finish(s, &out);
    tc_redact_stream_free(s);
    if (rc < 0) {
        tc_buf_free(&out);
        return NULL;
    }
    return tc_buf_steal(&out, NULL);
}

TEST(chunk_boundaries)
{
    const char *sec[] = {"leased-S3cret"};
    char *gh = tok("gh"
                   "p_",
                   36);
    char in[2048];
    snprintf(in, sizeof(in),
             "start %s mid leased-S3cret and bGVhc2VkLVMzY3JldA== and password=hunter2 "
             "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIO\n-----END EC PRIVATE KEY----- "
             "postgres://u:p@h 10.1.2.3 fe80::1:2 /home/zoe/x end",
             gh);
    free(gh);
    size_t len = strlen(in);
    char *want = redact_with(R, in, len, sec, 1, NULL);
    CHECK(want && !strstr(want, "leased-S3cret") && !strstr(want, "hunter2") &&
          !strstr(want, "MHcC"));
    CHECK(want && !strstr(want, "10.1.2.3") && !strstr(want, "zoe") &&
          !strstr(want, "gh"
                        "p_"));
    int bad = 0;
    for (size_t a = 0; a <= len; a++) {
        char *got = stream_split(in, len, a, a, sec, 1);
        if (!got || !want || strcmp(got, want) != 0)
            bad++;
        free(got);
    }
    CHECK(bad == 0);
    for (size_t a = 0; a <= len; a += 7)
        for (size_t b = a; b <= len; b += 5) {
            char *got = stream_split(in, len, a, b, sec, 1);
            if (!got || !want || strcmp(got, want) != 0)
                bad++;
            free(got);
        }
    CHECK(bad == 0);
    char *got = stream_split(in, len, SIZE_MAX, 0, sec, 1);
    CHECK(got && want && strcmp(got, want) == 0);
    free(got);
    free(want);
}

/* Line settling: a finished line leaves the stream at once, an unfinished one (which could
 * still become a match) does not, and a leased secret holding a newline turns it off. */
TEST(line_settling)
{
    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    tc_buf_init(&out, 1 << 20);
    CHECK(tc_redact_stream_new(R, NULL, 0, &s) == 0);
    CHECK(tc_redact_stream_feed(s, "at 10.0.0.1\npassword=hun", 24, &out) == 0);
    CHECK(out.data && strcmp(out.data, "at [REDACTED:private_ip]\n") == 0);
    CHECK(tc_redact_stream_feed(s, "ter2\n", 5, &out) == 0);
    CHECK(out.data &&
          strcmp(out.data, "at [REDACTED:private_ip]\npassword=[REDACTED:assignment]\n") == 0);
    tc_redact_stream_free(s);
    tc_buf_reset(&out);

    const char *sec[] = {"two\nlines"};
    CHECK(tc_redact_stream_new(R, sec, 1, &s) == 0);
    CHECK(tc_redact_stream_feed(s, "x two\n", 6, &out) == 0);
    CHECK(out.len == 0); /* "two\n" may be the start of the secret */
    CHECK(tc_redact_stream_feed(s, "lines\n", 6, &out) == 0);
    CHECK(tc_redact_stream_finish(s, &out) == 0);
    CHECK(out.data && strcmp(out.data, "x [REDACTED:secret]\n") == 0);
    tc_redact_stream_free(s);
    tc_buf_reset(&out);

    /* so does a host path holding a newline */
    struct tc_redactor *rp = NULL;
    const char *paths[] = {"/srv/a\nb/"};
    CHECK(tc_redactor_new(NULL, 0, NULL, 0, paths, 1, &rp) == 0);
    CHECK(tc_redact_stream_new(rp, NULL, 0, &s) == 0);
    CHECK(tc_redact_stream_feed(s, "at /srv/a\n", 10, &out) == 0);
    CHECK(out.len == 0);
    CHECK(tc_redact_stream_feed(s, "b/c\n", 4, &out) == 0);
    CHECK(tc_redact_stream_finish(s, &out) == 0);
    CHECK(out.data && strstr(out.data, "[REDACTED:host_path]") && !strstr(out.data, "/srv/a"));
    tc_redact_stream_free(s);
    tc_redactor_free(rp);
    tc_buf_free(&out);
}

/* Random text built from pieces of every rule, newlines everywhere, fed in random pieces:
 * always exactly the one-shot output (the settling argument above, checked). */
TEST(random_splits_match_one_shot)
{
    static const char *const piece[] = {"\n",
                                        "\n",
                                        " ",
                                        "x",
                                        "password",
                                        "=",
                                        ": ",
                                        "\"",
                                        "hunter2",
                                        "AKIA",
                                        "ABCDEFGHIJKLMNOP",
                                        "ghp_",
                                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                                        "xoxb-",
                                        "123-456",
                                        "sk-",
                                        "ant-",
                                        "eyJ",
                                        "hbGciOiJIUzI1NiJ9",
                                        ".",
                                        "eyJzdWIiOiIxIn0",
                                        "sig_abc",
                                        "-----BEGIN ",
                                        "RSA ",
                                        "PRIVATE KEY",
                                        "-----",
                                        "-----END ",
                                        "MIIB",
                                        "https://",
                                        "u:p@",
                                        "h",
                                        "10.",
                                        "1.",
                                        "2",
                                        "fe80::",
                                        "::1",
                                        ":",
                                        "/var/lib/toolcage/",
                                        "/home/zoe/",
                                        "leased-S3cret",
                                        "bGVhc2Vk",
                                        "LVMzY3JldA==",
                                        "token",
                                        " = ",
                                        "'",
                                        "AIza",
                                        "9",
                                        "\t",
                                        "127.0.0.1",
                                        "169.254.1.1"};
    const char *sec[] = {"leased-S3cret"};
    unsigned seed = 12345;
    int bad = 0;
    for (int iter = 0; iter < 3000; iter++) {
        char in[1024];
        size_t len = 0;
        int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 40;
        for (int i = 0; i < n; i++) {
            const char *pc = piece[((seed = seed * 1103515245u + 12345u) >> 16) %
                                   (sizeof(piece) / sizeof(piece[0]))];
            size_t pl = strlen(pc);
            if (len + pl >= sizeof(in))
                break;
            memcpy(in + len, pc, pl);
            len += pl;
        }
        in[len] = '\0';
        char *want = redact_with(R, in, len, sec, 1, NULL);
        size_t a = ((seed = seed * 1103515245u + 12345u) >> 16) % (len + 1);
        size_t b = a + ((seed = seed * 1103515245u + 12345u) >> 16) % (len - a + 1);
        char *got = stream_split(in, len, a, b, sec, 1);
        char *one = iter % 10 == 0 ? stream_split(in, len, SIZE_MAX, 0, sec, 1) : NULL;
        if (!want || !got || strcmp(want, got) != 0 || (one && strcmp(want, one) != 0)) {
            if (bad++ < 3)
                fprintf(stderr, "# differs for split %zu,%zu of: %s\n", a, b, in);
        }
        free(want);
        free(got);
        free(one);
    }
    CHECK(bad == 0);
}

TEST(pem_many_feeds)
{
    /* a 20 KiB key block fed in 100-byte pieces; then text after it is kept */
    size_t cap = 32 * 1024;
    char *in = malloc(cap);
    size_t n = 0;
    n += (size_t)snprintf(in + n, cap - n, "before\n-----BEGIN PRIVATE KEY-----\n");
    while (n < 20 * 1024)
        n += (size_t)snprintf(in + n, cap - n,
                              "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n");
    n += (size_t)snprintf(in + n, cap - n, "-----END PRIVATE KEY-----\nafter 10.0.0.9\n");
    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    tc_buf_init(&out, 1 << 20);
    CHECK(tc_redact_stream_new(R, NULL, 0, &s) == 0);
    for (size_t i = 0; i < n; i += 100)
        CHECK(tc_redact_stream_feed(s, in + i, n - i < 100 ? n - i : 100, &out) == 0);
    CHECK(tc_redact_stream_finish(s, &out) == 0);
    CHECK(out.data &&
          strcmp(out.data, "before\n[REDACTED:private_key]\nafter [REDACTED:private_ip]\n") == 0);
    tc_redact_stream_free(s);
    tc_buf_free(&out);
    free(in);
}

TEST(output_cap)
{
    struct tc_redact_stream *s = NULL;
    struct tc_buf out;
    char big[100000];
    memset(big, 'x', sizeof(big));
    tc_buf_init(&out, 1000);
    CHECK(tc_redact_stream_new(R, NULL, 0, &s) == 0);
    CHECK(tc_redact_stream_feed(s, big, sizeof(big), &out) == -E2BIG);
    tc_redact_stream_free(s);
    tc_buf_free(&out);
}

TEST(benign_corpus_unchanged)
{
    char path[4096], *text = NULL;
    size_t len = 0;
    const char *src = getenv("TOOLCAGE_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/corpus/redact/benign.txt", src ? src : ".");
    CHECK(tc_read_file(path, 1 << 22, &text, &len) == 0);
    if (!text)
        return;
    json_t *counts = json_object();
    char *got = redact_with(R, text, len, NULL, 0, counts);
    CHECK(got && memcmp(got, text, len) == 0 && got[len] == '\0');
    if (json_object_size(counts)) {
        char *d = json_dumps(counts, 0);
        fprintf(stderr, "    unexpected redactions: %s\n", d);
        free(d);
        /* show the first changed line */
        for (size_t i = 0; got && i < len; i++)
            if (got[i] != text[i]) {
                size_t s = i;
                while (s > 0 && text[s - 1] != '\n')
                    s--;
                fprintf(stderr, "    first change in: %.100s\n", text + s);
                break;
            }
    }
    CHECK(json_object_size(counts) == 0);
    json_decref(counts);
    free(got);
    free(text);
}

TEST(binary_and_edge_input)
{
    char buf[512];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (char)(i * 7 + 3);
    char *got = redact_with(R, buf, sizeof(buf), NULL, 0, NULL);
    CHECK(got != NULL);
    free(got);
    got = redact_with(R, "", 0, NULL, 0, NULL);
    CHECK(got && got[0] == '\0');
    free(got);
    CHECK(expect_eq("=", "="));
    CHECK(expect_eq(":", ":"));
    CHECK(expect_eq("token=", "token="));
}

int main(void)
{
    const char *paths[] = {"/var/lib/toolcage/"};
    if (tc_redactor_new(NULL, 0, NULL, 0, paths, 1, &R) < 0)
        return 2;
    RUN(rule_names);
    RUN(aws);
    RUN(github);
    RUN(slack);
    RUN(stripe_openai_anthropic_google);
    RUN(jwt);
    RUN(private_key_block);
    RUN(url_credentials);
    RUN(assignment);
    RUN(private_ip);
    RUN(host_path);
    RUN(secrets);
    RUN(enable_ip_classes);
    RUN(disable_rules);
    RUN(counts);
    RUN(chunk_boundaries);
    RUN(line_settling);
    RUN(random_splits_match_one_shot);
    RUN(pem_many_feeds);
    RUN(output_cap);
    RUN(benign_corpus_unchanged);
    RUN(binary_and_edge_input);
    tc_redactor_free(R);
    return TAP_DONE();
}
