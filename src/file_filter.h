/* SPDX-License-Identifier: MIT */
/*
 * file_filter.h: which of the working directory's files the init returns
 * (file_filter.c), shared by init.c, init_files.c and the C unit tests.
 * Plain C; part of the init, not of the extension module.
 */
#ifndef PYSANDBOX_FILE_FILTER_H
#define PYSANDBOX_FILE_FILTER_H

#define SBX_FILTER_MAX 64           /* patterns of each kind, as the host checks */
#define SBX_FILTER_PATTERN_MAX 4096 /* bytes of one pattern: 1024 characters of UTF-8 */

/*
 * The include and exclude patterns of a call (pysandbox/_model/file_patterns.py):
 * fnmatch(3) patterns with flags 0, matched against a path relative to the
 * working directory and against each of its parent directories.  Zeroed, it
 * lets every file through.  `broken`: the patterns could not be known (a
 * malformed payload, no memory), so no file is wanted (fail closed).
 * `owned`: the patterns point into memory of the filter's own
 * (sbx_filter_read_payload), which sbx_filter_free releases.
 */
struct sbx_file_filter {
    const char *include[SBX_FILTER_MAX];
    const char *exclude[SBX_FILTER_MAX];
    unsigned n_include;
    unsigned n_exclude;
    int broken;
    int owned;
};

int sbx_filter_add(struct sbx_file_filter *filter, int exclude, const char *pattern);
int sbx_filter_read_payload(struct sbx_file_filter *filter, int fd);
int sbx_filter_wants_file(const struct sbx_file_filter *filter, const char *path);
int sbx_filter_enters_dir(const struct sbx_file_filter *filter, const char *path);
void sbx_filter_free(struct sbx_file_filter *filter);

#endif
