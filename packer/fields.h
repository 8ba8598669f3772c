/*
 * fields.h - the header fields a rules file may give servd-pack: which names
 * it may set, what values may go on the wire, and the syntax of the fields
 * whose values recipients check (Expires, CORS, HSTS, nosniff), of media
 * types and of Cache-Control. Used by the rules loader and by verify.
 */
#ifndef PK_FIELDS_H
#define PK_FIELDS_H

#include <stddef.h>

/* ASCII only, whatever the locale (ctype's isdigit and islower follow it). */
static inline int pk_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static inline int pk_is_lower(char c)
{
    return c >= 'a' && c <= 'z';
}

/* Longest header value or Cache-Control accepted: servd's clients and CDNs
 * commonly cap a header line at 8 KiB. */
#define PK_HEADER_VALUE_MAX 4096

/* Longest header name accepted: real ones are under 40 bytes. */
#define PK_HEADER_NAME_MAX 256

/* The ok functions return 1 if acceptable; the problem functions NULL, or
 * why not. */
int pk_header_name_ok(const char *s);       /* RFC 9110 token */
int pk_header_name_reserved(const char *s); /* 1: set by servd-pack or servd;
                                               2: differs per response (digests, Age) */
int pk_header_value_ok(const char *s);      /* field-value, no CR/LF/NUL/CTL, trimmed */
int pk_header_singleton(const char *s);     /* a field a response may carry only once */
/* Why value cannot be the value of the field name, for the fields whose
 * syntax recipients check (Expires, Access-Control-*, Strict-Transport-
 * Security, X-Content-Type-Options), with why filled; or NULL. */
const char *pk_header_syntax_problem(const char *name, const char *value, char *why, size_t cap);
/* Why s cannot be a header value ("is empty", ...), or NULL when it can. */
const char *pk_header_value_problem(const char *s);
/* NULL when s is a media type (RFC 9110 §8.3.1: type "/" subtype, tokens
 * and neither "*", then *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] ))
 * and a header value (pk_header_value_problem); otherwise why not, written
 * into why. */
const char *pk_mime_type_problem(const char *s, char *why, size_t cap);
int pk_mime_type_ok(const char *s); /* pk_mime_type_problem() == NULL */
/* NULL when s is a Cache-Control value (RFC 9111 §5.2: a list of token
 * ["=" (token / quoted-string)]) whose delta-seconds directives have digits,
 * whose argument-less directives have none and that names no directive
 * twice; otherwise why not, written into why. */
const char *pk_cache_control_problem(const char *s, char *why, size_t cap);
/* Whether the Cache-Control value s has the directive named name, with or
 * without an argument; arguments are not searched. Any NUL-terminated s is
 * walked safely (verify passes stored values that may be damaged). */
int pk_cache_control_has(const char *s, const char *name);

#endif
