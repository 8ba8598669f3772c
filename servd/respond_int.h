/*
 * respond_int.h - what respond.c shares with partial.c and redirect.c: the
 * context of one sv_respond() call and the pieces a plan is built from.
 * Internal to the responder (http.h is its interface).
 */
#ifndef SV_RESPOND_INT_H
#define SV_RESPOND_INT_H

#include "http.h"

#include "sf/store.h"

#define SV__VARY_LINE "Vary: Accept-Encoding\r\n"

/* Appends p[0, n). SV_PLAN_IOV holds the longest plan (a multipart 206 of
 * SV_MAX_RANGES parts); a piece past it would leave a body shorter than
 * its Content-Length, so it marks the plan, which sv_respond's caller then
 * replaces with a 500 (conn.c: a check there costs the request path less
 * than one here). */
static inline void sv__add(sv_plan *plan, const void *p, size_t n)
{
    if (n == 0)
        return;
    if (plan->iovcnt >= SV_PLAN_IOV) {
        plan->overflow = 1;
        return;
    }
    plan->iov[plan->iovcnt].iov_base = (void *)p;
    plan->iov[plan->iovcnt].iov_len = n;
    plan->iovcnt++;
}

/* The per-request context of sv_respond(). */
typedef struct sv__resp {
    const sv_request *req;
    sf_reader *rd;
    sv_scratch *scratch;
    sv_plan *plan;
    const char *date; /* the Date line (+ Connection) + blank line */
    size_t date_len;
    int head;      /* HEAD: no body */
    int64_t now;   /* the time the Date line gives */
    int64_t lm;    /* the entry's Last-Modified, never later than now */
    int lm_future; /* the stored Last-Modified is later than now */
    const sv_site *site;
} sv__resp;

/* Empties the plan for a new response; close: the connection ends after it. */
static inline void sv__plan_reset(sv_plan *plan, int close)
{
    plan->status = 0;
    plan->encoding = -1;
    plan->close = close;
    plan->body_bytes = 0;
    plan->iovcnt = 0;
    plan->overflow = 0;
}

/* Sets up c for answering req (sv_respond, and fuzz_entry's 404 page): the
 * plan and scratch emptied, the connection closed after it when the client
 * asked or its body is too long to drain, and the Date line that says so
 * (close, HTTP/1.0's keep-alive or HTTP/1.1's persistence). */
static inline void sv__resp_begin(sv__resp *c, const sv_request *req, sf_reader *rd,
                                  const sv_site *site, const sv_date *date, sv_scratch *scratch,
                                  sv_plan *plan)
{
    int close = !req->keep_alive || req->body_len > SV_MAX_DRAIN;
    *c = (sv__resp){.req = req,
                    .rd = rd,
                    .scratch = scratch,
                    .plan = plan,
                    .date = close             ? date->close
                            : req->minor == 0 ? date->keep_alive
                                              : date->keep,
                    .date_len = close             ? date->close_len
                                : req->minor == 0 ? date->keep_alive_len
                                                  : date->keep_len,
                    .head = req->method == SV_M_HEAD,
                    .now = date->now,
                    .site = site};
    scratch->used = 0;
    sv__plan_reset(plan, close);
}

/* Adds a stored header block (respond.c: a Last-Modified ahead of the
 * clock becomes the Date's date). */
void sv__add_block(sv__resp *c, const char *p, size_t n);

/* Adds the Access-Control-* lines of a stored 200 block h; keep: iovecs the
 * caller still needs after them. @return 0, or -1 when there is no room. */
int sv__add_cors(sv__resp *c, sf_view h, int keep);

/* Plans the text error of status. @return 0. */
int sv__fail(sv__resp *c, int status);

/* Appends formatted text to the scratch buffer. @return its start, or
 * NULL when it does not fit (nothing is appended then). */
__attribute__((format(printf, 3, 4))) char *sv__sfmt(sv_scratch *s, size_t *len, const char *fmt,
                                                     ...);

/* Serves a file entry: 200, or with is404 404 for the site's 404 page;
 * bodies: its variants' bodies from the path cache, or NULL to look the
 * selected one up. c as sv_respond sets it up (fuzz_entry calls it too). */
int sv__serve(sv__resp *c, const sf_entry *e, int is404, const sf_view *bodies);

/* partial.c: 416, one range (206), several (multipart 206; @return 1 when
 * they cannot be sent so, and the caller sends 200). */
int sv__send_416(sv__resp *c, const sf_variant *v, int vary);
int sv__send_206(sv__resp *c, const sf_variant *v, sf_view body, const sv_range *r);
int sv__send_multipart(sv__resp *c, const sf_entry *e, const sf_variant *v, sf_view body,
                       const sv_range *r, int nr);

/* redirect.c: a 301 to key (+ "/" when add_slash) keeping the query, cached
 * like page (may be NULL); a redirect entry stored in the pack. */
int sv__redirect(sv__resp *c, const char *key, size_t klen, int add_slash, const sf_entry *page);
int sv__stored_redirect(sv__resp *c, const sf_entry *e);

#endif
