/* retained_size.c — a second traversal from each leaking object over what the first one
 * (from the roots, never through a leaking object) did not reach. */
#include "retained_size.h"

#include "heap_objects.h"

typedef struct {
    lw__paths *paths;
    uint32_t *stack;
    size_t size, cap;
    int failed;
} walk;

static void visit(void *user, uint32_t target, int low) {
    (void)low;
    walk *w = user;
    uint8_t *st = &w->paths->state[target];
    if (*st & (LW__VISITED | LW__CREDITED)) return;
    *st |= LW__CREDITED;
    if (w->size == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        uint32_t *n = lw__realloc(w->stack, cap * sizeof *n);
        if (!n) {
            w->failed = 1;
            return;
        }
        w->stack = n;
        w->cap = cap;
    }
    w->stack[w->size++] = target;
}

lw_status lw__retained_sizes(const lw_heap *heap, lw__paths *paths, uint64_t *bytes, uint64_t *objects, lw_error *err) {
    walk w = {paths, NULL, 0, 0, 0};
    lw_status st = LW_OK;
    for (size_t i = 0; i < paths->found_count; i++) {
        uint32_t leak = paths->found[i];
        lw__object o;
        lw__heap_object(heap, leak, &o);
        bytes[i] = lw__object_shallow_size(heap, &o);
        objects[i] = 1;
        w.size = 0;
        lw__for_each_ref(heap, paths, leak, visit, &w);
        while (w.size > 0 && !w.failed) {
            uint32_t x = w.stack[--w.size];
            lw__heap_object(heap, x, &o);
            bytes[i] += lw__object_shallow_size(heap, &o);
            objects[i]++;
            lw__for_each_ref(heap, paths, x, visit, &w);
        }
        if (w.failed) {
            st = lw__fail(err, LW_ERR_NOMEM, "out of memory computing retained sizes");
            break;
        }
    }
    lw__free(w.stack);
    return st;
}
