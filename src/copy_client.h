/* SPDX-License-Identifier: MIT */
/*
 * copy_client.h: the modes of the copy client executable (pysandbox/_copy).
 */
#ifndef PYSANDBOX_COPY_CLIENT_H
#define PYSANDBOX_COPY_CLIENT_H

int sbx_template_main(int argc, char **argv);

#endif
