/* Helpers shared by the segment tests (test_segment, test_segment_list). */
#ifndef TERMSIGHT_SEGMENT_TEST_H
#define TERMSIGHT_SEGMENT_TEST_H

#include "model_test.h"

/* "/termsight-<pid>-" and 16 lowercase hex digits. */
static inline void check_name(const char *name, pid_t pid)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "/termsight-%d-", (int)pid);
    size_t pl = strlen(prefix);
    ck_assert_msg(!strncmp(name, prefix, pl) && strlen(name) == pl + 16 &&
                      strspn(name + pl, "0123456789abcdef") == 16,
                  "name %s", name);
}

#endif
