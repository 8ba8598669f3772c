/*
 * progress.c - the progress bar and the summary table (progress.h).
 */
#include "progress.h"

#include "msg.h"
#include "site.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* Characters of the bar itself at most: fits an 80-column terminal with
 * the label; narrower terminals get a shorter bar, down to BAR_MIN. */
#define BAR_WIDTH 40
#define BAR_MIN   10
/* The rest of the line: "%-12s [" before the bar, "] 100%" after it. */
#define BAR_FRAME (12 + 2 + 6)

/* A terminal that cannot move the cursor or clear a line (TERM=dumb, as
 * in Emacs' shell, or no TERM at all) would show every redraw as text. */
static int terminal_draws(void)
{
    const char *term = getenv("TERM");
    return term && *term && strcmp(term, "dumb") != 0;
}

double pk_monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void pk_progress_init(pk_progress *p, int quiet)
{
    memset(p, 0, sizeof *p);
    p->enabled = !quiet;
    p->lines = !(isatty(STDERR_FILENO) && terminal_draws());
    p->last_line = pk_monotonic_seconds();
}

/* The bar's width for the terminal's current width (it may be resized
 * during a build), leaving the last column free: a line that fills it
 * wraps on some terminals, and \r then returns to the wrong line. 0: the
 * terminal is too narrow for a bar. */
static unsigned bar_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0)
        return BAR_WIDTH; /* unknown: assume 80 columns */
    if (ws.ws_col < BAR_FRAME + BAR_MIN + 1)
        return 0;
    unsigned w = ws.ws_col - BAR_FRAME - 1u;
    return w < BAR_WIDTH ? w : BAR_WIDTH;
}

void pk_progress_phase(pk_progress *p, const char *phase)
{
    p->phase = phase;
}

void pk_progress_tick(void *arg, uint64_t done, uint64_t total)
{
    pk_progress *p = arg;
    if (!p->enabled || total == 0)
        return;
    unsigned pct = (unsigned)(done * 100 / total);
    if (p->lines) {
        double now = pk_monotonic_seconds();
        if (now - p->last_line >= PK_PROGRESS_LINE_S) {
            /* a reader of the log that went away ends the lines, not the build
             * (which would leave its temporary file) */
            struct sigaction ign = {.sa_handler = SIG_IGN}, old;
            sigaction(SIGPIPE, &ign, &old);
            fprintf(stderr, "servd-pack: %s: %u%%\n", p->phase ? p->phase : "working", pct);
            if (fflush(stderr) != 0 || ferror(stderr)) {
                clearerr(stderr);
                p->enabled = 0;
            }
            sigaction(SIGPIPE, &old, NULL);
            p->last_line = now;
        }
        return;
    }
    unsigned width = bar_width();
    if (width == 0) {
        pk_progress_clear(p);
        return;
    }
    unsigned fill = (unsigned)(done * width / total);
    char bar[BAR_WIDTH + 1];
    for (unsigned i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\r\033[K%-12s [%s] %3u%%", p->phase ? p->phase : "", bar, pct);
    fflush(stderr);
    p->drawn = 1;
}

void pk_progress_clear(pk_progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = 0;
    }
}

void pk_human_bytes(uint64_t n, char *out, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(out, cap, "%.1f %s", v, unit[u]);
}

void pk_summary_print(FILE *out, const pk_stats *s, const char *output)
{
    char h1[32], h2[32];
    pk_human_bytes(s->pack_file_bytes, h1, sizeof h1);
    fputs("servd-pack: wrote ", out);
    pk_esc_fputs(output, out);
    fprintf(out, ": %llu paths, %llu bodies, %s, in %.2f s\n", (unsigned long long)s->paths,
            (unsigned long long)s->bodies, h1, s->seconds);
    fprintf(out, "  %-9s %7s %14s %10s %7s\n", "encoding", "files", "bytes", "", "ratio");
    for (int e = 0; e < SF_ENC_COUNT; e++) {
        pk_human_bytes(s->enc_bytes[e], h2, sizeof h2);
        double ratio =
            s->enc_identity[e] ? 100.0 * (double)s->enc_bytes[e] / (double)s->enc_identity[e] : 0.0;
        fprintf(out, "  %-9s %7llu %14llu %10s %6.1f%%\n", sf_encoding_name(e),
                (unsigned long long)s->enc_files[e], (unsigned long long)s->enc_bytes[e], h2,
                ratio);
    }
    pk_human_bytes(s->stored_bytes, h2, sizeof h2);
    fprintf(out, "  stored (distinct bodies): %llu bytes (%s)\n",
            (unsigned long long)s->stored_bytes, h2);
    char names[512]; /* pk_names_list: three names fit */
    pk_names_list(names, sizeof names, s->dot_names, s->ndot_names, s->skipped_dot);
    fprintf(out, "  skipped: %llu dotfiles", (unsigned long long)s->skipped_dot);
    if (names[0]) {
        fputs(" (", out);
        pk_esc_fputs(names, out);
        fputc(')', out);
    }
    fprintf(out,
            ", %llu excluded; compression reused from --base: %llu files, from an identical "
            "file: %llu\n",
            (unsigned long long)s->skipped_excluded, (unsigned long long)s->reused,
            (unsigned long long)s->twins);
    if (s->decoded)
        fprintf(out,
                "  stored as what they contain (an encoded rule, .svgz): %llu files; the identity "
                "row counts their decompressed bytes\n",
                (unsigned long long)s->decoded);
    if (s->memory_waits || s->comp_threads < s->threads) {
        pk_human_bytes(s->memory, h2, sizeof h2);
        fprintf(out,
                "  memory: compressed on %u of %u threads, %llu reads and compressions waited "
                "for room in the %s of --memory\n",
                s->comp_threads, s->threads, (unsigned long long)s->memory_waits, h2);
    }
    if (s->nsidecar_names) {
        fputs("  precompressed copies packed at their own URLs (servd-pack makes the variants "
              "itself; exclude the copies with a rule if nothing links to them): ",
              out);
        pk_names_list(names, sizeof names, s->sidecar_names, s->nsidecar_names, s->sidecars);
        pk_esc_fputs(names, out);
        fputc('\n', out);
    }
}
