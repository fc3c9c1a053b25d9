/* Where webhooks may go (server/webhook.h): the call-time check of a callback_url. Only
 * literal addresses and names that need no DNS server (localhost comes from /etc/hosts). */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "server/webhook.h"
#include "tap.h"

static bool refused(const char *url, bool allow_private, const char *want_in_why)
{
    char why[512] = "";
    bool r = tc_webhook_target_refused(url, allow_private, why, sizeof(why));
    if (r && want_in_why && !strstr(why, want_in_why)) {
        fprintf(stderr, "    %s: \"%s\" lacks \"%s\"\n", url, why, want_in_why);
        return false;
    }
    if (r != (want_in_why != NULL))
        fprintf(stderr, "    %s (allow_private %d): %s\n", url, allow_private, r ? why : "allowed");
    return r;
}

TEST(internal_literals_refused)
{
    static const char *const cases[][2] = {
        {"http://127.0.0.1/x", "(loopback)"},
        {"http://127.1/x", "(loopback)"},
        {"http://2130706433/x", "(loopback)"},
        {"http://0x7f000001/x", "(loopback)"},
        {"http://[::1]/x", "(loopback)"},
        {"http://[::ffff:7f00:1]/x", "(loopback)"},
        {"http://[64:ff9b::127.0.0.1]/x", "(loopback)"},
        {"http://[2002:7f00:0001::]/x", "(loopback)"},
        {"http://0.0.0.0/x", "(unspecified)"},
        {"http://[::]/x", "(unspecified)"},
        {"http://10.0.0.1/x", "(private)"},
        {"http://[fc00::1]/x", "(private)"},
        {"http://169.254.1.1/x", "(link_local)"},
        {"http://[fe80::1%25eth0]/x", "(link_local)"},
        {"http://100.64.1.1/x", "(cgnat)"},
        {"http://198.19.255.255/x", "(reserved)"},
        {"http://192.0.0.1/x", "(reserved)"},
        {"http://255.255.255.255/x", "(reserved)"},
        {"http://localhost/x", "(loopback)"},
        {"http://a.b.localhost:8080/x", "(loopback)"},
        {"http://nas.local/x", "local network name"},
        {"http://vault.internal/x", "local network name"},
        {"http://router.home.arpa/x", "local network name"},
        {"http://intranet/x", "local network name"},
    };
    for (size_t i = 0; i < TC_ARRAY_SIZE(cases); i++)
        CHECK(refused(cases[i][0], false, cases[i][1]));
}

TEST(metadata_and_multicast_refused_even_when_private_is_allowed)
{
    static const char *const cases[] = {
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[fd00:ec2::254]/",
        "http://100.100.100.200/",
        "http://192.0.0.192/",
        "http://metadata.google.internal/",
        "http://METADATA.GOOGLE.INTERNAL./x",
        "http://metadata/",
    };
    for (size_t i = 0; i < TC_ARRAY_SIZE(cases); i++) {
        CHECK(refused(cases[i], true, "(metadata)"));
        CHECK(refused(cases[i], false, "(metadata)"));
    }
    CHECK(refused("http://224.0.0.251/", true, "(multicast)"));
    CHECK(refused("http://[ff02::1]/", true, "(multicast)"));
}

TEST(private_allowed_when_asked)
{
    static const char *const cases[] = {"http://127.0.0.1:8080/hook", "http://[::1]/",
                                        "http://localhost/", "http://10.1.1.1/",
                                        "http://[64:ff9b::7f00:1]/"};
    for (size_t i = 0; i < TC_ARRAY_SIZE(cases); i++)
        CHECK(!refused(cases[i], true, NULL));
}

TEST(public_and_unparsable)
{
    CHECK(!refused("https://93.184.215.14/hook", false, NULL));
    CHECK(!refused("https://[2606:4700::1111]/hook", false, NULL));
    /* a public address in a NAT64 or 6to4 wrapper is public */
    CHECK(!refused("http://[64:ff9b::8.8.8.8]/", false, NULL));
    CHECK(!refused("http://[2002:808:808::]/", false, NULL));
    /* a name that does not resolve (here: RFC 6761 .invalid) is left to the connect-time check */
    CHECK(!refused("https://hooks.example.invalid/x", false, NULL));
    CHECK(refused("http://[::1/x", false, "not a URL"));
    CHECK(refused("http://a b/x", false, "not a URL"));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    RUN(internal_literals_refused);
    RUN(metadata_and_multicast_refused_even_when_private_is_allowed);
    RUN(private_allowed_when_asked);
    RUN(public_and_unparsable);
    curl_global_cleanup();
    return TAP_DONE();
}
