/*
 * sf/stdfds.h - process setup both programs share. It lives in the format
 * library because that is the one library both link.
 */
#ifndef SF_STDFDS_H
#define SF_STDFDS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Opens /dev/null read-only on any of descriptors 0-2 that is closed (a
 * program started as `prog <&- >&- 2>&-`): otherwise the next file opened
 * takes its number, and messages meant for stderr land in it. Writes to
 * such a stdout or stderr fail (EBADF), as they would have: a command
 * whose output is lost says so. Call it first in main.
 * @return 0, or -1 when /dev/null cannot be opened. */
int sf_std_fds_open(void);

#ifdef __cplusplus
}
#endif
#endif
