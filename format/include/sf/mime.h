/*
 * sf/mime.h - the media types of file extensions: servd-pack's first guess
 * at a file's type, and servd's --spa test of whether a missing path names
 * a file. In the format library because it is the one library both
 * programs link.
 */
#ifndef SF_MIME_H
#define SF_MIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The table type for the extension of a key or file name ("/a/b.JS" ->
 * "text/javascript"), or NULL: no extension in the last segment, a name
 * that is only ".ext", or an extension the table does not know. Matched
 * case-insensitively. */
const char *sf_mime_by_ext(const char *name, size_t len);

/* 1 if name's last segment has an extension, known or not: a dot, not
 * its first byte, followed by something ("/AUTHORS", "/.env" and "/a."
 * have none). */
int sf_ext_present(const char *name, size_t len);

/* 1 if type (as sf_mime_by_ext gives it) is a document a browser navigates
 * to (text/html, application/xhtml+xml), else 0. */
int sf_mime_is_document(const char *type);

/* 1 if the extension of name's last segment names a file other than a
 * page: a type of the table that is not a document (.js, .png, .json), or
 * one of the other files sites hold (.data, .unityweb, .php, .bak, .docx,
 * ...). servd --spa answers a missing path with /index.html unless this
 * holds: a missing asset gets its 404, /user/jane.doe the application. */
int sf_ext_names_file(const char *name, size_t len);

#ifdef __cplusplus
}
#endif

#endif
