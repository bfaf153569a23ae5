/* reference_matchers.c — references never followed, and known library leaks. The table is
 * data: add a row to teach the analyzer a new framework bug (docs/analyzer.md). */
#include "reference_matchers.h"

#include <stdio.h>

#define IGNORED_FIELD(c, f) {LW_PATTERN_INSTANCE_FIELD, c, f, 1, 0, 0, 0, NULL}
#define LIB_FIELD(c, f, lo, hi, d) {LW_PATTERN_INSTANCE_FIELD, c, f, 0, 1, lo, hi, d}
#define LIB_STATIC(c, f, lo, hi, d) {LW_PATTERN_STATIC_FIELD, c, f, 0, 1, lo, hi, d}
#define LIB_NATIVE(c, d) {LW_PATTERN_NATIVE_GLOBAL, c, NULL, 0, 1, 0, 0, d}

const lw__pattern lw__patterns[] = {
    /* Weak, soft and phantom referents and finalizer links never keep anything alive. */
    IGNORED_FIELD("java.lang.ref.Reference", "referent"),
    IGNORED_FIELD("java.lang.ref.WeakReference", "referent"),
    IGNORED_FIELD("java.lang.ref.SoftReference", "referent"),
    IGNORED_FIELD("java.lang.ref.PhantomReference", "referent"),
    IGNORED_FIELD("leakcanary.KeyedWeakReference", "referent"),
    IGNORED_FIELD("com.squareup.leakcanary.KeyedWeakReference", "referent"),
    IGNORED_FIELD("io.leakwatch.KeyedWeakReference", "referent"),
    IGNORED_FIELD("java.lang.ref.Finalizer", "prev"),
    IGNORED_FIELD("java.lang.ref.Finalizer", "element"),
    IGNORED_FIELD("java.lang.ref.Finalizer", "next"),
    IGNORED_FIELD("java.lang.ref.FinalizerReference", "prev"),
    IGNORED_FIELD("java.lang.ref.FinalizerReference", "element"),
    IGNORED_FIELD("java.lang.ref.FinalizerReference", "next"),
    IGNORED_FIELD("sun.misc.Cleaner", "prev"),
    IGNORED_FIELD("sun.misc.Cleaner", "next"),
    IGNORED_FIELD("jdk.internal.ref.Cleaner", "prev"),
    IGNORED_FIELD("jdk.internal.ref.Cleaner", "next"),
    /* Android threads whose locals are transient (LeakCanary's defaults). */
    {LW_PATTERN_JAVA_LOCAL, NULL, "FinalizerWatchdogDaemon", 1, 1, 0, 0, NULL},
    {LW_PATTERN_JAVA_LOCAL, NULL, "main", 1, 1, 0, 0, NULL},
    {LW_PATTERN_JAVA_LOCAL, NULL, "LeakCanary-Heap-Dump", 1, 1, 0, 0, NULL},
    IGNORED_FIELD("android.view.Choreographer$FrameDisplayEventReceiver", "mMessageQueue"),
    /* Known Android framework leaks (LeakCanary's AndroidReferenceMatchers). */
    LIB_FIELD("android.app.Activity$1", "this$0", 29, 29,
              "Android Q added a new IRequestFinishCallback$Stub class that the system keeps alive after the "
              "Activity is destroyed."),
    LIB_FIELD("android.app.ActivityThread", "mNewActivities", 19, 0,
              "ActivityThread keeps destroyed activities in mNewActivities until the main thread is idle."),
    LIB_FIELD("android.os.Message", "obj", 0, 30,
              "An idle HandlerThread keeps its last Message in a local variable; a Message can also hold a "
              "Dialog's listener after the Dialog is dismissed."),
    LIB_FIELD("android.view.inputmethod.InputMethodManager", "mNextServedView", 15, 35,
              "InputMethodManager keeps a reference to the last focused view."),
    LIB_FIELD("android.view.inputmethod.InputMethodManager", "mServedView", 15, 28,
              "InputMethodManager keeps a reference to the last served view."),
    LIB_FIELD("android.view.inputmethod.InputMethodManager", "mServedInputConnection", 15, 27,
              "InputMethodManager keeps the last input connection."),
    LIB_FIELD("android.view.inputmethod.InputMethodManager", "mCurRootView", 15, 28,
              "InputMethodManager keeps the root view of the last focused window."),
    LIB_FIELD("android.view.inputmethod.InputMethodManager", "mImeInsetsConsumer", 30, 0,
              "InputMethodManager's insets consumer keeps the last focused window."),
    LIB_STATIC("android.text.TextLine", "sCached", 0, 22,
               "TextLine.sCached is a pool of recycled TextLines that keep spans, and so views, alive."),
    LIB_STATIC("android.media.session.MediaSessionLegacyHelper", "sInstance", 21, 21,
               "MediaSessionLegacyHelper is a singleton that keeps the first Context it was given."),
    LIB_FIELD("android.widget.Editor$SpanController", "this$0", 0, 19,
              "Editor spans survive a saved state and keep the TextView."),
    LIB_FIELD("android.widget.Editor$EasyEditSpanController", "this$0", 0, 19,
              "Editor spans survive a saved state and keep the TextView."),
    LIB_FIELD("android.animation.LayoutTransition$1", "val$parent", 14, 22,
              "LayoutTransition leaks its parent ViewGroup through a listener."),
    LIB_FIELD("android.view.textservice.SpellCheckerSession$1", "this$0", 16, 24,
              "SpellCheckerSession's listener is kept by a native binder."),
    LIB_FIELD("android.net.ConnectivityManager", "sInstance", 0, 23,
              "ConnectivityManager keeps the first Context it was created with."),
    LIB_FIELD("android.os.UserManager", "mContext", 18, 25,
              "UserManager keeps the first Context it was created with."),
    LIB_FIELD("android.view.ViewGroup$ViewLocationHolder", "mRoot", 28, 28,
              "ViewLocationHolder is not cleared in clear() on Android P."),
    LIB_FIELD("android.view.accessibility.AccessibilityNodeIdManager", "mIdsToViews", 28, 29,
              "AccessibilityNodeIdManager keeps views until the next accessibility event."),
    LIB_FIELD("android.hardware.input.InputManager", "mLateInitContext", 33, 33,
              "InputManager keeps the first Context it was initialised with on Android 13."),
    LIB_FIELD("android.permission.PermissionControllerManager", "mContext", 29, 0,
              "PermissionControllerManager keeps the Context it was created with."),
    LIB_NATIVE("android.widget.Toast$TN",
               "Toast.TN is held by a native binder reference until the system is done with it."),
    LIB_NATIVE("android.accounts.AccountManager$AmsTask$Response",
               "AccountManager's binder response is held natively after the task completes."),
    LIB_NATIVE("android.view.inputmethod.InputMethodManager$ControlledInputConnectionWrapper",
               "InputMethodManager's input connection wrapper is held natively."),
};

const size_t lw__pattern_count = sizeof lw__patterns / sizeof lw__patterns[0];

static int applies(const lw_heap *heap, const lw__pattern *p) {
    if (p->android_only && !heap->android) return 0;
    if (heap->sdk_int >= 0) {
        if (p->min_sdk && heap->sdk_int < p->min_sdk) return 0;
        if (p->max_sdk && heap->sdk_int > p->max_sdk) return 0;
    }
    return 1;
}

static int result(const lw__pattern *p, size_t i, uint16_t *pattern) {
    if (p->ignored) return LW_MATCH_IGNORED;
    if (pattern) *pattern = (uint16_t)i;
    return LW_MATCH_LIBRARY;
}

int lw__match_instance_field(const lw_heap *heap, uint32_t class_index, const char *field, uint16_t *pattern) {
    /* Most fields match no pattern by name: answer those without walking the hierarchy. */
    int any = 0;
    for (size_t i = 0; i < lw__pattern_count && !any; i++)
        any = lw__patterns[i].kind == LW_PATTERN_INSTANCE_FIELD && strcmp(lw__patterns[i].name, field) == 0;
    if (!any) return LW_MATCH_NORMAL;
    unsigned guard = 0;
    for (uint32_t k = class_index; k != LW_NONE && guard < 256; k = heap->classes[k].super_index, guard++) {
        const char *cn = heap->classes[k].name;
        for (size_t i = 0; i < lw__pattern_count; i++) {
            const lw__pattern *p = &lw__patterns[i];
            if (p->kind == LW_PATTERN_INSTANCE_FIELD && strcmp(p->name, field) == 0 && strcmp(p->class_name, cn) == 0 &&
                applies(heap, p))
                return result(p, i, pattern);
        }
    }
    return LW_MATCH_NORMAL;
}

int lw__match_static_field(const lw_heap *heap, uint32_t class_index, const char *field, uint16_t *pattern) {
    const char *cn = heap->classes[class_index].name;
    for (size_t i = 0; i < lw__pattern_count; i++) {
        const lw__pattern *p = &lw__patterns[i];
        if (p->kind == LW_PATTERN_STATIC_FIELD && strcmp(p->name, field) == 0 && strcmp(p->class_name, cn) == 0 &&
            applies(heap, p))
            return result(p, i, pattern);
    }
    return LW_MATCH_NORMAL;
}

int lw__match_native_global(const lw_heap *heap, uint32_t class_index, uint16_t *pattern) {
    if (class_index == LW_NONE) return LW_MATCH_NORMAL;
    const char *cn = heap->classes[class_index].name;
    for (size_t i = 0; i < lw__pattern_count; i++) {
        const lw__pattern *p = &lw__patterns[i];
        if (p->kind == LW_PATTERN_NATIVE_GLOBAL && strcmp(p->class_name, cn) == 0 && applies(heap, p))
            return result(p, i, pattern);
    }
    return LW_MATCH_NORMAL;
}

int lw__match_java_local(const lw_heap *heap, const char *thread_name, uint16_t *pattern) {
    if (!thread_name) return LW_MATCH_NORMAL;
    for (size_t i = 0; i < lw__pattern_count; i++) {
        const lw__pattern *p = &lw__patterns[i];
        if (p->kind == LW_PATTERN_JAVA_LOCAL && strcmp(p->name, thread_name) == 0 && applies(heap, p))
            return result(p, i, pattern);
    }
    return LW_MATCH_NORMAL;
}

void lw__pattern_text(uint16_t pattern, char *buf, size_t cap) {
    const lw__pattern *p = &lw__patterns[pattern < lw__pattern_count ? pattern : 0];
    switch (p->kind) {
    case LW_PATTERN_INSTANCE_FIELD: snprintf(buf, cap, "instance field %s#%s", p->class_name, p->name); break;
    case LW_PATTERN_STATIC_FIELD: snprintf(buf, cap, "static field %s#%s", p->class_name, p->name); break;
    case LW_PATTERN_NATIVE_GLOBAL: snprintf(buf, cap, "native global variable referencing %s", p->class_name); break;
    case LW_PATTERN_JAVA_LOCAL: snprintf(buf, cap, "local variable on thread %s", p->name); break;
    }
}
