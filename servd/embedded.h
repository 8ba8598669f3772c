/*
 * embedded.h - the built-in sample site: www/ packed by servd-pack at build
 * time and linked into the servd binary (servd/embedded.cmake), served when
 * servd runs without --pack so that a fresh build shows a page at once.
 */
#ifndef SV_EMBEDDED_H
#define SV_EMBEDDED_H

#include <stddef.h>

#include "snapshot.h"

/* What servd reports as the pack path of the built-in site (log lines, the
 * path label of servd_pack_info). */
#define SV_EMBEDDED_NAME "(built-in sample site)"

/* The size of the built-in pack in bytes; 0 when this build has none (the
 * packer was not built). */
size_t sv_embedded_size(void);

/* Opens the built-in pack as a snapshot: its bytes are copied into an
 * anonymous memory file (memfd_create) that LMDB maps through
 * /proc/self/fd/N, and validated like any other pack.
 * @param[out] out  the snapshot with one reference (the caller's)
 * @return 0, or a negative SF_E* code with a sentence in err. */
int sv_embedded_open(int nreaders, sv_snapshot **out, char *err, size_t errlen);

#endif
