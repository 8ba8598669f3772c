/*
 * charset.h - the encoding a text file declares for itself.
 *
 * servd-pack adds "; charset=utf-8" to a text type only when the bytes are
 * UTF-8 and the file names no other encoding: the header's charset
 * overrides the file's own declaration, which decides how an ASCII page's
 * scripts are decoded and its forms submitted.
 */
#ifndef PK_CHARSET_H
#define PK_CHARSET_H

#include <stddef.h>

enum pk_declared {
    PK_DECLARED_NONE,  /* no declaration, or a name that is no encoding's label */
    PK_DECLARED_UTF8,  /* UTF-8 (or UTF-16, which a page declared in ASCII is not) */
    PK_DECLARED_OTHER, /* another encoding of the Encoding Standard */
};

/* What the file data[0, n) of base type base ("text/html", lower case, no
 * parameters) declares: for HTML and XHTML, a <meta charset> or http-equiv
 * content in the first 1024 bytes, read as browsers prescan them (HTML
 * Living Standard, "prescan a byte stream"); for CSS, an @charset rule at
 * its start; for XML types, the XML declaration's encoding. */
int pk_declared_encoding(const char *base, const void *data, size_t n);

#endif
