/*
 * ceiling.c - the benchmark ceiling (PERF.md): a trivial epoll server that
 * answers every request with one fixed, pre-built response. It parses
 * nothing beyond finding the blank line that ends each request and looks
 * nothing up, so no real server can beat it by much; servd is quoted as a
 * fraction of it.
 *
 *   ceiling PORT BODYFILE [CONTENT-ENCODING]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define READ_BUF   16384
#define MAX_EVENTS 256

static char *resp;
static size_t resp_len;

static int load(const char *path, const char *enc)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char head[512];
    int h = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %ld\r\n"
                     "%s%s%sDate: Mon, 30 Nov 2026 00:00:00 GMT\r\n\r\n",
                     n, enc ? "Content-Encoding: " : "", enc ? enc : "", enc ? "\r\n" : "");
    resp = malloc((size_t)h + (size_t)n);
    if (!resp)
        return -1;
    memcpy(resp, head, (size_t)h);
    if (fread(resp + h, 1, (size_t)n, f) != (size_t)n)
        return -1;
    fclose(f);
    resp_len = (size_t)h + (size_t)n;
    return 0;
}

/* Writes count responses; on a short write the rest is dropped (the ceiling
 * only ever has to keep up with a load generator on loopback). */
static void answer(int fd, int count)
{
    struct iovec iov[64];
    while (count > 0) {
        int n = count > 64 ? 64 : count;
        for (int i = 0; i < n; i++)
            iov[i] = (struct iovec){resp, resp_len};
        size_t want = resp_len * (size_t)n, done = 0;
        int first = 0;
        while (done < want) {
            ssize_t w = writev(fd, iov + first, n - first);
            if (w < 0) {
                if (errno == EAGAIN) {
                    /* a large body filled the socket: wait for room */
                    struct pollfd p = {.fd = fd, .events = POLLOUT};
                    poll(&p, 1, 1000);
                    continue;
                }
                return;
            }
            done += (size_t)w;
            while (first < n && (size_t)w >= iov[first].iov_len) {
                w -= (ssize_t)iov[first].iov_len;
                first++;
            }
            if (first < n) {
                iov[first].iov_base = (char *)iov[first].iov_base + w;
                iov[first].iov_len -= (size_t)w;
            }
        }
        count -= n;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || load(argv[2], argc > 3 ? argv[3] : NULL) != 0) {
        fprintf(stderr, "usage: ceiling PORT BODYFILE [CONTENT-ENCODING]\n");
        return 2;
    }
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(argv[1])),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 4096)) {
        perror("ceiling: bind/listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[MAX_EVENTS];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    static char buf[READ_BUF];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    ev = (struct epoll_event){.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
                }
                continue;
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                close(fd);
                continue;
            }
            int count = 0;
            for (ssize_t j = 3; j < r; j++)
                if (buf[j] == '\n' && buf[j - 1] == '\r' && buf[j - 2] == '\n' &&
                    buf[j - 3] == '\r')
                    count++;
            answer(fd, count);
        }
    }
}
