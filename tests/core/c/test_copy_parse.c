/* SPDX-License-Identifier: MIT */
/*
 * test_copy_parse.c: the words of a template's copy request
 * (sbx_copy_parse, src/copy_request.c), linked alone and fed hostile words
 * in a request filled as sbx_copy_receive fills one: unknown options and
 * empty words, each option without its value at the end, required options
 * missing, bad numbers (negative, overflowing, past 65535, with trailing
 * junk, empty), --code without ':' or with an empty or relative path,
 * lists at and past their arrays, duplicated options, and thousands of
 * mutations of the well-formed request from a fixed seed, each of which
 * must parse within every bound or be refused.  Under AddressSanitizer a
 * read past the request's words is caught (copy_words.h).  The messages
 * themselves: test_copy_request.c.  TAP on stdout (tap.h).
 */
#define _GNU_SOURCE
#include "copy_words.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MUTATIONS 5000

/* parse: w as a request carrying n_fds fds, parsed into *opt; sbx_copy_parse's result. */
static int parse(const struct words *w, size_t n_fds, struct sbx_copy_options *opt)
{
    load(message, join(w), n_fds);
    return sbx_copy_parse(request, opt);
}

/* refused: whether the well-formed request with option name set to value is refused. */
static int refused(const char *name, const char *value)
{
    struct sbx_copy_options opt;
    struct words w = well_formed();
    set(&w, name, value);
    return parse(&w, WELL_FORMED_FDS, &opt) == -1;
}

/* The options of a request, each of which takes a value. */
static const char *const OPTIONS[] = {"--fds",     "--keep",           "--id",
                                      "--rlimit",  "--landlock-write", "--code",
                                      "--workdir", "--seccomp-fd"};

/* test_words: unknown options, empty words, values missing, required options missing. */
static void test_words(void)
{
    static const char *const unknown[] = {"--bogus", "--FDS", "-fds", "--fds=0", "", "fds"};
    static const char *const required[] = {"--fds", "--workdir", "--seccomp-fd"};
    struct sbx_copy_options opt;
    struct words w;
    size_t i;
    for (i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        w = well_formed();
        add(&w, unknown[i], "0");
        check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "an option \"%s\" is refused", unknown[i]);
    }
    for (i = 0; i < sizeof OPTIONS / sizeof *OPTIONS; i++) {
        w = well_formed();
        w.n = find(&w, "--");
        w.word[w.n++] = OPTIONS[i];
        check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "%s without its value at the end is refused",
              OPTIONS[i]);
    }
    for (i = 0; i < sizeof required / sizeof *required; i++) {
        w = well_formed();
        drop(&w, required[i]);
        check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "a request without %s is refused",
              required[i]);
    }
    w = well_formed();
    w.n = find(&w, "--") + 1;
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "a request with no init word is refused");
    w.n--;
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "a request without \"--\" is refused");
    w = well_formed();
    drop(&w, "--id");
    check(parse(&w, WELL_FORMED_FDS, &opt) == (getuid() == 0 ? -1 : 0),
          "without --id a request is refused to a template of uid 0 only");
}

/* Values each option must refuse in the well-formed request. */
static const struct {
    const char *name, *value;
} BAD_VALUES[] = {
    {"--seccomp-fd", "-1"},
    {"--seccomp-fd", "65536"},
    {"--seccomp-fd", "99999999999999999999"},
    {"--seccomp-fd", "4x"},
    {"--seccomp-fd", "4 "},
    {"--seccomp-fd", "0x4"},
    {"--seccomp-fd", ""},
    {"--seccomp-fd", "4,5"},
    {"--fds", "0,1,2,4,-5"},
    {"--fds", "0,1,2,4,65536"},
    {"--fds", "0,1,2,4,99999999999999999999"},
    {"--fds", "0,1,,2,4"},
    {"--fds", ",0,1,2,4"},
    {"--fds", "0;1;2;4;5"},
    {"--keep", "0,1,x"},
    {"--keep", "-1"},
    {"--keep", ","},
    {"--id", "-1:0"},
    {"--id", "0:-1"},
    {"--id", "4294967295:0"},
    {"--id", "0:4294967295"},
    {"--id", "99999999999999999999:0"},
    {"--id", "1000"},
    {"--id", "1000:"},
    {"--id", ":1000"},
    {"--id", "1000:1000x"},
    {"--id", "1:2:3"},
    {"--id", ""},
    {"--rlimit", "7:1"},
    {"--rlimit", "7:1:"},
    {"--rlimit", "7:1:2x"},
    {"--rlimit", "7:1:2:3"},
    {"--rlimit", ""},
    {"--rlimit", "-1:0:0"},
    {"--rlimit", "4294967296:0:0"},
    {"--code", "7"},
    {"--code", "7:"},
    {"--code", "7:tmp/w/code.py"},
    {"--code", ":/tmp/w/code.py"},
    {"--code", "-1:/tmp/w/code.py"},
    {"--code", "65536:/tmp/w/code.py"},
    {"--code", "7x:/tmp/w/code.py"},
    {"--code", "7:/tmp/w"},
    {"--code", "7:/x"},
    {"--workdir", "tmp/w"},
    {"--workdir", ""},
    {"--cache", "tmp/c"},
    {"--cache", ""},
};

/* test_values: bad numbers and paths refused, the largest good ones taken. */
static void test_values(void)
{
    char beyond[32];
    struct sbx_copy_options opt;
    struct words w = well_formed();
    size_t i;
    for (i = 0; i < sizeof BAD_VALUES / sizeof *BAD_VALUES; i++)
        check(refused(BAD_VALUES[i].name, BAD_VALUES[i].value), "%s \"%s\" is refused",
              BAD_VALUES[i].name, BAD_VALUES[i].value);
    snprintf(beyond, sizeof beyond, "%d:0:0", RLIM_NLIMITS);
    check(refused("--rlimit", beyond), "--rlimit of resource RLIM_NLIMITS is refused");
    set(&w, "--seccomp-fd", "65535");
    set(&w, "--id", "4294967294:4294967294");
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.seccomp_fd == 65535 &&
              opt.uid == 4294967294u && opt.gid == 4294967294u,
          "fd 65535 and id 4294967294 are taken");
}

/* repeat: w with count more copies of option name and value before "--". */
static void repeat(struct words *w, const char *name, const char *value, size_t count)
{
    while (count-- > 0)
        add(w, name, value);
}

/* test_bounds: each list at its array's size, one past it refused. */
static void test_bounds(void)
{
    static char list[6 * (SBX_COPY_MAX_FDS + 1)];
    struct sbx_copy_options opt;
    struct words w = well_formed();
    set(&w, "--keep", numbers(list, 0, SBX_COPY_MAX_FDS));
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.n_keep == SBX_COPY_MAX_FDS,
          "--keep of SBX_COPY_MAX_FDS fds is taken");
    add(&w, "--keep", list);
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.n_keep == SBX_COPY_MAX_FDS,
          "a second --keep replaces the first: the fds never add up past the array");
    set(&w, "--keep", numbers(list, 0, SBX_COPY_MAX_FDS + 1));
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "--keep of SBX_COPY_MAX_FDS + 1 fds is refused");
    w = well_formed();
    set(&w, "--fds", numbers(list, 0, SBX_COPY_MAX_FDS + 1));
    check(parse(&w, SBX_COPY_MAX_FDS, &opt) == -1, "--fds of SBX_COPY_MAX_FDS + 1 fds is refused");
    w = well_formed();
    repeat(&w, "--rlimit", "1:2:3", MAX_RLIMITS - 2);
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.n_rlimits == MAX_RLIMITS,
          "MAX_RLIMITS --rlimit words are taken");
    repeat(&w, "--rlimit", "1:2:3", 1);
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "one more is refused");
    w = well_formed();
    repeat(&w, "--landlock-write", "/tmp", MAX_LANDLOCK - 2);
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.n_landlock == MAX_LANDLOCK,
          "MAX_LANDLOCK --landlock-write words are taken");
    repeat(&w, "--landlock-write", "/tmp", 1);
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "one more is refused");
    w = well_formed();
    while (w.n < find(&w, "--") + 1 + MAX_INIT_ARGS)
        w.word[w.n++] = "x";
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.n_init == MAX_INIT_ARGS &&
              opt.init_argv[MAX_INIT_ARGS] == NULL,
          "MAX_INIT_ARGS init words are taken, NULL after them");
    w.word[w.n++] = "x";
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "one more is refused");
}

/* test_duplicates: an option given twice holds its last value, still checked. */
static void test_duplicates(void)
{
    struct sbx_copy_options opt;
    struct words w = well_formed();
    add(&w, "--id", "5:6");
    add(&w, "--workdir", "/tmp/v");
    add(&w, "--seccomp-fd", "3");
    add(&w, "--code", "9:/tmp/v/code.py");
    add(&w, "--fds", "0,1,2,4,6");
    check(parse(&w, WELL_FORMED_FDS, &opt) == 0 && opt.uid == 5 && opt.gid == 6 &&
              strcmp(opt.workdir, "/tmp/v") == 0 && opt.seccomp_fd == 3 && opt.code_fd == 9 &&
              strcmp(opt.code_path, "/tmp/v/code.py") == 0 && opt.targets[4] == 6,
          "a repeated --id, --workdir, --seccomp-fd, --code and --fds: the last holds");
    add(&w, "--fds", "0,1");
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "a last --fds whose count is wrong is refused");
    w = well_formed();
    add(&w, "--workdir", "relative");
    check(parse(&w, WELL_FORMED_FDS, &opt) == -1, "a bad repeated --workdir is refused");
}

/* next_random: xorshift32 from a fixed seed: the same mutations every run. */
static uint32_t next_random(void)
{
    static uint32_t state = 0x9e3779b9u;
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    return state;
}

/* The bytes a mutation favours: separators, and what numbers and paths are made of. */
static const char INTERESTING[] = {'\0', ':', ',', '-', '/', '9', '0', '+', ' ', 'x'};

/*
 * mutate: one random edit of the length bytes at buf (room for
 * SBX_COPY_MAX_REQUEST): a byte changed, bytes removed, a byte inserted,
 * the end cut, or a span copied elsewhere.  Returns the new length.
 */
static size_t mutate(char *buf, size_t length)
{
    uint32_t r = next_random();
    size_t at = length > 0 ? next_random() % length : 0, n = 1 + (r >> 9) % 32;
    char byte = (r & 0x100) ? (char)(r >> 24) : INTERESTING[(r >> 16) % sizeof INTERESTING];
    char span[32];
    if (length == 0 || length == SBX_COPY_MAX_REQUEST)
        return length == 0 ? (buf[0] = byte, 1) : length - 1;
    switch (r % 5) {
    case 0:
        buf[at] = byte;
        return length;
    case 1:
        n = n % 8 < length - at ? n % 8 + 1 : length - at;
        memmove(buf + at, buf + at + n, length - at - n);
        return length - n;
    case 2:
        memmove(buf + at + 1, buf + at, length - at);
        buf[at] = byte;
        return length + 1;
    case 3:
        return at;
    default:
        r = next_random() % length;
        if (n > length - r)
            n = length - r;
        if (n > SBX_COPY_MAX_REQUEST - length)
            return length;
        memcpy(span, buf + r, n);
        memmove(buf + at + n, buf + at, length - at);
        memcpy(buf + at, span, n);
        return length + n;
    }
}

/* fds_in_range: whether each of fds[0..n) is a number parse_fd_list takes. */
static int fds_in_range(const int *fds, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (fds[i] < 0 || fds[i] > 65535)
            return 0;
    }
    return 1;
}

/*
 * sane: whether options sbx_copy_parse took from request keep every bound:
 * counts within their arrays, the fds counted and in range, the required
 * options there, every string inside the request's words.
 */
static int sane(const struct sbx_copy_options *opt)
{
    size_t i;
    int ok = opt->n_targets == request->n_fds - 1 && opt->n_targets <= SBX_COPY_MAX_FDS &&
             opt->n_keep <= SBX_COPY_MAX_FDS && opt->n_rlimits <= MAX_RLIMITS &&
             opt->n_landlock <= MAX_LANDLOCK && opt->n_init >= 1 && opt->n_init <= MAX_INIT_ARGS &&
             opt->init_argv[opt->n_init] == NULL && fds_in_range(opt->targets, opt->n_targets) &&
             fds_in_range(opt->keep, opt->n_keep) && fds_in_range(&opt->seccomp_fd, 1) &&
             (opt->has_id || getuid() != 0) && within(opt->workdir) && opt->workdir[0] == '/';
    if (opt->code_path != NULL)
        ok = ok && within(opt->code_path) && opt->code_path[0] == '/' &&
             strlen(opt->code_path) > strlen(opt->workdir) && fds_in_range(&opt->code_fd, 1);
    for (i = 0; ok && i < opt->n_landlock; i++)
        ok = within(opt->landlock[i]);
    for (i = 0; ok && i < opt->n_init; i++)
        ok = within(opt->init_argv[i]);
    for (i = 0; ok && i < opt->n_rlimits; i++)
        ok = opt->rlimits[i].resource >= 0 && opt->rlimits[i].resource < RLIM_NLIMITS;
    return ok;
}

/* test_mutations: MUTATIONS requests of one to four edits each, parsed or refused. */
static void test_mutations(void)
{
    static char buf[SBX_COPY_MAX_REQUEST];
    struct sbx_copy_options opt;
    struct words w = well_formed();
    size_t base = join(&w), length, edits, n_fds;
    int round, parsed = 0, wrong = 0, rc;
    for (round = 0; round < MUTATIONS; round++) {
        memcpy(buf, message, base);
        length = base;
        for (edits = 1 + next_random() % 4; edits > 0; edits--)
            length = mutate(buf, length);
        n_fds = next_random() % 4 ? WELL_FORMED_FDS : 1 + next_random() % SBX_COPY_MAX_FDS;
        load(buf, length, n_fds);
        rc = sbx_copy_parse(request, &opt);
        parsed += rc == 0;
        if (rc == 0 ? !sane(&opt) : rc != -1) {
            wrong++;
            printf("# round %d parsed as %d outside its bounds\n", round, rc);
        }
    }
    check(wrong == 0 && parsed > 0,
          "%d mutations of the well-formed request: %d parsed within every bound, the rest "
          "refused",
          MUTATIONS, parsed);
}

int main(void)
{
    request = calloc(1, sizeof *request);
    if (request == NULL)
        abort();
    test_words();
    test_values();
    test_bounds();
    test_duplicates();
    test_mutations();
    unfence();
    free(request);
    return done();
}
