/*
 * sf/opts.h - command-line checks both programs share. It lives in the
 * format library because that is the one library both link.
 */
#ifndef SF_OPTS_H
#define SF_OPTS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Notes an option that takes one value and finds it given a second time,
 * which would otherwise silently win over the first (a pipeline that adds
 * its own -o or --workers would write elsewhere or run otherwise).
 * c: what getopt_long returned; opts: its table, at most 64 entries;
 * seen: a bit per entry, 0 before the first call. Options without a
 * required value (and values getopt_long does not know) are not counted;
 * one that may be repeated is not passed in.
 * @return the long name of a repeated option, NULL the first time. */
const char *sf_opt_repeated(const struct option *opts, int c, uint64_t *seen);

/* Whether arg ("--w", "--real-ip=X", as getopt_long found it unknown) is
 * an abbreviation of several of opts' long options, which getopt_long
 * refuses as it does an unknown one. @return how many it abbreviates (0 or
 * 1: not ambiguous), with their names in names[cap], "--a, --b" (cut to
 * fit). */
int sf_opt_ambiguous(const struct option *opts, const char *arg, char *names, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
