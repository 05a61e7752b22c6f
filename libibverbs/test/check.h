/*
 * check.h: the one check of the test programs that real applications' calls are judged
 * by (fatal_check, and librdmacm/test's cm_check, ep_check and cm_gone_check): each
 * CHECK prints "ok   " or "FAIL " and its description on one line, at once (a program
 * killed or hung mid-run has shown what it found), and counts failures; main exits
 * with failures != 0.
 */
#ifndef ROCELAB_TEST_CHECK_H
#define ROCELAB_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                                               \
	do {                                                                                                           \
		int ok_ = (cond);                                                                                      \
		failures += !ok_;                                                                                      \
		printf("%s ", ok_ ? "ok  " : "FAIL");                                                                  \
		printf(__VA_ARGS__);                                                                                   \
		printf("\n");                                                                                          \
		fflush(stdout);                                                                                        \
	} while (0)

#endif
