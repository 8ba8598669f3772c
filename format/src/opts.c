/* opts.c - an option given twice, an ambiguous one (see sf/opts.h). */
#include "sf/opts.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

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

int sf_opt_ambiguous(const struct option *opts, const char *arg, char *names, size_t cap)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    int matches = 0;
    if (cap)
        names[0] = '\0';
    if (strncmp(arg, "--", 2) != 0 || n <= 2)
        return 0;
    for (const struct option *o = opts; o->name; o++) {
        if (strncmp(o->name, arg + 2, n - 2) != 0)
            continue;
        size_t used = cap ? strlen(names) : 0;
        if (used < cap)
            snprintf(names + used, cap - used, "%s--%s", matches ? ", " : "", o->name);
        matches++;
    }
    return matches;
}
