/*
 * conn_write.c - the write path of one connection (conn.c answers, then
 * writes its batch here).
 *
 * Writing: the batch goes out directly on the socket: runs of iovecs with one
 * sendmsg (writev), and a body of at least SV_SENDFILE_MIN bytes, when it is
 * the batch's only one, with sendfile() from the pack's file at the body's
 * offset in the map, so the kernel takes page references instead of copying
 * the body (the header before it is sent with MSG_MORE and leaves in the
 * same segments). A batch of several such bodies (pipelined requests) is
 * written from the map with one writev. What the
 * socket did not take is queued with uv_write; before that, every byte the
 * rest points to inside the worker struct (Date line, scratch) is copied
 * into the write request, because those change before the write completes.
 * The queued write also takes a reference on the pack snapshot, dropped in
 * on_write: bytes in the map stay mapped until they are written. A batch
 * the socket took whole needs neither copy nor reference.
 */
#include "conn.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "tcpinfo.h"

#define STREAM(c) ((uv_stream_t *)&(c)->tcp)

/* write_now hands uv_buf_t arrays to sendmsg as struct iovec: libuv lays
 * them out alike on Unix (its own writev relies on it). */
_Static_assert(sizeof(uv_buf_t) == sizeof(struct iovec) &&
                   offsetof(uv_buf_t, base) == offsetof(struct iovec, iov_base) &&
                   offsetof(uv_buf_t, len) == offsetof(struct iovec, iov_len),
               "uv_buf_t is not laid out as struct iovec");

/* Bodies at least this long are sent with sendfile() from the pack file
 * rather than copied by writev from the map. Measured on loopback with
 * bodies of 4 to 128 KiB (bench/RESULTS.md): from 8 KiB up sendfile costs
 * servd no more CPU per response than the copy, within the noise (at 4 KiB
 * 5% more), and the client less, so the client, the bottleneck of a
 * keep-alive benchmark, serves 11% (8 KiB) to 49% (48 KiB) more responses:
 * its reads come from shared page-cache pages rather than from bytes
 * servd's core has just written. Below it, writev. */
#define SV_SENDFILE_MIN 8192

/* A queued write: the libuv request, the snapshot its bytes may point into,
 * and copies of the bytes that lived in the worker struct. */
typedef struct sv_wreq {
    uv_write_t req;
    sv_snapshot *snap;
    size_t bytes;
    size_t heap; /* this request, its copies and libuv's iovec array */
    char data[];
} sv_wreq;

static void on_write(uv_write_t *req, int status);

static int in_worker(const sv_worker *w, const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)w;
    return a >= lo && a < lo + sizeof *w;
}

/* Queues the part of the batch iov[0, n) after the first done bytes. */
static int queue_rest(sv_conn *c, unsigned n, size_t done, size_t rest)
{
    sv_worker *w = c->w;
    uv_buf_t *iov = w->iov;
    unsigned i = 0;
    while (done >= iov[i].len) { /* zero-length iovecs never enter a batch */
        done -= iov[i].len;
        i++;
    }
    iov[i].base += done;
    iov[i].len -= done;
    size_t copy = 0;
    for (unsigned j = i; j < n; j++)
        if (in_worker(w, iov[j].base))
            copy += iov[j].len;
    sv_wreq *wr = malloc(sizeof *wr + copy);
    if (!wr) {
        sv__count(&w->ctr->errors[SV_ERR_NOMEM], 1);
        return -1;
    }
    char *p = wr->data;
    for (unsigned j = i; j < n; j++) {
        if (in_worker(w, iov[j].base)) {
            memcpy(p, iov[j].base, iov[j].len);
            iov[j].base = p;
            p += iov[j].len;
        }
    }
    wr->snap = w->snap;
    wr->bytes = rest;
    /* libuv copies an iovec array longer than its 4 inline ones */
    wr->heap = sizeof *wr + copy + (n - i > 4 ? (n - i) * sizeof(uv_buf_t) : 0);
    sv_snapshot_ref(wr->snap);
    if (sv__conn_queued(c) == 0)
        c->t_progress = uv_now(&w->loop);
    if (uv_write(&wr->req, STREAM(c), iov + i, n - i, on_write) != 0) {
        sv_snapshot_unref(wr->snap);
        free(wr);
        sv__count(&w->ctr->errors[SV_ERR_WRITE], 1);
        return -1;
    }
    c->wr_queued += rest;
    c->wr_heap += wr->heap;
    return 0;
}

/* The pack file of the snapshot the batch was built from, for sendfile. */
typedef struct packfile {
    int fd;
    uintptr_t map, size;
} packfile;

/* Does b lie in the pack's map and deserve sendfile? */
static int file_piece(sv_worker *w, packfile *pf, const uv_buf_t *b)
{
    if (b->len < SV_SENDFILE_MIN)
        return 0;
    if (pf->fd == -2) { /* not looked up yet: once per batch that has a large piece */
        const char *map;
        pf->fd = -1;
        if (sf_pack_file(w->snap->pack, &pf->fd, &map) == 0) {
            pf->map = (uintptr_t)map;
            pf->size = (uintptr_t)sf_pack_size(w->snap->pack);
        }
    }
    uintptr_t a = (uintptr_t)b->base;
    return pf->fd >= 0 && a >= pf->map && a - pf->map <= pf->size &&
           b->len <= pf->size - (a - pf->map);
}

/* The index of the batch's one file piece, or n when it has none or
 * several. A batch of one response sends its body with sendfile; a batch
 * of several (pipelined requests) goes out whole with one writev from the
 * map, which on the AMD hosts of bench/RESULTS.md costs servd half the CPU
 * of a sendfile and a sendmsg per response and lets the client take 2x the
 * responses. */
static unsigned lone_file_piece(sv_worker *w, packfile *pf, const uv_buf_t *iov, unsigned n)
{
    unsigned at = n;
    for (unsigned i = 0; i < n; i++) {
        if (!file_piece(w, pf, &iov[i]))
            continue;
        if (at != n)
            return n;
        at = i;
    }
    return at;
}

/* Writes iov[0, n) straight to the socket until it takes no more: runs of
 * small pieces with one sendmsg each (MSG_MORE when a file piece follows,
 * so that a header and its body share segments), and the file piece of a
 * batch that has only one with sendfile. @return the bytes written (fewer
 * than all when the socket is full, or broken after taking some: the queued
 * write of the rest reports that, and the bytes out are counted), or a
 * negative errno when the connection is broken and took nothing. */
static ssize_t write_now(sv_conn *c, uv_buf_t *iov, unsigned n)
{
    sv_worker *w = c->w;
    packfile pf = {-2, 0, 0};
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return -EBADF;
    unsigned file = lone_file_piece(w, &pf, iov, n);
    size_t done = 0;
    unsigned i = 0;
    while (i < n) {
        unsigned j = i;
        size_t run = 0;
        while (j < n && j != file)
            run += iov[j++].len;
        ssize_t r;
        if (j > i) {
            /* uv_buf_t is struct iovec's layout (asserted above) */
            struct msghdr mh = {.msg_iov = (struct iovec *)(iov + i), .msg_iovlen = j - i};
            do
                r = sendmsg(fd, &mh, MSG_NOSIGNAL | (j < n ? MSG_MORE : 0));
            while (r < 0 && errno == EINTR);
            if (r < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK || done ? (ssize_t)done : -errno;
            done += (size_t)r;
            if ((size_t)r < run)
                return (ssize_t)done;
        }
        if (j < n) {
            off_t off = (off_t)((uintptr_t)iov[j].base - pf.map);
            do
                r = sendfile(fd, pf.fd, &off, iov[j].len);
            while (r < 0 && errno == EINTR);
            if (r < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK || done ? (ssize_t)done : -errno;
            done += (size_t)r;
            if ((size_t)r < iov[j].len)
                return (ssize_t)done;
            j++;
        }
        i = j;
    }
    return (ssize_t)done;
}

/* Writes the batch: directly if the socket takes it, else queued. Then, on
 * a connection that is closing, shuts the write side down after it. */
void sv__conn_flush(sv_conn *c)
{
    sv_worker *w = c->w;
    unsigned n = w->niov;
    size_t total = w->batch_bytes;
    w->niov = 0;
    w->nscratch = 0;
    w->batch_bytes = 0;
    w->batch_copied = 0;
    if (c->state == SV_CS_CLOSED)
        goto out;
    if (n) {
        size_t done = 0;
        if (sv__conn_queued(c) == 0) {
            ssize_t r = write_now(c, w->iov, n);
            if (r < 0) {
                sv__count(&w->ctr->errors[SV_ERR_WRITE], 1);
                sv__conn_close(c);
                goto out;
            }
            done = (size_t)r;
        }
        if (done) {
            sv__count(&w->ctr->bytes_sent, done);
            c->t_active = uv_now(&w->loop);
            c->in_kernel = 1;
        }
        if (done < total && queue_rest(c, n, done, total - done) != 0) {
            c->produced += done; /* what went out, for the log */
            sv__conn_close(c);
            goto out;
        }
        c->produced += total;
    }
    if (c->state == SV_CS_CLOSING)
        sv__conn_start_shutdown(c);
out:
    if (w->nlog)
        sv__log_settle(c);
}

static void on_write(uv_write_t *req, int status)
{
    sv_wreq *wr = (sv_wreq *)req;
    sv_conn *c = (sv_conn *)req->handle;
    size_t bytes = wr->bytes;
    c->wr_heap -= wr->heap;
    sv_snapshot_unref(wr->snap); /* the last byte into its map is written */
    free(wr);
    if (c->state == SV_CS_CLOSED)
        return;
    sv_worker *w = c->w;
    uint64_t counted = c->produced - c->wr_queued; /* before this write's bytes */
    c->wr_queued -= bytes;
    if (status < 0) {
        /* libuv has already dropped the unwritten rest of this write from
         * write_queue_size, so it does not say how much of the write went
         * out. The client's acknowledgements do: what it acknowledged
         * beyond the bytes counted so far came from this write (the part
         * the kernel still held unacknowledged when the reset came is not
         * counted). conn_close then counts nothing of the writes queued
         * after this one, which are all still there. */
        uv_os_fd_t fd;
        uint64_t acked = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? sv_tcp_bytes_acked(fd) : 0;
        uint64_t out = acked > counted ? (acked - counted < bytes ? acked - counted : bytes) : 0;
        sv__count(&w->ctr->bytes_sent, out);
        c->unsent = bytes - out; /* for the log lines closed now */
        sv__count(&w->ctr->errors[SV_ERR_WRITE], 1);
        sv__conn_close(c);
        return;
    }
    sv__count(&w->ctr->bytes_sent, bytes);
    c->t_active = c->t_progress = uv_now(&w->loop);
    c->in_kernel = 1;
    if (c->logq)
        sv__log_sent(c);
    if (c->state == SV_CS_OPEN && c->paused && sv__conn_queued(c) == 0)
        sv__conn_resume(c);
}
