/* jsonw.c - a JSON document written one member at a time (jsonw.h). */
#include "jsonw.h"

#include <errno.h>
#include <string.h>

/* The indent of one level, as JSON_INDENT(2) writes it. */
#define INDENT 2

void pk_jsonw_init(pk_jsonw *w, FILE *fp, size_t flags)
{
    memset(w, 0, sizeof *w);
    w->fp = fp;
    w->flags = flags | JSON_INDENT(INDENT) | JSON_ENCODE_ANY;
}

static void fail(pk_jsonw *w, int e)
{
    if (!w->failed)
        w->failed = e;
}

/* Writes n bytes of p. Every write is checked here, not by ferror alone:
 * printf-style calls can drop bytes without setting it (glibc's, out of
 * memory), so none is used. */
static void out(pk_jsonw *w, const char *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->fp) != n)
        fail(w, errno ? errno : EIO);
}

/* A newline and the indent of the depth open. */
static void new_line(pk_jsonw *w)
{
    static const char line[] = "\n                ";
    _Static_assert(sizeof line - 1 == 1 + PK_JSONW_DEPTH * INDENT, "one indent per depth");
    out(w, line, 1 + (size_t)w->depth * INDENT);
}

/* json_dump_callback's output: each line after the first indented by the
 * depth open, as json_dumpf would place it inside them. A newline in its
 * output is always one of the layout's (a string's is escaped). */
static int put_indented(const char *s, size_t n, void *arg)
{
    pk_jsonw *w = arg;
    for (const char *nl; (nl = memchr(s, '\n', n)) != NULL; n -= (size_t)(nl + 1 - s), s = nl + 1) {
        out(w, s, (size_t)(nl - s));
        new_line(w);
    }
    out(w, s, n);
    return w->failed ? -1 : 0;
}

/* Writes v, a value: straight into the file, through put_indented. Not
 * json_dumps into a string first: jansson 2.14 ignores a failure to write
 * an object's key, and the string's growth can fail (a key vanished from
 * the listing with an allocation failed), where writing into the file
 * allocates nothing. */
static void put_value(pk_jsonw *w, const json_t *v)
{
    if (json_dump_callback(v, put_indented, w, w->flags) != 0)
        fail(w, ENOMEM); /* unless a write failed first */
}

/* What comes before a member: the separator, its line, and its key. */
static void begin_member(pk_jsonw *w, const char *key)
{
    if (w->depth == 0)
        return;
    if (w->count[w->depth - 1]++ > 0)
        out(w, ",", 1);
    new_line(w);
    if (!key)
        return;
    json_t *k = json_string(key);
    if (!k) {
        fail(w, ENOMEM);
        return;
    }
    put_value(w, k);
    json_decref(k);
    out(w, ": ", 2);
}

void pk_jsonw_open(pk_jsonw *w, const char *key, char kind)
{
    if (w->depth == PK_JSONW_DEPTH) {
        fail(w, EINVAL);
        return;
    }
    begin_member(w, key);
    out(w, &kind, 1);
    w->close[w->depth] = kind == '{' ? '}' : ']';
    w->count[w->depth++] = 0;
}

void pk_jsonw_put(pk_jsonw *w, const char *key, json_t *value)
{
    if (!value) {
        fail(w, ENOMEM);
        return;
    }
    begin_member(w, key);
    put_value(w, value);
    json_decref(value);
}

void pk_jsonw_close(pk_jsonw *w)
{
    if (w->depth == 0) {
        fail(w, EINVAL);
        return;
    }
    w->depth--;
    if (w->count[w->depth] > 0)
        new_line(w);
    out(w, &w->close[w->depth], 1);
}

int pk_jsonw_status(const pk_jsonw *w)
{
    if (w->failed) {
        errno = w->failed;
        return -1;
    }
    if (ferror(w->fp)) {
        if (errno == 0)
            errno = EIO;
        return -1;
    }
    return 0;
}
