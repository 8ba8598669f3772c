/*
 * log.h - the access log: combined log format plus the chosen content
 * coding and the time to answer, written without ever blocking a worker.
 *
 * Each worker formats lines into its own buffer. A full buffer (or, once a
 * second, a partly filled one) is handed to the log thread, which does the
 * write(2)s. Hand-over is a pointer move under a mutex the log thread never
 * holds across I/O. If the log thread has not given a buffer back when the
 * worker needs one (the disk cannot keep up), the worker drops lines and
 * counts them (servd_access_log_dropped_total) instead of waiting.
 *
 * Line format (one per response):
 *   HOST - - [TIME] "METHOD TARGET HTTP/1.x" STATUS BYTES "REFERER" "UA" ENCODING MICROS
 * BYTES is the body bytes the kernel took ("-" for none), ENCODING the
 * content coding of the body or "-", MICROS the microseconds from the arrival
 * of the request's first byte until the kernel took the response's last byte
 * (lines are written then: conn_log.c). Quotes, backslashes, control
 * and non-ASCII bytes inside quoted fields are written as \xhh (\x22,
 * \x5c, ...).
 */
#ifndef SV_LOG_H
#define SV_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "metrics.h"
#include "sf/store.h"

/* Bytes of one worker buffer: ~250 lines; handed over when full or every
 * second. */
#define SV_LOG_BUF (64 * 1024)
/* Buffers per worker: one being filled, the rest in flight to the disk.
 * With 4 the writer may fall 3 buffers (~750 lines) behind before lines
 * are dropped. */
#define SV_LOG_BUFS 4
/* Longest line written: longer fields are cut (the line stays one line). */
#define SV_LOG_LINE_MAX 4096
/* The most bytes each client-given field takes in a line (escaped, "..."
 * included); with the fixed fields (under 200 bytes) they fit in
 * SV_LOG_LINE_MAX, so no line is ever cut. */
#define SV_LOG_METHOD_MAX  64
#define SV_LOG_TARGET_MAX  1536
#define SV_LOG_HEADER_MAX  768
#define SV_LOG_VERSION_MAX 8 /* the parser's "HTTP/d.d" */

typedef struct sv_log sv_log;

/* Opens (creates, appends to) path and starts the log thread.
 * @return 0, or -1 with a sentence naming the file in err. */
int sv_log_open(const char *path, int nworkers, sv_metrics *metrics, sv_log **out, char *err,
                size_t errlen);

/* Asks the log thread to reopen the file (SIGUSR1, after log rotation).
 * Any thread. */
void sv_log_reopen(sv_log *log);

/* How long a stopping servd waits for the log thread to write what it holds:
 * a write blocked on a full pipe or a hung disk must not keep it running. */
#define SV_LOG_CLOSE_MS 2000

/* Writes everything handed over, stops the log thread, closes the file.
 * Call after every worker has stopped. @return 0, or -1 when the thread
 * did not finish within timeout_ms: then it is left running, and log and
 * the metrics it counts into must not be freed before the process exits. */
int sv_log_close(sv_log *log, int timeout_ms);

/* One response, as the worker knows it. Views may be empty. */
typedef struct sv_log_entry {
    const struct sockaddr *peer; /* NULL: "-" */
    const char *time;            /* "[..]" of the current second */
    size_t time_len;
    sf_view method, target;
    sf_view version; /* empty: no request line read whole ("-") */
    int status;
    uint64_t body_bytes;
    sf_view referer, user_agent;
    int encoding; /* enum sf_encoding or -1 */
    uint64_t micros;
} sv_log_entry;

/* Formats e as one line of the access log into buf (SV_LOG_LINE_MAX bytes):
 * the combined format with the encoding and the microseconds after it, the
 * client's fields escaped and cut to their budgets, and the newline.
 * @return its length. */
size_t sv_log_format(const sv_log_entry *e, char *buf);

/* Appends one line to worker's buffer (worker thread). */
void sv_log_write(sv_log *log, int worker, const sv_log_entry *e);

/* Hands worker's partly filled buffer to the log thread (worker thread,
 * at every sweep, so lines reach the file promptly). */
void sv_log_flush(sv_log *log, int worker);

/* Formats the access-log time "[30/Nov/2026:14:55:01 +0000]" for Unix
 * second t into buf (at least 32 bytes). @return its length. */
size_t sv_log_time(int64_t t, char *buf, size_t cap);

#endif
