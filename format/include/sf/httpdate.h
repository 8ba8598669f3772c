/*
 * sf/httpdate.h - HTTP-dates (RFC 9110 §5.6.7), shared by servd-pack (the
 * Last-Modified it renders, the Expires values it accepts in rules) and
 * servd (the Date line, the dates of conditional requests). One formatter
 * and one parser, so that what the packer writes is what servd compares.
 */
#ifndef SF_HTTPDATE_H
#define SF_HTTPDATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The length of an IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT". */
#define SF_HTTP_DATE_LEN 29

/* Formats Unix second t as an IMF-fixdate (SF_HTTP_DATE_LEN bytes and a
 * NUL) without locale or time zone state. A t outside the years 0..9999,
 * which four digits cannot write, is clamped to the nearest of them.
 * @return 0, or -1 when t was clamped. */
int sf_http_date_format(int64_t t, char out[SF_HTTP_DATE_LEN + 1]);

/* Parses an HTTP-date in any of the three forms a recipient must accept
 * (case-sensitive, as the grammar's %s strings are):
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 *   rfc850-date  "Sunday, 06-Nov-94 08:49:37 GMT"
 *   asctime-date "Sun Nov  6 08:49:37 1994"
 * The day name is checked for syntax only (recipients are lenient there);
 * the day must exist in its month; second 60 (a leap second) is accepted.
 * Two-digit rfc850 years are read against the current time, as
 * sf_http_date_parse_at does. @return 0 and *t in Unix seconds, or -1 when
 * invalid. */
int sf_http_date_parse(const char *s, size_t n, int64_t *t);

/* sf_http_date_parse with now (Unix seconds) for the current time: a
 * two-digit rfc850 year is the one sf_http_rfc850_year gives for now's
 * year, 100 years earlier when the timestamp is then more than 50 years
 * after now (RFC 9110 §5.6.7; in the 50th year ahead the date decides).
 * An rfc850-date is invalid (-1) when now, or the year it names, is
 * outside years 0 to 9999. */
int sf_http_date_parse_at(const char *s, size_t n, int64_t now, int64_t *t);

/* The year an rfc850-date's two digits yy name when the current year is now:
 * the one with those digits that is at most 50 years in the future (a year
 * more than 50 years ahead is the most recent past one), judged by the year
 * alone (sf_http_date_parse_at also looks at the date in the 50th year). */
int sf_http_rfc850_year(int yy, int now);

/* 1 when s[0, n) is a date a sender may generate: an IMF-fixdate of a day
 * that exists, whose day name is that day's (RFC 5322 §3.3, which RFC 9110
 * §5.6.7 takes the semantics from). 0 otherwise. */
int sf_http_date_sendable(const char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif
