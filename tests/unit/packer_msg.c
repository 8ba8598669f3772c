/* Messages name outside strings (file names, rule values) escaped, so that
 * a name can neither forge a line, nor drive the terminal, nor reorder the
 * message (msg.h). */
#include "msg.h"
#include "runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *escaped(const char *s)
{
    static char buf[512];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    if (!f)
        abort();
    pk_esc_fputs(s, f);
    fputc('\0', f);
    fclose(f);
    return buf;
}

TEST(msg_escapes_controls_and_bytes_that_are_not_utf8)
{
    ASSERT_STR_EQ(escaped("plain/name.txt"), "plain/name.txt");
    ASSERT_STR_EQ(escaped("a\nb\r\x1b[31m\x7f"), "a\\x0ab\\x0d\\x1b[31m\\x7f");
    /* well-formed UTF-8 as it is */
    ASSERT_STR_EQ(escaped("caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"),
                  "caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80");
    /* stray, overlong, surrogate and cut-off sequences: byte by byte */
    ASSERT_STR_EQ(escaped("bad\xff\xfe"), "bad\\xff\\xfe");
    ASSERT_STR_EQ(escaped("\xc0\xaf"), "\\xc0\\xaf");
    ASSERT_STR_EQ(escaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");
    ASSERT_STR_EQ(escaped("end\xe2\x82"), "end\\xe2\\x82");
    /* C1 and bidirectional controls as code points */
    ASSERT_STR_EQ(escaped("a\xc2\x9b"
                          "b"),
                  "a\\u009bb");
    ASSERT_STR_EQ(escaped("invoice\xe2\x80\xaetxt.exe"), "invoice\\u202etxt.exe");
    ASSERT_STR_EQ(escaped("\xe2\x81\xa6x\xe2\x81\xa9"), "\\u2066x\\u2069");
    ASSERT_STR_EQ(escaped("\xd8\x9c|\xe2\x80\xa8|\xe2\x80\xa9"), "\\u061c|\\u2028|\\u2029");
}

/* A message longer than the escaper's buffer comes out whole, and no
 * character is split where one piece ends. */
TEST(msg_escapes_long_text_whole)
{
    char in[2000] = "", want[4000] = "", got[4000];
    for (int i = 0; i < 300; i++) {
        strcat(in, i % 2 ? "\n\xc3\xa9z" : "ab\xe2\x80\xae");
        strcat(want, i % 2 ? "\\x0a\xc3\xa9z" : "ab\\u202e");
    }
    FILE *f = fmemopen(got, sizeof got, "w");
    ASSERT(f != NULL);
    pk_esc_fputs(in, f);
    fputc('\0', f);
    fclose(f);
    ASSERT_STR_EQ(got, want);
}

/* A line made beforehand for a signal handler (guard.c, write.c) is the
 * line pk_err prints: escaped, one newline, cut to fit. */
TEST(msg_format_line_is_an_escaped_line_cut_to_fit)
{
    char line[64];
    pk_format_line(line, sizeof line, "%s: cut", "a\nb\xff.lmdb");
    ASSERT_STR_EQ(line, "servd-pack: a\\x0ab\\xff.lmdb: cut\n");
    char small[24];
    pk_format_line(small, sizeof small, "%s", "0123456789abcdefghij");
    ASSERT_STR_EQ(small, "servd-pack: 0123456789\n");
    char tiny[8] = "x";
    pk_format_line(tiny, sizeof tiny, "%s", "name");
    ASSERT_STR_EQ(tiny, "");
}
