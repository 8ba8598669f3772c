/*
 * msg.h - the messages servd-pack prints on standard error.
 *
 * Every message is one line, "servd-pack: " + text, and names files and rule
 * values that come from outside: a file name may hold a newline or an escape
 * sequence, a rejected rule value a CR or LF. So every byte below 0x20 and
 * 0x7f, and every byte that is not part of well-formed UTF-8, is printed as
 * \xNN, and C1 controls, line separators and bidirectional controls as
 * \uNNNN: a message can neither forge a second line, nor drive the
 * terminal, nor reorder itself.
 */
#ifndef PK_MSG_H
#define PK_MSG_H

#include <stdarg.h>
#include <stdio.h>

/* Longest message printed in full: longer ones are cut (they only ever are
 * when a path is absurdly long). */
#define PK_MSG_MAX 8192

/* Prints "servd-pack: " + the formatted text (escaped) + "\n" to stderr. */
void pk_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pk_verr(const char *fmt, va_list ap);

/* The line pk_err would print, "\n" included, into out[cap] (cut to fit):
 * for a signal handler, which may only write(2) what was made beforehand. */
void pk_format_line(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prints "servd-pack: warning: " + the text, as pk_err, and counts it: a
 * warning about what is packed (the options, the site, the rules), on
 * which build --strict fails (build.c). A warning about the machine (a
 * lock, a killed build's file) is pk_err("warning: ...") instead. */
void pk_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void pk_vwarn(const char *fmt, va_list ap);
/* The warnings printed so far. */
unsigned long pk_warnings(void);

/* Writes s to out escaped as above. */
void pk_esc_fputs(const char *s, FILE *out);

/* Writes s[0, n) to out escaped as above: a pack key in a listing, where
 * a bidirectional control would make a terminal show the names reordered. */
void pk_esc_fwrite(const char *s, size_t n, FILE *out);

#endif
