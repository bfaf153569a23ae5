/* key_table.c — open addressing with linear probing over key ids, grown by doubling at half
 * full. A slot is its key id (0: empty) followed by the caller's record. */
#include "key_table.h"

#include <stdlib.h>
#include <string.h>

struct ld_key_table {
    unsigned char *slots;
    size_t slot_size, cap, used; /* cap: a power of two */
};

#define FIRST_CAP 64

static int64_t *id_at(const ld_key_table *t, size_t i) { return (int64_t *)(void *)(t->slots + i * t->slot_size); }

/* The slot of key_id, or the empty slot where it would go. Ends: at most half the slots are used. */
static size_t slot_of(const ld_key_table *t, int64_t key_id) {
    size_t i = (size_t)((uint64_t)key_id * 0x9E3779B97F4A7C15ull >> 20) & (t->cap - 1);
    while (*id_at(t, i) && *id_at(t, i) != key_id) i = (i + 1) & (t->cap - 1);
    return i;
}

ld_key_table *ld_key_table_new(size_t record_size) {
    ld_key_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    /* records after the id keep its 8-byte alignment */
    t->slot_size = sizeof(int64_t) + (record_size + 7) / 8 * 8;
    t->cap = FIRST_CAP;
    t->slots = calloc(t->cap, t->slot_size);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

void ld_key_table_free(ld_key_table *t) {
    if (!t) return;
    free(t->slots);
    free(t);
}

static int grow(ld_key_table *t) {
    if (t->cap > SIZE_MAX / 2 / t->slot_size) return -1;
    ld_key_table old = *t;
    t->slots = calloc(old.cap * 2, old.slot_size);
    if (!t->slots) {
        t->slots = old.slots;
        return -1;
    }
    t->cap = old.cap * 2;
    for (size_t i = 0; i < old.cap; i++)
        if (*id_at(&old, i)) memcpy(id_at(t, slot_of(t, *id_at(&old, i))), id_at(&old, i), old.slot_size);
    free(old.slots);
    return 0;
}

void *ld_key_table_find(ld_key_table *t, int64_t key_id) {
    if (key_id <= 0) return NULL;
    size_t i = slot_of(t, key_id);
    return *id_at(t, i) ? id_at(t, i) + 1 : NULL;
}

void *ld_key_table_get(ld_key_table *t, int64_t key_id) {
    if (key_id <= 0) return NULL;
    size_t i = slot_of(t, key_id);
    if (*id_at(t, i)) return id_at(t, i) + 1;
    /* half full: grow, or take up to the last slot but one (probing must meet an empty one) */
    if ((t->used + 1) * 2 > t->cap && grow(t) != 0 && t->used + 2 > t->cap) return NULL;
    i = slot_of(t, key_id);
    *id_at(t, i) = key_id;
    t->used++;
    return id_at(t, i) + 1;
}
