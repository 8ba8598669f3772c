/*
 * fuzz_accept - Accept-Encoding negotiation on arbitrary field values.
 * The input is split at '\n' into field lines (several lines form one
 * list). The chosen index must be -1 or a variant of the entry; a chosen
 * variant must be acceptable (weight > 0) and no other variant may weigh
 * more, or weigh the same with a smaller body; -1 only when every variant
 * weighs 0.
 */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINES 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sf_entry e;
    memset(&e, 0, sizeof e);
    e.kind = SF_KIND_FILE;
    e.flags = SF_ENTRY_NEGOTIABLE;
    e.nvariants = 4;
    static const uint64_t len[4] = {1000, 300, 250, 300};
    for (int i = 0; i < 4; i++) {
        e.variants[i].encoding = i;
        e.variants[i].body_len = len[i];
    }
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    sf_view lines[MAX_LINES];
    size_t n = 0, start = 0;
    for (size_t i = 0; i <= size && n < MAX_LINES; i++) {
        if (i == size || buf[i] == '\n') {
            lines[n].ptr = buf + start;
            lines[n].len = i - start;
            n++;
            start = i + 1;
        }
    }
    /* the first byte picks "absent" for a few inputs */
    if (size > 0 && data[0] == 0xff)
        n = 0;
    int pick = sv_negotiate_list(&e, lines, n);
    if (pick < -1 || pick >= (int)e.nvariants)
        abort();
    int w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = sv_accept_weight(lines, n, i);
        if (w[i] < 0 || w[i] > 1000)
            abort();
    }
    if (pick == -1) {
        for (int i = 0; i < 4; i++)
            if (w[i] > 0)
                abort();
    } else {
        if (w[pick] == 0)
            abort();
        for (int i = 0; i < 4; i++)
            if (w[i] > w[pick] || (w[i] == w[pick] && len[i] < len[pick]))
                abort();
    }
    if (n == 1 && sv_negotiate(&e, lines[0], 0) != pick)
        abort();
    free(buf);
    return 0;
}
