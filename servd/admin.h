/*
 * admin.h - the admin endpoint (admin.c): /metrics and /healthz on a
 * socket of their own, served from a thread of their own.
 */
#ifndef SV_ADMIN_H
#define SV_ADMIN_H

#include <stdatomic.h>
#include <stddef.h>

#include "server.h" /* sv_metrics */

typedef struct sv_admin sv_admin;

/* Serves /metrics and /healthz on the listening socket fd from a thread of
 * its own. stopping makes /healthz answer 503 during a graceful stop.
 * @return 0, or -1 with a sentence in err. */
int sv_admin_start(int fd, const char *addr_text, sv_metrics *m, atomic_int *stopping,
                   sv_admin **out, char *err, size_t errlen);

/* Stops the admin thread and closes its socket. */
void sv_admin_stop(sv_admin *a);

#endif
