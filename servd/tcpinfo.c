/* tcpinfo.c - TCP_INFO fields glibc does not declare (see tcpinfo.h). */
#include "tcpinfo.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

uint64_t sv_tcp_bytes_acked(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked)
        return 0; /* a kernel older than 4.1 */
    return ti.tcpi_bytes_acked;
}

int sv_tcp_reset(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    /* TCP_CLOSE, 7 in the kernel's states (<netinet/tcp.h>, which cannot
     * be included with <linux/tcp.h>) */
    return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == 7;
}
