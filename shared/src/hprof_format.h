/* hprof_format.h — the tags and constants of the HPROF format (docs/hprof-format.md). */
#ifndef LW_HPROF_FORMAT_H
#define LW_HPROF_FORMAT_H

/* top-level record tags */
enum {
    LW_TAG_STRING = 0x01,
    LW_TAG_LOAD_CLASS = 0x02,
    LW_TAG_UNLOAD_CLASS = 0x03,
    LW_TAG_STACK_FRAME = 0x04,
    LW_TAG_STACK_TRACE = 0x05,
    LW_TAG_ALLOC_SITES = 0x06,
    LW_TAG_HEAP_SUMMARY = 0x07,
    LW_TAG_START_THREAD = 0x0A,
    LW_TAG_END_THREAD = 0x0B,
    LW_TAG_HEAP_DUMP = 0x0C,
    LW_TAG_CPU_SAMPLES = 0x0D,
    LW_TAG_CONTROL_SETTINGS = 0x0E,
    LW_TAG_HEAP_DUMP_SEGMENT = 0x1C,
    LW_TAG_HEAP_DUMP_END = 0x2C,
};

/* heap-dump sub-record tags */
enum {
    LW_SUB_ROOT_UNKNOWN = 0xFF,
    LW_SUB_ROOT_JNI_GLOBAL = 0x01,
    LW_SUB_ROOT_JNI_LOCAL = 0x02,
    LW_SUB_ROOT_JAVA_FRAME = 0x03,
    LW_SUB_ROOT_NATIVE_STACK = 0x04,
    LW_SUB_ROOT_STICKY_CLASS = 0x05,
    LW_SUB_ROOT_THREAD_BLOCK = 0x06,
    LW_SUB_ROOT_MONITOR_USED = 0x07,
    LW_SUB_ROOT_THREAD_OBJECT = 0x08,
    LW_SUB_ROOT_INTERNED_STRING = 0x89,
    LW_SUB_ROOT_FINALIZING = 0x8A,
    LW_SUB_ROOT_DEBUGGER = 0x8B,
    LW_SUB_ROOT_REFERENCE_CLEANUP = 0x8C,
    LW_SUB_ROOT_VM_INTERNAL = 0x8D,
    LW_SUB_ROOT_JNI_MONITOR = 0x8E,
    LW_SUB_ROOT_UNREACHABLE = 0x90,
    LW_SUB_CLASS_DUMP = 0x20,
    LW_SUB_INSTANCE_DUMP = 0x21,
    LW_SUB_OBJECT_ARRAY_DUMP = 0x22,
    LW_SUB_PRIMITIVE_ARRAY_DUMP = 0x23,
    LW_SUB_PRIMITIVE_ARRAY_NODATA = 0xC3,
    LW_SUB_HEAP_DUMP_INFO = 0xFE,
};

#define LW_HPROF_VERSION_JVM "JAVA PROFILE 1.0.2"
#define LW_HPROF_VERSION_ANDROID "JAVA PROFILE 1.0.3"



/* Bytes that follow the object id in a root sub-record of `tag`; -1 if `tag` is no root. */
static inline int lw__root_extra_bytes(unsigned tag, unsigned id_size) {
    switch (tag) {
    case LW_SUB_ROOT_UNKNOWN: case LW_SUB_ROOT_STICKY_CLASS: case LW_SUB_ROOT_MONITOR_USED:
    case LW_SUB_ROOT_INTERNED_STRING: case LW_SUB_ROOT_FINALIZING: case LW_SUB_ROOT_DEBUGGER:
    case LW_SUB_ROOT_REFERENCE_CLEANUP: case LW_SUB_ROOT_VM_INTERNAL: case LW_SUB_ROOT_UNREACHABLE:
        return 0;
    case LW_SUB_ROOT_JNI_GLOBAL: return (int)id_size;
    case LW_SUB_ROOT_NATIVE_STACK: case LW_SUB_ROOT_THREAD_BLOCK: return 4;
    case LW_SUB_ROOT_JNI_LOCAL: case LW_SUB_ROOT_JAVA_FRAME: case LW_SUB_ROOT_THREAD_OBJECT:
    case LW_SUB_ROOT_JNI_MONITOR: return 8;
    default: return -1;
    }
}
#endif
