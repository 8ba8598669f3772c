/*
 * tcpinfo.h - what the kernel's TCP_INFO says beyond glibc's struct
 * tcp_info (kept apart: <linux/tcp.h> and <netinet/tcp.h> cannot both be
 * included in one file).
 */
#ifndef SV_TCPINFO_H
#define SV_TCPINFO_H

#include <stdint.h>

/* The bytes of data the peer of TCP socket fd has acknowledged over the
 * connection's life (tcpi_bytes_acked, Linux 4.1 and later), which stays
 * readable after a reset. @return it, or 0 when the kernel does not say. */
uint64_t sv_tcp_bytes_acked(int fd);

/* 1 when TCP socket fd is closed in the kernel (a reset came: what it held
 * to send is dropped, although SIOCOUTQ still counts it), else 0. */
int sv_tcp_reset(int fd);

#endif
