/* jsonw: a document written one member at a time has the bytes json_dumps
 * gives the whole document, with the same flags; a member that could not be
 * built fails the document. */
#include "jsonw.h"
#include "runner.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The manifest's shape: scalars, a nested object, an object of objects
 * holding arrays (one empty), keys that need escaping. */
static json_t *member(int i)
{
    json_t *headers = json_array();
    if (i == 1)
        json_array_append_new(headers, json_pack("{s:s, s:s}", "name", "X-A", "value", "\"q\"\t"));
    return json_pack("{s:s, s:I, s:o, s:[{s:s, s:I}, {s:s}]}", "mime", "text/html", "size",
                     (json_int_t)(1000 * i), "headers", headers, "variants", "encoding", "identity",
                     "size", (json_int_t)i, "encoding", "gzip");
}

static const char *const keys[] = {"/index.html", "/caf\xc3\xa9 \"x\".txt", "/\xe6\x97\xa5/a\\b"};

static json_t *whole(void)
{
    json_t *paths = json_object();
    for (int i = 0; i < 3; i++)
        json_object_set_new(paths, keys[i], member(i));
    json_t *doc = json_pack("{s:i, s:s, s:n, s:{s:I, s:I}, s:o, s:[], s:{}}", "servd_manifest", 1,
                            "pack_id", "00ff", "not_found", "totals", "paths", (json_int_t)3,
                            "bodies", (json_int_t)7, "paths", paths, "none", "empty");
    ASSERT(doc != NULL);
    return doc;
}

static char *streamed(size_t flags)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    ASSERT(fp != NULL);
    pk_jsonw w;
    pk_jsonw_init(&w, fp, flags);
    pk_jsonw_open(&w, NULL, '{');
    pk_jsonw_put(&w, "servd_manifest", json_integer(1));
    pk_jsonw_put(&w, "pack_id", json_string("00ff"));
    pk_jsonw_put(&w, "not_found", json_null());
    pk_jsonw_put(&w, "totals",
                 json_pack("{s:I, s:I}", "paths", (json_int_t)3, "bodies", (json_int_t)7));
    pk_jsonw_open(&w, "paths", '{');
    for (int i = 0; i < 3; i++)
        pk_jsonw_put(&w, keys[i], member(i));
    pk_jsonw_close(&w);
    pk_jsonw_open(&w, "none", '[');
    pk_jsonw_close(&w);
    pk_jsonw_open(&w, "empty", '{');
    pk_jsonw_close(&w);
    pk_jsonw_close(&w);
    ASSERT_EQ(pk_jsonw_status(&w), 0);
    ASSERT_EQ(fclose(fp), 0);
    return buf;
}

TEST(jsonw_writes_what_json_dumps_writes)
{
    size_t sets[] = {JSON_ENSURE_ASCII, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER, 0};
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        json_t *doc = whole();
        char *want = json_dumps(doc, sets[k] | JSON_INDENT(2));
        char *got = streamed(sets[k]);
        ASSERT(want != NULL && got != NULL);
        if (strcmp(got, want) != 0)
            printf("flags %zu:\n--- json_dumps\n%s\n--- jsonw\n%s\n", sets[k], want, got);
        ASSERT(strcmp(got, want) == 0);
        free(want);
        free(got);
        json_decref(doc);
    }
}

TEST(jsonw_array_of_objects_and_empty_array)
{
    json_t *arr = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(arr, member(i));
    char *want = json_dumps(arr, JSON_ENSURE_ASCII | JSON_INDENT(2));
    json_decref(arr);
    char *got = NULL, *empty = NULL;
    size_t len = 0, elen = 0;
    FILE *fp = open_memstream(&got, &len), *efp = open_memstream(&empty, &elen);
    ASSERT(fp != NULL && efp != NULL);
    pk_jsonw w, e;
    pk_jsonw_init(&w, fp, JSON_ENSURE_ASCII);
    pk_jsonw_open(&w, NULL, '[');
    for (int i = 0; i < 3; i++)
        pk_jsonw_put(&w, NULL, member(i));
    pk_jsonw_close(&w);
    pk_jsonw_init(&e, efp, JSON_ENSURE_ASCII);
    pk_jsonw_open(&e, NULL, '[');
    pk_jsonw_close(&e);
    ASSERT_EQ(fclose(fp), 0);
    ASSERT_EQ(fclose(efp), 0);
    ASSERT(want != NULL && strcmp(got, want) == 0);
    ASSERT(strcmp(empty, "[]") == 0);
    free(want);
    free(got);
    free(empty);
}

/* A member a jansson constructor could not build (NULL) fails the document:
 * a manifest short of memory must not be taken for a whole one. */
TEST(jsonw_missing_member_fails)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    ASSERT(fp != NULL);
    pk_jsonw w;
    pk_jsonw_init(&w, fp, 0);
    pk_jsonw_open(&w, NULL, '[');
    pk_jsonw_put(&w, NULL, json_integer(1));
    pk_jsonw_put(&w, NULL, NULL);
    pk_jsonw_close(&w);
    errno = 0;
    ASSERT_EQ(pk_jsonw_status(&w), -1);
    ASSERT_EQ(errno, ENOMEM);
    fclose(fp);
    free(buf);
}
