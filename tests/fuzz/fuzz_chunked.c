/*
 * fuzz_chunked - sv_http1_chunked_length(), which decides where a chunked
 * request body ends and so where the next request on the connection
 * starts: a disagreement with the sender is a smuggled request.
 *
 * The input is the bytes after a head that said "Transfer-Encoding:
 * chunked", on an exact-size heap copy (ASan catches any read past the
 * end). Three checks:
 *  - against a second strict reading of RFC 9112 §7.1 written the other way
 *    round, a state machine fed one byte at a time (reference()): the same
 *    length for every body either finds whole. The reference refuses some
 *    bodies sooner (it checks each byte as it arrives, where
 *    sv_http1_chunked_length() checks a line once its LF is here and the
 *    CRLF after a chunk's data once both bytes are): there it may say
 *    incomplete, but once a CRLF or two more arrive it must refuse too;
 *  - against a lenient reader such as front ends are (lenient(): lines end
 *    at LF, a chunk line is read for its hex digits and the rest skipped,
 *    the two bytes after a chunk's data skipped whatever they are, trailer
 *    lines skipped up to an empty one): every body servd finds whole and
 *    skips, keeping the connection, it finds whole and of the same length.
 *    A difference there would be a smuggled request;
 *  - the streaming contract: a prefix of a whole body is incomplete; bytes
 *    after it do not change its length; a prefix of a malformed one is
 *    never whole.
 */
#include "http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "fuzz_chunked: %s (%zu bytes)\n", what, n);
    (void)p;
    abort();
}

static int tchar(unsigned c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c && strchr("!#$%&'*+-.^_`|~", (int)c));
}
static int ws(unsigned c)
{
    return c == ' ' || c == '\t';
}
static int vchar_or_obs(unsigned c)
{
    return (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}
static int hexval(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (int)((c | 0x20) - 'a' + 10);
    return -1;
}

enum {
    SIZE0,
    SIZE,
    WS_SEMI,
    NAME0,
    NAME,
    WS_NAME,
    VAL0,
    TOKVAL,
    QS,
    QP,
    AFTER_QS,
    LINE_LF,
    DATA,
    DATA_CR,
    DATA_LF,
    TRAILER,
    TNAME,
    TVAL,
    TLF,
    END_LF
};

/* RFC 9112 §7.1 one byte at a time: > 0 the length of a whole body, 0
 * incomplete or too long to skip (a chunk-size or a total over
 * SV_MAX_DRAIN), -400 malformed. */
static int reference(const uint8_t *p, size_t n)
{
    int s = SIZE0;
    uint64_t size = 0, left = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        switch (s) {
        case SIZE0:
            if (hexval(c) < 0)
                return -400;
            size = (uint64_t)hexval(c);
            s = SIZE;
            break;
        case SIZE:
            if (hexval(c) >= 0) {
                if (size <= SV_MAX_DRAIN)
                    size = size * 16 + (uint64_t)hexval(c);
                break;
            }
            __attribute__((fallthrough)); /* after the size as after a value */
        case TOKVAL:
        case AFTER_QS:
            if (s == TOKVAL && tchar(c))
                ;
            else if (c == ';')
                s = NAME0;
            else if (ws(c))
                s = WS_SEMI;
            else if (c == '\r')
                s = LINE_LF;
            else
                return -400;
            break;
        case WS_SEMI: /* BWS: only a ';' may follow */
            if (c == ';')
                s = NAME0;
            else if (!ws(c))
                return -400;
            break;
        case NAME0:
            if (tchar(c))
                s = NAME;
            else if (!ws(c))
                return -400;
            break;
        case NAME:
        case WS_NAME:
            if (c == '=')
                s = VAL0;
            else if (c == ';')
                s = NAME0;
            else if (ws(c))
                s = WS_NAME;
            else if (s == NAME && tchar(c))
                ;
            else if (s == NAME && c == '\r')
                s = LINE_LF;
            else
                return -400;
            break;
        case VAL0:
            if (c == '"')
                s = QS;
            else if (tchar(c))
                s = TOKVAL;
            else if (!ws(c))
                return -400;
            break;
        case QS:
            if (c == '"')
                s = AFTER_QS;
            else if (c == '\\')
                s = QP;
            else if (!ws(c) && !vchar_or_obs(c))
                return -400;
            break;
        case QP:
            if (!ws(c) && !vchar_or_obs(c))
                return -400;
            s = QS;
            break;
        case LINE_LF:
            if (c != '\n')
                return -400;
            if (size == 0)
                s = TRAILER;
            else if (size > SV_MAX_DRAIN)
                return 0;
            else {
                left = size;
                s = DATA;
            }
            break;
        case DATA:
            if (--left == 0)
                s = DATA_CR;
            break;
        case DATA_CR:
            if (c != '\r')
                return -400;
            s = DATA_LF;
            break;
        case DATA_LF:
            if (c != '\n')
                return -400;
            s = SIZE0;
            break;
        case TRAILER:
            if (c == '\r')
                s = END_LF;
            else if (tchar(c))
                s = TNAME;
            else
                return -400;
            break;
        case TNAME:
            if (c == ':')
                s = TVAL;
            else if (!tchar(c))
                return -400;
            break;
        case TVAL:
            if (c == '\r')
                s = TLF;
            else if (!ws(c) && !vchar_or_obs(c))
                return -400;
            break;
        case TLF:
            if (c != '\n')
                return -400;
            s = TRAILER;
            break;
        case END_LF:
            if (c != '\n')
                return -400;
            return i + 1 <= SV_MAX_DRAIN ? (int)(i + 1) : 0;
        }
    }
    return 0;
}

/* A front end's reading, as lenient as real ones are: > 0 the length of
 * a whole body, 0 incomplete, -1 not a body it reads. */
static long lenient(const uint8_t *p, size_t n)
{
    size_t pos = 0;
    for (;;) { /* chunk lines */
        const uint8_t *lf = memchr(p + pos, '\n', n - pos);
        if (!lf)
            return 0;
        uint64_t size = 0;
        size_t i = pos;
        for (; p + i < lf && hexval(p[i]) >= 0; i++) {
            if (size >> 56)
                return -1; /* front ends refuse an overflow */
            size = size * 16 + (uint64_t)hexval(p[i]);
        }
        if (i == pos)
            return -1;
        pos = (size_t)(lf - p) + 1;
        if (size == 0)
            break;
        if (n - pos < size + 2)
            return 0;
        pos += size + 2; /* data, and two bytes taken as its CRLF */
    }
    for (;;) { /* trailer lines, up to an empty one */
        const uint8_t *lf = memchr(p + pos, '\n', n - pos);
        if (!lf)
            return 0;
        size_t len = (size_t)(lf - p) - pos;
        pos = (size_t)(lf - p) + 1;
        if (len == 0 || (len == 1 && p[pos - 2] == '\r'))
            return (long)pos;
    }
}

static int measure(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data, n);
    int r = sv_http1_chunked_length(p, n);
    free(p);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int r = measure(data, size);
    int want = reference(data, size);
    if (r != 0 && r != -400 && (r < 0 || (size_t)r > size || r > SV_MAX_DRAIN))
        die("a result that is no length and no status", data, size);
    if (r != want && !(r == 0 && want == -400)) {
        fprintf(stderr, "sv_http1_chunked_length %d, the reference %d\n", r, want);
        die("the two readings of the body disagree", data, size);
    }
    if (r == 0 && want == -400) {
        /* refused by the reference from the bytes so far: servd too, once
         * the line or the CRLF it waits for has come */
        uint8_t *padded = malloc(size + 4);
        if (!padded)
            abort();
        memcpy(padded, data, size);
        memcpy(padded + size, "\r\n\r\n", 4);
        int rp = measure(padded, size + 4);
        free(padded);
        if (rp != -400)
            die("a body the reference refuses is not refused once its line is whole", data, size);
    }
    if (r > 0 && lenient(data, size) != r)
        die("a lenient front end reads a body servd skips to another length", data, size);
    if (r > 0) {
        size_t cuts[3] = {(size_t)r - 1, (size_t)r / 2, (size_t)(data[r / 2] * 131u) % (size_t)r};
        for (int i = 0; i < 3; i++)
            if (measure(data, cuts[i]) != 0)
                die("a prefix of a whole body is not incomplete", data, size);
        if (measure(data, (size_t)r) != r)
            die("bytes after a body change its length", data, size);
    } else if (r < 0 && size) {
        if (measure(data, (size_t)(data[0] * 257u + data[size - 1]) % size) > 0)
            die("a prefix of a malformed body is whole", data, size);
    }
    return 0;
}
