/* opts.c - an option given twice (see sf/opts.h). */
#include "sf/opts.h"

#include <stddef.h>

const char *sf_opt_repeated(const struct option *opts, int c, uint64_t *seen)
{
    for (unsigned i = 0; opts[i].name && i < 64; i++) {
        if (opts[i].val != c || opts[i].has_arg != required_argument)
            continue;
        uint64_t bit = UINT64_C(1) << i;
        if (*seen & bit)
            return opts[i].name;
        *seen |= bit;
        break;
    }
    return NULL;
}
