/* reference_matchers.h — the data-driven table of references that are never followed
 * (weak referents, finalizer links) and of known library leaks (Android framework bugs),
 * and the lookups the index and path finder use. Internal to libleakcore. */
#ifndef LW_REFERENCE_MATCHERS_H
#define LW_REFERENCE_MATCHERS_H

#include "heap_index.h"

typedef enum {
    LW_PATTERN_INSTANCE_FIELD,
    LW_PATTERN_STATIC_FIELD,
    LW_PATTERN_NATIVE_GLOBAL,
    LW_PATTERN_JAVA_LOCAL,
} lw__pattern_kind;

typedef struct lw__pattern {
    lw__pattern_kind kind;
    const char *class_name;   /* declaring class; for JAVA_LOCAL unused */
    const char *name;         /* field name; thread name for JAVA_LOCAL; NULL for NATIVE_GLOBAL */
    int ignored;              /* 1: never followed; 0: a library leak, followed at low priority */
    int android_only;         /* applies to Android dumps only */
    int min_sdk, max_sdk;     /* Android API levels it applies to, inclusive; 0 = no bound */
    const char *description;
} lw__pattern;

extern const lw__pattern lw__patterns[];
extern const size_t lw__pattern_count;

/* LW_MATCH_NORMAL, LW_MATCH_IGNORED or LW_MATCH_LIBRARY (with *pattern set) for instance
 * field `field` read from an instance of class `class_index`: the nearest class in the
 * hierarchy that has a pattern for that field name decides. */
int lw__match_instance_field(const lw_heap *heap, uint32_t class_index, const char *field, uint16_t *pattern);
int lw__match_static_field(const lw_heap *heap, uint32_t class_index, const char *field, uint16_t *pattern);
int lw__match_native_global(const lw_heap *heap, uint32_t class_index, uint16_t *pattern);
int lw__match_java_local(const lw_heap *heap, const char *thread_name, uint16_t *pattern);

/* "instance field android.app.Activity$1#this$0" (LeakCanary's pattern text) into buf. */
void lw__pattern_text(uint16_t pattern, char *buf, size_t cap);

#endif
