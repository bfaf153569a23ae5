/* heap_objects.h — reading one object of an indexed heap: its record, fields by name, and
 * java.lang.String contents. Everything read is bounds-checked against the record. */
#ifndef LW_HEAP_OBJECTS_H
#define LW_HEAP_OBJECTS_H

#include "heap_index.h"

typedef struct lw__object {
    uint8_t tag;              /* LW_SUB_INSTANCE_DUMP, _OBJECT_ARRAY_DUMP, _PRIMITIVE_ARRAY_*, _CLASS_DUMP */
    uint64_t id;
    uint32_t class_index;     /* instance: its class; object array: the array class; class: itself; LW_NONE unknown */
    const uint8_t *data;      /* instance field bytes, array elements */
    uint64_t data_len;        /* bytes at data */
    uint32_t count;           /* array length */
    uint8_t elem_type;        /* primitive arrays */
} lw__object;

/* Reads the object at dense index `dense`, or the sub-record at file offset `offset`
 * (which the index has already measured). */
void lw__heap_object(const lw_heap *heap, uint32_t dense, lw__object *o);
void lw__heap_object_at(const lw_heap *heap, uint64_t offset, lw__object *o);

/* The class name users see for an object: instance class, array class ("int[]",
 * "java.lang.Object[]"), or the class itself for a class object. */
const char *lw__object_class_name(const lw_heap *heap, const lw__object *o);
lw_object_kind lw__object_kind(const lw__object *o);

/* Shallow size as LeakCanary counts it. */
uint64_t lw__object_shallow_size(const lw_heap *heap, const lw__object *o);

/* Finds instance field `name` (nearest declaring class first; `declaring` may name the
 * class that must declare it, or be NULL). Returns 1 and the value when found and inside
 * the record, else 0. */
int lw__instance_field(const lw_heap *heap, const lw__object *o, const char *declaring, const char *name, uint8_t *type,
                       uint64_t *value);

/* A static field of class `c` by name. Returns 1 when found. */
int lw__class_static(const lw_heap *heap, uint32_t c, const char *name, uint8_t *type, uint64_t *value);

/* The contents of java.lang.String `id` as UTF-8 (at most `max` bytes of text), malloc'd;
 * NULL when `id` is not a readable String (or out of memory). */
char *lw__read_java_string(const lw_heap *heap, uint64_t id, size_t max);

/* The java.lang.String held by reference field `field` of instance `o`, as UTF-8 (see
 * lw__read_java_string); NULL when there is no such field or no readable String. */
char *lw__string_field(const lw_heap *heap, const lw__object *o, const char *field, size_t max);

/* The dense index of the value array of String `id`, or LW_NONE. */
uint32_t lw__java_string_value_array(const lw_heap *heap, uint64_t id);

#endif
