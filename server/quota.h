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

/* Gives back a report of `bytes` taken by ld_quota_take (an upload that stored nothing new:
 * the repeat of a stored report, or one the server failed). Counts never go below 0; a
 * window that has begun again since is left as it is. */
void ld_quota_give_back(ld_quota *q, int64_t key_id, uint64_t bytes);

/* Gives back `bytes` of a report taken, which keeps counting as a report: the part of its
 * Content-Length that an upload never sent (it was refused, cut short or dropped before its
 * body ended). The daily bytes count what was read, not what was declared. */
void ld_quota_give_back_bytes(ld_quota *q, int64_t key_id, uint64_t bytes);

#endif
