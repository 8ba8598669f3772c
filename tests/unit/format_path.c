/* Path normalisation: the one function that decides what a request can reach. */
#include "runner.h"
#include "sf/path.h"
#include "sf/store.h"

static void ok(const char *in, const char *want)
{
    char out[256];
    size_t n = 0;
    int rc = sf_path_from_target(in, strlen(in), out, sizeof out, &n);
    if (rc != 0)
        t__fail(__FILE__, __LINE__, "%s: refused (%d), wanted %s", in, rc, want);
    ASSERT_STR_EQ(out, want);
    ASSERT_EQ(n, strlen(want));
    ASSERT_EQ(sf_path_check(out, n), 0);
}

static void bad(const char *in)
{
    char out[256];
    size_t n = 0;
    int rc = sf_path_from_target(in, strlen(in), out, sizeof out, &n);
    if (rc == 0)
        t__fail(__FILE__, __LINE__, "%s: accepted as %s", in, out);
}

TEST(path_plain)
{
    ok("/", "/");
    ok("/index.html", "/index.html");
    ok("/a/b/c.css", "/a/b/c.css");
    ok("/docs/", "/docs/");
}

TEST(path_dot_segments)
{
    ok("/a/./b", "/a/b");
    ok("/a/../b", "/b");
    ok("/a/b/..", "/a/");
    ok("/a/.", "/a/");
    ok("/a/b/../../c", "/c");
    ok("/./", "/");
    ok("/%2e/x", "/x");
    ok("/a/%2e%2E/b", "/b");
}

TEST(path_never_climbs)
{
    bad("/..");
    bad("/../etc/passwd");
    bad("/a/../../etc/passwd");
    bad("/%2e%2e/etc/passwd");
    bad("/a/%2e%2e/%2e%2e/x");
}

TEST(path_collapses_slashes)
{
    ok("//a///b", "/a/b");
    ok("/a//", "/a/");
}

TEST(path_decoding)
{
    ok("/a%20b.html", "/a b.html");
    ok("/caf%C3%A9", "/caf\xc3\xa9");
    ok("/%252e%252e/x", "/%2e%2e/x"); /* decoded once only */
    bad("/a%2fb");
    bad("/a%2Fb");
    bad("/a%5cb");
    bad("/a\\b");
    bad("/a%00b");
    bad("/a%0ab");
    bad("/a%");
    bad("/a%4");
    bad("/a%zz");
    bad("relative");
    bad("");
}

TEST(path_rejects_bad_utf8)
{
    bad("/%c0%ae%c0%ae/x"); /* overlong '.' */
    bad("/%c0%af");         /* overlong '/' */
    bad("/%e0%80%af");
    bad("/%ed%a0%80");    /* surrogate */
    bad("/%f4%90%80%80"); /* above U+10FFFF */
    bad("/%80");
    bad("/\xff");
    ok("/%f0%9f%98%80", "/\xf0\x9f\x98\x80");
}

TEST(path_too_long)
{
    char in[300], out[64];
    size_t n;
    memset(in, 'a', sizeof in);
    in[0] = '/';
    ASSERT_EQ(sf_path_from_target(in, sizeof in, out, sizeof out, &n), SF_ETOOLONG);
}

TEST(path_check_keys)
{
    ASSERT_EQ(sf_path_check("/a/b.css", 8), 0);
    ASSERT_EQ(sf_path_check("/a/", 3), 0);
    ASSERT_NE(sf_path_check("a", 1), 0);
    ASSERT_NE(sf_path_check("/a//b", 5), 0);
    ASSERT_NE(sf_path_check("/a/../b", 7), 0);
    ASSERT_NE(sf_path_check("/./b", 4), 0);
    ASSERT_NE(sf_path_check("/a\\b", 4), 0);
    ASSERT_NE(sf_path_check("/a\nb", 4), 0);
}

TEST(path_to_url)
{
    const char *key = "/a b/100%/q?#/caf\xc3\xa9;x=1~@:!";
    char url[64], back[64];
    size_t n = sf_path_to_url(key, strlen(key), url, sizeof url);
    ASSERT_EQ(n, strlen("/a%20b/100%25/q%3F%23/caf%C3%A9;x=1~@:!"));
    ASSERT_MEM_EQ(url, n, "/a%20b/100%25/q%3F%23/caf%C3%A9;x=1~@:!", n);
    /* a URL normalises back to its key */
    size_t bl;
    ASSERT_EQ(sf_path_from_target(url, n, back, sizeof back, &bl), 0);
    ASSERT_MEM_EQ(back, bl, key, strlen(key));
    /* the whole length is returned when out is too small; out holds its start */
    char tiny[5] = "zzzz";
    ASSERT_EQ(sf_path_to_url("/a b", 4, tiny, 4), 6);
    ASSERT_MEM_EQ(tiny, 2, "/a", 2);
    ASSERT_EQ(tiny[4], '\0');
    ASSERT_EQ(sf_path_to_url("/", 1, url, sizeof url), 1);
    /* the browser's spelling: the bytes asked for stay raw, the rest as above,
     * and it normalises back to the key too */
    const char *route = "/[slug]/a|b c";
    n = sf_path_to_url_keeping(route, strlen(route), "[]|", url, sizeof url);
    ASSERT_MEM_EQ(url, n, "/[slug]/a|b%20c", strlen("/[slug]/a|b%20c"));
    ASSERT_EQ(sf_path_from_target(url, n, back, sizeof back, &bl), 0);
    ASSERT_MEM_EQ(back, bl, route, strlen(route));
}

/* Keys in messages: servd prints the key of a record it refuses, and a pack
 * is untrusted, so a key must not forge a line or drive a terminal. */
TEST(escape_for_messages)
{
    char out[64];
    const char key[] = "/a\nservd: FORGED\x1b[31m\x7f.txt";
    ASSERT_EQ(sf_escape(key, sizeof key - 1, out, sizeof out), sizeof key - 1);
    ASSERT_STR_EQ(out, "/a\\x0aservd: FORGED\\x1b[31m\\x7f.txt");
    /* NUL is a byte like the others: the length is given */
    ASSERT_EQ(sf_escape("a\0b", 3, out, sizeof out), 3);
    ASSERT_STR_EQ(out, "a\\x00b");
    /* UTF-8 as it is; bytes outside it one by one; controls as code points */
    const char *mixed = "caf\xc3\xa9 \xff\xc3 \xc2\x85 \xe2\x80\xae";
    ASSERT_EQ(sf_escape(mixed, strlen(mixed), out, sizeof out), strlen(mixed));
    ASSERT_STR_EQ(out, "caf\xc3\xa9 \\xff\\xc3 \\u0085 \\u202e");
    /* cut before the first character that does not fit, never inside one */
    ASSERT_EQ(sf_escape("ab\ncd", 5, out, 6), 2);
    ASSERT_STR_EQ(out, "ab");
    ASSERT_EQ(sf_escape("ab\xc3\xa9", 4, out, 4), 2);
    ASSERT_STR_EQ(out, "ab");
    ASSERT_EQ(sf_escape("ab\xc3\xa9", 4, out, 5), 4);
    ASSERT_STR_EQ(out, "ab\xc3\xa9");
}
