/* quota.h — per-key upload quotas (reports per minute, bytes per day), counted in memory by
 * each leakd instance: a fixed window per key, answered with 429 and Retry-After. */
#ifndef LD_QUOTA_H
#define LD_QUOTA_H

#include <stdint.h>

typedef struct ld_quota ld_quota;

ld_quota *ld_quota_new(int reports_per_min, uint64_t bytes_per_day);
void ld_quota_free(ld_quota *q);

/* Takes one report of `bytes` for key `key_id` now. Returns 0 when allowed, else the
 * seconds until it would be (for Retry-After). */
int ld_quota_take(ld_quota *q, int64_t key_id, uint64_t bytes);

#endif
