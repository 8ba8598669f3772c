/* The walk: sorted keys, dotfiles, sidecars, symlinks, special files, bad names. */
#include "runner.h"
#include "walk.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[2048];

static void mk(const char *rel, const char *content)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    }
    if (content) {
        FILE *f = fopen(p, "w");
        ASSERT(f != NULL);
        fputs(content, f);
        fclose(f);
    } else {
        mkdir(p, 0755);
    }
}

static void fresh_root(const char *name)
{
    snprintf(root, sizeof root, "%s/%s", t_tmpdir(), name);
    mkdir(root, 0755);
}

static int walk_ok(pk_site *s, const pk_rules *r)
{
    char err[2048];
    memset(s, 0, sizeof *s);
    if (pk_walk(root, r, s, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "walk failed: %s", err);
    return 0;
}

/* The walk must fail with a message containing needle. */
static void walk_fails(const char *needle)
{
    pk_site s;
    char err[2048] = "";
    memset(&s, 0, sizeof s);
    if (pk_walk(root, NULL, &s, err, sizeof err) == 0)
        t__fail(__FILE__, __LINE__, "walk succeeded, wanted an error with \"%s\"", needle);
    if (!strstr(err, needle))
        t__fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"", err, needle);
    pk_site_free(&s);
}

TEST(walk_sorted_keys_and_skips)
{
    fresh_root("site");
    mk("index.html", "i");
    mk("a-b.css", "x");
    mk("a/b.css", "x");
    mk("docs/guide/index.html", "g");
    mk(".env", "secret");
    mk(".git/config", "x");
    mk("docs/.hidden", "x");
    mk(".well-known/security.txt", "s");
    mk("x.js", "js");
    mk("x.js.gz", "gz"); /* a file like any other (sidecar.h) */
    pk_site s;
    walk_ok(&s, NULL);
    const char *want[] = {"/.well-known/security.txt",
                          "/a-b.css",
                          "/a/b.css",
                          "/docs/guide/index.html",
                          "/index.html",
                          "/x.js",
                          "/x.js.gz"};
    ASSERT_EQ(s.n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < s.n; i++)
        ASSERT_STR_EQ(s.files[i].key, want[i]);
    ASSERT_EQ(s.skipped_dot, 3); /* .env, .git, docs/.hidden */
    ASSERT_EQ(s.skipped_excluded, 0);
    ASSERT(strstr(s.files[1].src, "/a-b.css") != NULL);
    pk_site_free(&s);
}

TEST(walk_symlinks_inside_followed)
{
    fresh_root("links");
    mk("real/a.txt", "a");
    ASSERT_EQ(symlink("real", "/dev/null/x") != 0, 1); /* sanity: symlink() reports errors */
    char p[4096];
    snprintf(p, sizeof p, "%s/alias", root);
    ASSERT_EQ(symlink("real", p), 0);
    snprintf(p, sizeof p, "%s/b.txt", root);
    ASSERT_EQ(symlink("real/a.txt", p), 0);
    pk_site s;
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 3);
    ASSERT_STR_EQ(s.files[0].key, "/alias/a.txt");
    ASSERT_STR_EQ(s.files[1].key, "/b.txt");
    ASSERT_STR_EQ(s.files[2].key, "/real/a.txt");
    pk_site_free(&s);
}

TEST(walk_symlink_outside_refused)
{
    fresh_root("out");
    mk("a.txt", "a");
    char p[4096];
    snprintf(p, sizeof p, "%s/passwd", root);
    ASSERT_EQ(symlink("/etc/passwd", p), 0);
    walk_fails("passwd: symbolic link leads outside the root");
}

TEST(walk_symlink_outside_excluded_is_skipped)
{
    fresh_root("outx");
    mk("a.txt", "a");
    char p[4096];
    snprintf(p, sizeof p, "%s/passwd", root);
    ASSERT_EQ(symlink("/etc/passwd", p), 0);
    snprintf(p, sizeof p, "%s/../rules.json", root);
    FILE *f = fopen(p, "w");
    fputs("{\"exclude\": [\"/passwd\"]}", f);
    fclose(f);
    pk_rules *r;
    char err[1024];
    ASSERT_EQ(pk_rules_load(p, &r, err, sizeof err), 0);
    pk_site s;
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.skipped_excluded, 1);
    pk_site_free(&s);
    pk_rules_free(r);
}

TEST(walk_broken_symlink_and_loop_refused)
{
    fresh_root("broken");
    char p[4096];
    snprintf(p, sizeof p, "%s/dangling", root);
    ASSERT_EQ(symlink("nowhere", p), 0);
    walk_fails("dangling: broken symbolic link");

    fresh_root("loop");
    mk("d/a.txt", "a");
    snprintf(p, sizeof p, "%s/d/up", root);
    ASSERT_EQ(symlink("..", p), 0);
    walk_fails("directory loop");
}

/* Links to directories that link to each other multiply the paths: the
 * walk stops once a directory is reached by more than PK_WALK_MAX_ALIASES
 * paths, instead of running until the depth limit (hours, and all the
 * memory). Here 9 links to a directory of 16 links to one of 1,024 files:
 * 144 paths to it. A problem found before is still named. */
TEST(walk_linked_paths_bounded)
{
    fresh_root("dag");
    char p[4096];
    for (int i = 0; i < 1024; i++) {
        snprintf(p, sizeof p, "leaf/f%d", i);
        mk(p, "");
    }
    mk("mid", NULL);
    for (int i = 0; i < 16; i++) {
        snprintf(p, sizeof p, "%s/mid/l%d", root, i);
        ASSERT_EQ(symlink("../leaf", p), 0);
    }
    for (int i = 0; i < 9; i++) {
        snprintf(p, sizeof p, "%s/m%d", root, i);
        ASSERT_EQ(symlink("mid", p), 0);
    }
    walk_fails("paths reach this directory (/leaf) through symbolic links");
}

/* The count of paths to a directory survives the growth of the walk's
 * table of directories (1,024 slots, doubled once half are used): "/a" is
 * reached once by the walk and 64 times through links that come after 600
 * other directories, 65 paths in all, one more than PK_WALK_MAX_ALIASES. A
 * table that lost "/a"'s count when it grew would count 64 and let it by. */
TEST(walk_linked_paths_counted_across_table_growth)
{
    fresh_root("grow");
    char p[4096];
    mk("a/f.txt", "f");
    for (int i = 0; i < 600; i++) {
        snprintf(p, sizeof p, "b/d%03d/f.txt", i);
        mk(p, "f");
    }
    mk("c", NULL);
    for (int i = 0; i < PK_WALK_MAX_ALIASES; i++) {
        snprintf(p, sizeof p, "%s/c/l%02d", root, i);
        ASSERT_EQ(symlink("../a", p), 0);
    }
    walk_fails("more than 64 paths reach this directory (/a)");
    /* one link fewer: 64 paths, within the limit, and every file listed */
    snprintf(p, sizeof p, "%s/c/l00", root);
    ASSERT_EQ(unlink(p), 0);
    pk_site s;
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 1 + 600 + PK_WALK_MAX_ALIASES - 1);
    pk_site_free(&s);
}

/* Every problem of the tree is found in one run: the walk goes on past a
 * broken link, a FIFO or a bad name, and fails at the end with their count
 * (each was printed on its own line, the first ten). */
TEST(walk_names_every_problem_in_one_run)
{
    fresh_root("many-problems");
    mk("index.html", "x");
    char p[4096];
    for (int i = 0; i < 11; i++) {
        snprintf(p, sizeof p, "%s/gone%02d", root, i);
        ASSERT_EQ(symlink("nowhere", p), 0);
    }
    snprintf(p, sizeof p, "%s/pipe", root);
    ASSERT_EQ(mkfifo(p, 0644), 0);
    walk_fails("12 problems in the tree (the first 10 above); nothing was packed");

    fresh_root("two-problems");
    mk("index.html", "x");
    snprintf(p, sizeof p, "%s/gone", root);
    ASSERT_EQ(symlink("nowhere", p), 0);
    snprintf(p, sizeof p, "%s/pipe", root);
    ASSERT_EQ(mkfifo(p, 0644), 0);
    walk_fails("2 problems in the tree (above)");
}

TEST(walk_special_files_refused)
{
    fresh_root("fifo");
    mk("a.txt", "a");
    char p[4096];
    snprintf(p, sizeof p, "%s/pipe", root);
    ASSERT_EQ(mkfifo(p, 0644), 0);
    walk_fails("pipe: is a FIFO");
}

TEST(walk_bad_names_refused)
{
    fresh_root("bs");
    mk("a\\b.txt", "x");
    walk_fails("backslash");
    fresh_root("ctl");
    mk("a\tb.txt", "x");
    walk_fails("control character");
    fresh_root("utf");
    mk("caf\xe9.txt", "x");
    walk_fails("not valid UTF-8");
}

TEST(walk_root_errors)
{
    pk_site s;
    char err[2048];
    memset(&s, 0, sizeof s);
    ASSERT_NE(pk_walk("/nonexistent/servd-root", NULL, &s, err, sizeof err), 0);
    ASSERT(strstr(err, "/nonexistent/servd-root") != NULL);
    pk_site_free(&s);
    fresh_root("file");
    mk("f", "x");
    char p[4096];
    snprintf(p, sizeof p, "%s/f", root);
    memset(&s, 0, sizeof s);
    ASSERT_NE(pk_walk(p, NULL, &s, err, sizeof err), 0);
    ASSERT(strstr(err, "not a directory") != NULL);
    pk_site_free(&s);
}

TEST(walk_empty_directories)
{
    fresh_root("empty");
    pk_site s;
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 0);
    pk_site_free(&s);
    mk("a/b/c", NULL); /* empty nested directories */
    mk("d/x.txt", "x");
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 1);
    ASSERT_STR_EQ(s.files[0].key, "/d/x.txt");
    pk_site_free(&s);
}

TEST(walk_long_key_refused)
{
    fresh_root("long");
    char name[300];
    memset(name, 'n', 255);
    name[255] = '\0';
    char rel[700];
    snprintf(rel, sizeof rel, "%s/%s/x", name, name); /* key: 514 bytes */
    mk(rel, "x");
    walk_fails("longer than 511 bytes");
}

/* servd-pack(1): a directory 64 levels below the root or deeper is refused
 * (the walk's loop-detection stack, PK_WALK_MAX_DEPTH); 63 levels pack. */
TEST(walk_depth_limit)
{
    char rel[256];
    size_t n = 0;
    for (int i = 0; i < PK_WALK_MAX_DEPTH - 1; i++)
        n += (size_t)snprintf(rel + n, sizeof rel - n, "d/");
    snprintf(rel + n, sizeof rel - n, "x");
    fresh_root("deep63");
    mk(rel, "x"); /* x in a directory 63 levels below the root */
    pk_site s;
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(strlen(s.files[0].key), 2 * (PK_WALK_MAX_DEPTH - 1) + 2);
    pk_site_free(&s);
    fresh_root("deep64");
    memmove(rel + 2, rel, strlen(rel) + 1);
    memcpy(rel, "d/", 2);
    mk(rel, "x"); /* one level more */
    walk_fails("a directory 64 levels below the root (the limit is 63 levels)");
}

/* Loads rules from JSON text (written next to the current root). */
static pk_rules *rules_from(const char *json)
{
    char p[4096];
    snprintf(p, sizeof p, "%s.rules.json", root);
    FILE *f = fopen(p, "w");
    if (!f)
        t__fail(__FILE__, __LINE__, "cannot write %s", p);
    fputs(json, f);
    fclose(f);
    pk_rules *r;
    char err[1024];
    if (pk_rules_load(p, &r, err, sizeof err) != 0)
        t__fail(__FILE__, __LINE__, "rules: %s", err);
    return r;
}

TEST(walk_exclude_rescues_bad_names_loops_and_long_paths)
{
    fresh_root("rescue");
    mk("a.txt", "a");
    mk("tmp/a\tb.txt", "x");   /* a control character */
    mk("vendor/c\\d.js", "x"); /* a backslash */
    mk("d/x.txt", "x");
    char p[4096];
    snprintf(p, sizeof p, "%s/d/up", root);
    ASSERT_EQ(symlink("..", p), 0); /* a loop */
    char name[300];
    memset(name, 'n', 255);
    name[255] = '\0';
    char rel[700];
    snprintf(rel, sizeof rel, "deep/%s/%s/x", name, name); /* key longer than 511 bytes */
    mk(rel, "x");
    pk_rules *r = rules_from("{\"exclude\": [\"/tmp/**\", \"*\\\\\\\\*\", \"/d/up\", "
                             "\"/deep/**\"]}");
    pk_site s;
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 2);
    ASSERT_STR_EQ(s.files[0].key, "/a.txt");
    ASSERT_STR_EQ(s.files[1].key, "/d/x.txt");
    ASSERT_EQ(s.skipped_excluded, 4); /* tmp/, vendor/c\d.js, d/up, deep/: once each */
    pk_site_free(&s);
    pk_rules_free(r);
    /* The loop is also rescued by a glob covering everything under the link. */
    r = rules_from("{\"exclude\": [\"/tmp/**\", \"/vendor/**\", \"/d/up/**\", \"/deep/**\"]}");
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 2);
    pk_site_free(&s);
    pk_rules_free(r);
}

TEST(walk_exclude_prunes_only_covered_directories)
{
    fresh_root("prune");
    mk("drafts/a.txt", "a");
    mk("drafts/sub/b.txt", "b");
    mk("keep.txt", "k");
    /* "/drafts/" + "*" matches "/drafts/" but not "/drafts/sub/b.txt": no pruning. */
    pk_rules *r = rules_from("{\"exclude\": [\"/drafts/*\"]}");
    pk_site s;
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 2);
    ASSERT_STR_EQ(s.files[0].key, "/drafts/sub/b.txt");
    ASSERT_STR_EQ(s.files[1].key, "/keep.txt");
    ASSERT_EQ(s.skipped_excluded, 1);
    pk_site_free(&s);
    pk_rules_free(r);
    r = rules_from("{\"exclude\": [\"drafts/**\"]}"); /* unanchored, covers the directory */
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 1);
    ASSERT_STR_EQ(s.files[0].key, "/keep.txt");
    ASSERT_EQ(s.skipped_excluded, 1);
    pk_site_free(&s);
    pk_rules_free(r);
}

/* The walk with rules r must fail with a message containing needle. */
static void walk_fails_r(const pk_rules *r, const char *needle)
{
    pk_site s;
    char err[2048] = "";
    memset(&s, 0, sizeof s);
    if (pk_walk(root, r, &s, err, sizeof err) == 0)
        t__fail(__FILE__, __LINE__, "walk succeeded, wanted an error with \"%s\"", needle);
    if (!strstr(err, needle))
        t__fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"", err, needle);
    pk_site_free(&s);
}

static void link_in_root(const char *target, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", root, name);
    if (symlink(target, p) != 0)
        t__fail(__FILE__, __LINE__, "symlink %s -> %s failed", p, target);
}

TEST(walk_symlink_to_hidden_refused)
{
    fresh_root("hidden-file");
    mk("a.txt", "a");
    mk(".env", "SECRET=1");
    link_in_root(".env", "env.txt");
    walk_fails("env.txt: symbolic link leads to /.env, which is a hidden path");

    fresh_root("hidden-dir");
    mk("a.txt", "a");
    mk(".git/config", "[core]");
    link_in_root(".git", "g");
    walk_fails("/g: symbolic link leads to /.git, which is a hidden path");

    fresh_root("hidden-deep");
    mk("docs/.drafts/x.html", "x");
    link_in_root("docs/.drafts/x.html", "x.html");
    walk_fails("x.html: symbolic link leads to /docs/.drafts/x.html, which is a hidden path");

    /* Excluding the link itself packs the rest. */
    fresh_root("hidden-excluded");
    mk("a.txt", "a");
    mk(".env", "SECRET=1");
    link_in_root(".env", "env.txt");
    pk_rules *r = rules_from("{\"exclude\": [\"/env.txt\"]}");
    pk_site s;
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 1);
    ASSERT_STR_EQ(s.files[0].key, "/a.txt");
    pk_site_free(&s);
    pk_rules_free(r);

    /* The top-level .well-known is packed, so a link to it is followed. */
    fresh_root("wellknown");
    mk(".well-known/security.txt", "Contact: x");
    link_in_root(".well-known", "wk");
    walk_ok(&s, NULL);
    ASSERT_EQ(s.n, 2);
    ASSERT_STR_EQ(s.files[0].key, "/.well-known/security.txt");
    ASSERT_STR_EQ(s.files[1].key, "/wk/security.txt");
    pk_site_free(&s);
}

TEST(walk_symlink_to_excluded_refused)
{
    fresh_root("excl-file");
    mk("a.txt", "a");
    mk("secret.txt", "s");
    link_in_root("secret.txt", "public.txt");
    pk_rules *r = rules_from("{\"exclude\": [\"/secret.txt\"]}");
    walk_fails_r(r, "public.txt: symbolic link leads to /secret.txt, which is excluded");
    pk_rules_free(r);

    fresh_root("excl-dir");
    mk("drafts/a.html", "a");
    link_in_root("drafts", "blog");
    r = rules_from("{\"exclude\": [\"/drafts/**\"]}");
    walk_fails_r(r, "/blog: symbolic link leads to /drafts, which is excluded");
    pk_rules_free(r);

    /* A file below a linked directory is judged at its real place too. */
    fresh_root("excl-below");
    mk("docs/a.html", "a");
    mk("docs/secret.html", "s");
    link_in_root("docs", "d");
    r = rules_from("{\"exclude\": [\"/docs/secret.html\"]}");
    walk_fails_r(r, "d/secret.html: reached through a symbolic link, this is /docs/secret.html");
    pk_rules_free(r);
    r = rules_from("{\"exclude\": [\"secret.html\"]}"); /* matches both places: skipped */
    pk_site s;
    walk_ok(&s, r);
    ASSERT_EQ(s.n, 2);
    ASSERT_STR_EQ(s.files[0].key, "/d/a.html");
    ASSERT_STR_EQ(s.files[1].key, "/docs/a.html");
    pk_site_free(&s);
    pk_rules_free(r);
}
