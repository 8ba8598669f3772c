/* Rule globs: *, **, ?, sets, anchoring. */
#include "glob.h"
#include "runner.h"

static int m(const char *pattern, const char *key)
{
    pk_glob *g;
    char err[128];
    if (pk_glob_compile(pattern, &g, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "%s: %s", pattern, err);
    int r = pk_glob_match(g, key, strlen(key));
    pk_glob_free(g);
    return r;
}

TEST(glob_star_stays_in_segment)
{
    ASSERT_EQ(m("/*.html", "/index.html"), 1);
    ASSERT_EQ(m("/*.html", "/docs/index.html"), 0);
    ASSERT_EQ(m("/docs/*", "/docs/a.css"), 1);
    ASSERT_EQ(m("/docs/*", "/docs/sub/a.css"), 0);
    ASSERT_EQ(m("/a*b", "/ab"), 1);
    ASSERT_EQ(m("/a*b", "/a/b"), 0);
}

TEST(glob_double_star_crosses_segments)
{
    ASSERT_EQ(m("/assets/**", "/assets/a.js"), 1);
    ASSERT_EQ(m("/assets/**", "/assets/x/y/z.js"), 1);
    ASSERT_EQ(m("/assets/**", "/other/a.js"), 0);
    ASSERT_EQ(m("/**/x.js", "/x.js"), 1); /* "**" + "/" may be empty */
    ASSERT_EQ(m("/**/x.js", "/a/b/x.js"), 1);
    ASSERT_EQ(m("/**/x.js", "/a/bx.js"), 0);
    ASSERT_EQ(m("/a/**.map", "/a/b/c.js.map"), 1);
}

TEST(glob_unanchored_matches_any_level)
{
    ASSERT_EQ(m("*.html", "/index.html"), 1);
    ASSERT_EQ(m("*.html", "/docs/guide/index.html"), 1);
    ASSERT_EQ(m("*.html", "/index.htmlx"), 0);
    ASSERT_EQ(m("assets/*.js", "/assets/a.js"), 1);
    ASSERT_EQ(m("assets/*.js", "/v2/assets/a.js"), 1);
    ASSERT_EQ(m("assets/*.js", "/myassets/a.js"), 0);
}

TEST(glob_question_and_sets)
{
    ASSERT_EQ(m("/a?.txt", "/ab.txt"), 1);
    ASSERT_EQ(m("/a?.txt", "/a/.txt"), 0);
    ASSERT_EQ(m("/[abc].txt", "/b.txt"), 1);
    ASSERT_EQ(m("/[abc].txt", "/d.txt"), 0);
    ASSERT_EQ(m("/[a-c].txt", "/c.txt"), 1);
    ASSERT_EQ(m("/[!a-c].txt", "/c.txt"), 0);
    ASSERT_EQ(m("/[^a-c].txt", "/d.txt"), 1);
    ASSERT_EQ(m("/x[!a]y", "/x/y"), 0); /* a set never matches '/' */
    ASSERT_EQ(m("/[]]", "/]"), 1);
    ASSERT_EQ(m("/\\*", "/*"), 1);
    ASSERT_EQ(m("/\\*", "/a"), 0);
}

/* Keys are UTF-8: ? and a set take one character, however many bytes it
 * has, and a set's ranges are ranges of code points. */
TEST(glob_characters_not_bytes)
{
    ASSERT_EQ(m("/caf?.txt", "/caf\xc3\xa9.txt"), 1); /* é: 2 bytes */
    ASSERT_EQ(m("/caf??.txt", "/caf\xc3\xa9.txt"), 0);
    ASSERT_EQ(m("/?.txt", "/\xf0\x9f\x98\x80.txt"), 1); /* U+1F600: 4 bytes */
    ASSERT_EQ(m("/????.txt", "/\xf0\x9f\x98\x80.txt"), 0);
    ASSERT_EQ(m("/\xe2\x82\xac?", "/\xe2\x82\xac\xe2\x82\xac"), 1);     /* €? on €€ */
    ASSERT_EQ(m("/caf[\xc3\xa9].txt", "/caf\xc3\xa9.txt"), 1);          /* [é] */
    ASSERT_EQ(m("/caf[\xc3\xa0-\xc3\xab].txt", "/caf\xc3\xa9.txt"), 1); /* [à-ë] */
    ASSERT_EQ(m("/caf[\xc3\xa0-\xc3\xa8].txt", "/caf\xc3\xa9.txt"), 0); /* [à-è] */
    ASSERT_EQ(m("/caf[!\xc3\xa9].txt", "/caf\xc3\xa9.txt"), 0);
    ASSERT_EQ(m("/caf[!\xc3\xa9].txt", "/cafe.txt"), 1);
    ASSERT_EQ(m("/caf[!e].txt", "/caf\xc3\xa9.txt"), 1); /* one character, not a byte */
    ASSERT_EQ(m("/[a-\xc3\xbf]x", "/zx"), 1);            /* [a-ÿ] spans ASCII */
    ASSERT_EQ(m("/[a-\xc3\xbf]x", "/\xc3\xa9x"), 1);
    ASSERT_EQ(m("/*.txt", "/caf\xc3\xa9.txt"), 1);
}

/* servd-pack(1): "\\ escapes", in a set too; "***" is "**"; a byte that
 * is not UTF-8 (a walk refuses such names, but a key may come from a base
 * pack) is no character: ? and sets never match it, * may. */
TEST(glob_escapes_runs_of_stars_and_bytes)
{
    ASSERT_EQ(m("/[\\]]", "/]"), 1);
    ASSERT_EQ(m("/[\\]]", "/\\"), 0);
    ASSERT_EQ(m("/a[\\]x]b", "/axb"), 1);
    ASSERT_EQ(m("/***/x.js", "/x.js"), 1);
    ASSERT_EQ(m("/***/x.js", "/a/b/x.js"), 1);
    ASSERT_EQ(m("/a/***", "/a/b/c"), 1);
    ASSERT_EQ(m("/a/***", "/b/c"), 0);
    ASSERT_EQ(m("/?.txt", "/\xff.txt"), 0);
    ASSERT_EQ(m("/[!a].txt", "/\xff.txt"), 0);
    ASSERT_EQ(m("/?\xc3\xa9", "/\xc3\xc3\xa9"), 0); /* a lone lead byte, then é */
    ASSERT_EQ(m("/?\xa9", "/\xc3\xc3\xa9"), 0);     /* not one character of two bytes */
    ASSERT_EQ(m("/*.txt", "/\xff.txt"), 1);
}

/* Keys longer than the matcher's rows on the stack (1 KiB) match as short
 * ones do. */
TEST(glob_long_keys)
{
    char key[3000];
    memset(key, 'a', sizeof key);
    key[0] = '/';
    key[1500] = '/';
    memcpy(key + sizeof key - 6, ".html", 6);
    ASSERT_EQ(m("*.html", key), 1);
    ASSERT_EQ(m("/a*/**.html", key), 1);
    ASSERT_EQ(m("/a*/**.css", key), 0);
    ASSERT_EQ(m("/a*.html", key), 0); /* two segments */
}

TEST(glob_no_exponential_blowup)
{
    char key[400];
    memset(key, 'a', sizeof key - 1);
    key[0] = '/';
    key[sizeof key - 1] = '\0';
    /* Classic backtracking killer: finishes instantly with the DP. */
    ASSERT_EQ(m("/*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", key), 0);
    ASSERT_EQ(m("/**a**a**a**a**a**a**a**a**a**a**b", key), 0);
}

TEST(glob_rejects_malformed)
{
    pk_glob *g;
    char err[128];
    ASSERT_NE(pk_glob_compile("", &g, err, sizeof err), 0);
    ASSERT_NE(pk_glob_compile("/[abc", &g, err, sizeof err), 0);
    ASSERT_NE(pk_glob_compile("/[z-a]", &g, err, sizeof err), 0);
    ASSERT_NE(pk_glob_compile("/a\\", &g, err, sizeof err), 0);
    ASSERT_NE(pk_glob_compile("/[\xc3\xa9-a]", &g, err, sizeof err), 0); /* reversed */
    ASSERT_NE(pk_glob_compile("/[\xc3]", &g, err, sizeof err), 0);       /* not UTF-8 */
    char longp[PK_GLOB_MAX + 2];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    ASSERT_NE(pk_glob_compile(longp, &g, err, sizeof err), 0);
}

TEST(glob_covers_directories)
{
    pk_glob *g;
    char err[128];
    ASSERT_EQ(pk_glob_compile("/drafts/**", &g, err, sizeof err), 0);
    ASSERT_EQ(pk_glob_covers(g, "/drafts", 7), 1);
    ASSERT_EQ(pk_glob_covers(g, "/drafts/old", 11), 1);
    ASSERT_EQ(pk_glob_covers(g, "/draft", 6), 0);
    ASSERT_EQ(pk_glob_covers(g, "/docs", 5), 0);
    pk_glob_free(g);
    ASSERT_EQ(pk_glob_compile("/drafts/*", &g, err, sizeof err), 0);
    ASSERT_EQ(pk_glob_covers(g, "/drafts", 7), 0); /* one level only: not every path */
    pk_glob_free(g);
    ASSERT_EQ(pk_glob_compile("node_modules/**", &g, err, sizeof err), 0);
    ASSERT_EQ(pk_glob_covers(g, "/a/node_modules", 15), 1);
    ASSERT_EQ(pk_glob_covers(g, "/a/node_modules2", 16), 0);
    pk_glob_free(g);
    ASSERT_EQ(pk_glob_compile("**", &g, err, sizeof err), 0);
    ASSERT_EQ(pk_glob_covers(g, "/anything", 9), 1);
    pk_glob_free(g);
}
