/* An option given twice (sf/opts.h): named by its long name, however it
 * was spelt; options without a value, and unknown ones, not counted. */
#include "sf/opts.h"
#include "runner.h"

#include <string.h>

static const struct option opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"jobs", required_argument, NULL, 'j'},
    {"level", optional_argument, NULL, 'L'},
    {"out", required_argument, NULL, 'o'}, /* a second name of -o: the first is reported */
    {0, 0, 0, 0}};

TEST(opt_repeated_names_the_second_use)
{
    uint64_t seen = 0;
    ASSERT(sf_opt_repeated(opts, 'o', &seen) == NULL);
    ASSERT(sf_opt_repeated(opts, 'j', &seen) == NULL);
    const char *name = sf_opt_repeated(opts, 'o', &seen);
    ASSERT(name != NULL && strcmp(name, "output") == 0);
    name = sf_opt_repeated(opts, 'j', &seen);
    ASSERT(name != NULL && strcmp(name, "jobs") == 0);
}

TEST(opt_repeated_counts_only_options_with_a_value)
{
    uint64_t seen = 0;
    for (int i = 0; i < 3; i++) {
        ASSERT(sf_opt_repeated(opts, 'q', &seen) == NULL); /* a flag */
        ASSERT(sf_opt_repeated(opts, 'L', &seen) == NULL); /* an optional value */
        ASSERT(sf_opt_repeated(opts, '?', &seen) == NULL); /* getopt's unknown */
    }
    ASSERT_EQ(seen, 0);
    ASSERT(sf_opt_repeated(opts, 'j', &seen) == NULL);
    ASSERT_EQ(seen, UINT64_C(1) << 2);
}

TEST(opt_ambiguous_names_every_option_an_abbreviation_fits)
{
    char names[64];
    ASSERT_EQ(sf_opt_ambiguous(opts, "--ou", names, sizeof names), 2);
    ASSERT_STR_EQ(names, "--output, --out");
    ASSERT_EQ(sf_opt_ambiguous(opts, "--o=x.lmdb", names, sizeof names), 2); /* a value */
    ASSERT_EQ(sf_opt_ambiguous(opts, "--q", names, sizeof names), 1);        /* one: not */
    ASSERT_EQ(sf_opt_ambiguous(opts, "--x", names, sizeof names), 0);
    ASSERT_EQ(sf_opt_ambiguous(opts, "--", names, sizeof names), 0);
    ASSERT_EQ(sf_opt_ambiguous(opts, "-o", names, sizeof names), 0); /* a short option */
    char small[12];                                                  /* cut to fit */
    ASSERT_EQ(sf_opt_ambiguous(opts, "--o", small, sizeof small), 2);
    ASSERT_STR_EQ(small, "--output, -");
}
