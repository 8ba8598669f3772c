/*
 * say.h - servd's messages: one line each on standard error, with the
 * priority journald reads when standard error is the journal.
 *
 * Under systemd, standard error is a stream into the journal, which takes a
 * line starting "<N>" as a line of syslog priority N (sd-daemon(3)): with
 * it, `journalctl -u servd -p warning` shows a refused pack and hides the
 * swaps. servd writes the prefix only when standard error is the journal's
 * stream (the JOURNAL_STREAM variable names its device and inode,
 * systemd.exec(5)); on a terminal or in a file the lines are as before.
 */
#ifndef SV_SAY_H
#define SV_SAY_H

/* syslog priorities (sd-daemon(3) SD_ERR ...) */
enum sv_prio {
    SV_ERR = 3,     /* servd cannot do what it was asked: refused pack, failed start */
    SV_WARNING = 4, /* it goes on, but something needs a look */
    SV_NOTICE = 5,  /* a normal event that changes what is served: a swap, a stop */
    SV_INFO = 6,    /* the rest: listening, stopped */
};

/* Longest message in bytes; a longer one is cut (and still ends its line). */
#define SV_SAY_MAX 2048

/* Decides once whether standard error is the journal (before threads). */
void sv_say_init(void);

/* Whether it is (after sv_say_init): a line then starts with "<N>". */
int sv_say_journal(void);

/* Writes "servd: " and the formatted message as one line in one write(2):
 * safe from any thread, and lines of two threads never interleave. The
 * message is escaped as sf_escape() does (a newline in a file name is
 * "\x0a"): it names files and addresses from outside, and must stay one
 * line that cannot drive a terminal. */
__attribute__((format(printf, 2, 3))) void sv_say(int prio, const char *fmt, ...);

/* sv_say, then line2 as a second line of the same write: servd's own text,
 * not escaped ("Try 'servd --help'."). */
__attribute__((format(printf, 3, 4))) void sv_say_then(int prio, const char *line2, const char *fmt,
                                                       ...);

#endif
