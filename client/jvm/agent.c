/* agent.c — libleakwatch_jvm.so, the JVM runtime adapter of Leakwatch: a JVMTI agent that
 * plugs HotSpot into libleakwatch (leakwatch.h) and backs the Java facade io.leakwatch.LeakWatch.
 *
 *   java -agentpath:libleakwatch_jvm.so=spool=/var/lw,app=demo,... -cp leakwatch.jar:app.jar Main
 *
 * What it does (client/jvm/README.md has the user's view):
 *  - Agent_OnLoad parses and checks the options; a bad one stops the JVM (JNI_ERR).
 *  - VMInit caches the JNI ids it needs, registers the natives of io.leakwatch.LeakWatch and
 *    creates the lw_client. VMDeath frees it.
 *  - watch=CLASS#METHOD: ClassPrepare finds CLASS and every class assignable to it, and sets a
 *    breakpoint at the start of each of their instance methods named METHOD; the Breakpoint
 *    callback watches `this`.
 *  - A watched object is held by a new io.leakwatch.KeyedWeakReference (the handle the SDK gets
 *    is a JNI global reference to it; the reference is also kept in LeakWatch.watchedReferences
 *    so heap dumps show it). That Java weak reference is the truth for "reclaimed": JNI weak
 *    globals and ObjectFree lag behind it (../shared/docs/research/jvmti-facts.md, A).
 *
 * Threads: the SDK calls the lw_runtime callbacks on its own threads (native threads the JVM
 * does not know). Every callback first gets a JNIEnv, attaching the thread as a daemon when
 * needed; a thread-specific key detaches it when the thread ends. Every JNI call that can
 * throw is followed by an exception check that clears it. Callbacks keep their local
 * references inside a local frame: an attached thread has no Java frame to pop them.
 *
 * Clock: the SDK is given this file's clock (CLOCK_MONOTONIC in ms), and the same value is
 * passed to the KeyedWeakReference constructor, so watchUptimeMillis, retainedUptimeMillis and
 * heapDumpUptimeMillis all come from one clock. It also equals System.nanoTime() / 1_000_000
 * on HotSpot/Linux, which reads CLOCK_MONOTONIC too (checked by tests/client/jvm/AgentSmoke). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <jni.h>
/* jvmti.h declares a reserved slot as `void *(JNICALL *reserved1)()`: not our prototype to fix */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <jvmti.h>
#pragma GCC diagnostic pop
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "leakwatch.h"

#define LW_JNI_VERSION JNI_VERSION_1_8
#define MAX_WATCH_SPECS 64
#define MAX_OPTION_VALUE 4096
#define VMDEATH_FREE_TIMEOUT_MS 2000

/* ---- options ----------------------------------------------------------------------------- */

/* One watch=CLASS#METHOD option. */
typedef struct watch_spec {
    char *class_name;  /* Java source form: com.example.Screen */
    char *method_name; /* onDestroy */
    char *signature;   /* JVM form: Lcom/example/Screen; */
    char *description; /* "com.example.Screen#onDestroy was called" */
    jclass *targets;   /* global refs: every prepared class named class_name (one per loader) */
    size_t ntargets, targets_cap;
    int hooked_any;    /* a breakpoint was set on class_name itself */
} watch_spec;

typedef struct options {
    char *server, *key, *app, *version, *spool, *analyzer;
    int64_t build;
    lw_mode mode;
    int log_level;
    int64_t retained_delay_ms; /* 0 = the SDK's default */
    watch_spec watches[MAX_WATCH_SPECS];
    size_t nwatches;
} options;

/* A method with a breakpoint, and the watch= option it serves. */
typedef struct hooked_method {
    jmethodID method;
    size_t spec;
    jclass filter; /* set when the method is inherited from a superclass: watch only instances of it */
} hooked_method;

/* ---- the agent's state (one per process) -------------------------------------------------- */

static struct agent {
    JavaVM *vm;
    jvmtiEnv *jvmti;
    options opt;

    pthread_key_t attach_key;  /* set on threads this file attached: detach them at exit */
    atomic_int live;           /* VMInit ran */
    atomic_int vm_dead;        /* VMDeath finished: no more JNI from foreign threads */

    pthread_mutex_t hook_lock; /* watch_spec.targets and hooked[] */
    hooked_method *hooked;
    size_t nhooked, hooked_cap;

    pthread_rwlock_t client_lock; /* readers use client; VMDeath takes it away */
    lw_client *client;

    /* JNI ids, cached at VMInit (global refs for classes and objects) */
    jclass kwr_class;
    jmethodID kwr_init;
    jfieldID kwr_key, kwr_retained, kwr_heap_dump;
    jmethodID ref_refers_to; /* Reference.refersTo (JDK 16+), else NULL */
    jmethodID ref_get;
    jclass leakwatch_class;
    jobject watched_set; /* LeakWatch.watchedReferences */
    jmethodID set_add, set_remove;
    jmethodID object_to_string;
    jobject runtime;
    jmethodID rt_total, rt_free, rt_max;

    pthread_mutex_t dump_lock; /* the HotSpotDiagnosticMXBean, looked up at the first dump */
    jobject diag_bean;
    jmethodID diag_dump_heap;
} g;

/* ---- logging ----------------------------------------------------------------------------- */

static void logf_(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void logf_(int level, const char *fmt, ...)
{
    if (level < g.opt.log_level)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    static const char *const prefix[] = {"debug: ", "", "warning: ", "error: "};
    int i = level < LW_LOG_DEBUG ? LW_LOG_DEBUG : level > LW_LOG_ERROR ? LW_LOG_ERROR : level;
    fprintf(stderr, "leakwatch: %s%s\n", prefix[i], buf);
}

/* The SDK's log callback. */
static void sdk_log(void *user, int level, const char *message)
{
    (void)user;
    logf_(level, "%s", message);
}

static void sdk_on_report(void *user, const char *report_id, const char *spool_path)
{
    (void)user;
    logf_(LW_LOG_INFO, "report %s spooled at %s", report_id, spool_path);
}

/* ---- clock ------------------------------------------------------------------------------- */

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t clock_uptime_ms(void *ctx)
{
    (void)ctx;
    return clock_ms(CLOCK_MONOTONIC);
}

static int64_t clock_wall_ms(void *ctx)
{
    (void)ctx;
    return clock_ms(CLOCK_REALTIME);
}

static const lw_clock agent_clock = {NULL, clock_uptime_ms, clock_wall_ms};

/* ---- JNI helpers ------------------------------------------------------------------------- */

static void detach_at_thread_exit(void *value)
{
    (void)value;
    if (!atomic_load(&g.vm_dead))
        (*g.vm)->DetachCurrentThread(g.vm);
}

/* The calling thread's JNIEnv; attaches a thread the JVM does not know (the SDK's threads) as
 * a daemon. NULL when that is impossible (the VM is going away). */
static JNIEnv *jni_env(void)
{
    JNIEnv *env = NULL;
    jint rc = (*g.vm)->GetEnv(g.vm, (void **)&env, LW_JNI_VERSION);
    if (rc == JNI_OK)
        return env;
    if (rc != JNI_EDETACHED || atomic_load(&g.vm_dead))
        return NULL;
    JavaVMAttachArgs args = {LW_JNI_VERSION, (char *)"leakwatch", NULL};
    if ((*g.vm)->AttachCurrentThreadAsDaemon(g.vm, (void **)&env, &args) != JNI_OK) {
        logf_(LW_LOG_ERROR, "cannot attach an SDK thread to the JVM");
        return NULL;
    }
    pthread_setspecific(g.attach_key, (void *)1);
    return env;
}

/* Clears a pending Java exception. Returns 1 when there was one, with its text (its
 * toString()) in msg when msg is not NULL. */
static int take_exception(JNIEnv *env, char *msg, size_t cap)
{
    if (!(*env)->ExceptionCheck(env))
        return 0;
    jthrowable t = (*env)->ExceptionOccurred(env);
    (*env)->ExceptionClear(env);
    if (msg != NULL && cap > 0) {
        snprintf(msg, cap, "a Java exception");
        if (t != NULL && g.object_to_string != NULL) {
            jstring s = (jstring)(*env)->CallObjectMethod(env, t, g.object_to_string);
            if ((*env)->ExceptionCheck(env)) {
                (*env)->ExceptionClear(env);
            } else if (s != NULL) {
                const char *c = (*env)->GetStringUTFChars(env, s, NULL);
                if (c != NULL) {
                    snprintf(msg, cap, "%s", c);
                    (*env)->ReleaseStringUTFChars(env, s, c);
                } else {
                    (*env)->ExceptionClear(env);
                }
                (*env)->DeleteLocalRef(env, s);
            }
        }
    }
    if (t != NULL)
        (*env)->DeleteLocalRef(env, t);
    return 1;
}

static void log_exception(JNIEnv *env, int level, const char *what)
{
    char msg[512];
    if (take_exception(env, msg, sizeof msg))
        logf_(level, "%s: %s", what, msg);
}

/* Looks up a class and returns a global reference to it (NULL and a cleared exception when it
 * is not there). */
static jclass global_class(JNIEnv *env, const char *name)
{
    jclass local = (*env)->FindClass(env, name);
    if (local == NULL) {
        take_exception(env, NULL, 0);
        return NULL;
    }
    jclass global = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    return global;
}

/* ---- the lw_runtime adapter -------------------------------------------------------------- */

static jobject handle_ref(lw_handle h)
{
    return (jobject)(uintptr_t)h;
}

static int rt_is_reclaimed(void *ctx, lw_handle h)
{
    (void)ctx;
    JNIEnv *env = jni_env();
    if (env == NULL)
        return 0;
    jobject ref = handle_ref(h);
    jboolean cleared;
    if (g.ref_refers_to != NULL) {
        /* refersTo(null) does not resurrect the referent, unlike get() under G1 marking */
        cleared = (*env)->CallBooleanMethod(env, ref, g.ref_refers_to, (jobject)NULL);
    } else {
        jobject referent = (*env)->CallObjectMethod(env, ref, g.ref_get);
        cleared = referent == NULL;
        if (referent != NULL)
            (*env)->DeleteLocalRef(env, referent);
    }
    if (take_exception(env, NULL, 0))
        return 0;
    return cleared ? 1 : 0;
}

static int rt_run_gc(void *ctx)
{
    (void)ctx;
    if (jni_env() == NULL) /* JVMTI needs an attached thread too */
        return -1;
    jvmtiError err = (*g.jvmti)->ForceGarbageCollection(g.jvmti);
    if (err != JVMTI_ERROR_NONE) {
        logf_(LW_LOG_WARN, "ForceGarbageCollection failed (JVMTI error %d)", (int)err);
        return -1;
    }
    return 0;
}

static void rt_mark_retained(void *ctx, lw_handle h, int64_t uptime_ms)
{
    (void)ctx;
    JNIEnv *env = jni_env();
    if (env != NULL)
        (*env)->SetLongField(env, handle_ref(h), g.kwr_retained, (jlong)uptime_ms);
}

static void rt_will_dump(void *ctx, int64_t uptime_ms)
{
    (void)ctx;
    JNIEnv *env = jni_env();
    if (env != NULL)
        (*env)->SetStaticLongField(env, g.kwr_class, g.kwr_heap_dump, (jlong)uptime_ms);
}

/* Looks up ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class) once. Called
 * with dump_lock held. 0 on success. */
static int diag_bean_init(JNIEnv *env, char *err, size_t cap)
{
    if (g.diag_bean != NULL)
        return 0;
    int rc = -1;
    jclass mf = NULL, hsd = NULL;
    jobject bean = NULL;
    mf = (*env)->FindClass(env, "java/lang/management/ManagementFactory");
    if (mf == NULL)
        goto out;
    hsd = (*env)->FindClass(env, "com/sun/management/HotSpotDiagnosticMXBean");
    if (hsd == NULL)
        goto out;
    jmethodID get = (*env)->GetStaticMethodID(env, mf, "getPlatformMXBean",
                                              "(Ljava/lang/Class;)Ljava/lang/management/PlatformManagedObject;");
    if (get == NULL)
        goto out;
    jmethodID dump = (*env)->GetMethodID(env, hsd, "dumpHeap", "(Ljava/lang/String;Z)V");
    if (dump == NULL)
        goto out;
    bean = (*env)->CallStaticObjectMethod(env, mf, get, hsd);
    if (bean == NULL || (*env)->ExceptionCheck(env))
        goto out;
    g.diag_bean = (*env)->NewGlobalRef(env, bean);
    g.diag_dump_heap = dump;
    rc = g.diag_bean != NULL ? 0 : -1;
out:
    if (rc != 0) {
        char msg[400];
        if (!take_exception(env, msg, sizeof msg))
            snprintf(msg, sizeof msg, "not available");
        snprintf(err, cap, "HotSpotDiagnosticMXBean: %s", msg);
    }
    if (bean != NULL)
        (*env)->DeleteLocalRef(env, bean);
    if (hsd != NULL)
        (*env)->DeleteLocalRef(env, hsd);
    if (mf != NULL)
        (*env)->DeleteLocalRef(env, mf);
    return rc;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* HotSpot cannot dump from a forked child (can_fork = 0): this dumps in-process through
 * HotSpotDiagnosticMXBean.dumpHeap(path, live=true), one stop-the-world pause of about 5 s per
 * GB. dumpHeap insists on a ".hprof" name and refuses an existing file: other names are dumped
 * to "<path>.tmp.hprof" and renamed, and an existing file at the target is replaced. */
static int rt_dump_heap(void *ctx, const char *path, int forked, char *err, size_t cap)
{
    (void)ctx;
    if (forked) {
        snprintf(err, cap, "HotSpot cannot dump the heap from a forked child");
        return -1;
    }
    JNIEnv *env = jni_env();
    if (env == NULL) {
        snprintf(err, cap, "the JVM is shutting down");
        return -1;
    }
    int rc = -1;
    char *tmp = NULL;
    const char *target = path;
    if (!ends_with(path, ".hprof")) {
        size_t n = strlen(path) + sizeof ".tmp.hprof";
        tmp = malloc(n);
        if (tmp == NULL) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
        snprintf(tmp, n, "%s.tmp.hprof", path);
        target = tmp;
    }
    if ((*env)->PushLocalFrame(env, 8) != 0) {
        take_exception(env, err, cap);
        free(tmp);
        return -1;
    }
    pthread_mutex_lock(&g.dump_lock);
    if (diag_bean_init(env, err, cap) != 0)
        goto out;
    if (unlink(target) != 0 && errno != ENOENT) {
        snprintf(err, cap, "cannot replace %s: %s", target, strerror(errno));
        goto out;
    }
    jstring jpath = (*env)->NewStringUTF(env, target);
    if (jpath == NULL) {
        take_exception(env, err, cap);
        goto out;
    }
    int64_t t0 = clock_ms(CLOCK_MONOTONIC);
    (*env)->CallVoidMethod(env, g.diag_bean, g.diag_dump_heap, jpath, JNI_TRUE);
    if (take_exception(env, err, cap)) {
        unlink(target);
        goto out;
    }
    if (tmp != NULL && rename(tmp, path) != 0) {
        snprintf(err, cap, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        goto out;
    }
    logf_(LW_LOG_INFO, "heap dumped to %s in %lld ms", path, (long long)(clock_ms(CLOCK_MONOTONIC) - t0));
    rc = 0;
out:
    pthread_mutex_unlock(&g.dump_lock);
    (*env)->PopLocalFrame(env, NULL);
    free(tmp);
    return rc;
}

static void rt_release(void *ctx, lw_handle h)
{
    (void)ctx;
    JNIEnv *env = jni_env();
    if (env == NULL)
        return;
    jobject ref = handle_ref(h);
    (*env)->CallBooleanMethod(env, g.watched_set, g.set_remove, ref);
    log_exception(env, LW_LOG_WARN, "cannot forget a watched reference");
    (*env)->DeleteGlobalRef(env, ref);
}

static int rt_heap_usage(void *ctx, uint64_t *used, uint64_t *max)
{
    (void)ctx;
    JNIEnv *env = jni_env();
    if (env == NULL)
        return -1;
    jlong total = (*env)->CallLongMethod(env, g.runtime, g.rt_total);
    if (take_exception(env, NULL, 0))
        return -1;
    jlong free_ = (*env)->CallLongMethod(env, g.runtime, g.rt_free);
    if (take_exception(env, NULL, 0))
        return -1;
    jlong maxm = (*env)->CallLongMethod(env, g.runtime, g.rt_max);
    if (take_exception(env, NULL, 0))
        return -1;
    *used = total > free_ ? (uint64_t)(total - free_) : 0;
    /* Runtime.maxMemory() is Long.MAX_VALUE when the heap has no limit: report 0, unknown */
    *max = maxm > 0 && maxm < INT64_MAX ? (uint64_t)maxm : 0;
    return 0;
}

/* ---- watching ---------------------------------------------------------------------------- */

/* Watches `obj`: makes its KeyedWeakReference, keeps it in LeakWatch.watchedReferences and
 * hands it to the SDK. `jdesc` is `desc` as a Java string, or NULL to make one. Writes the
 * watch's key into key_out. Runs on the thread that watches (an app thread). */
static lw_sdk_status watch_object(JNIEnv *env, jobject obj, const char *desc, jstring jdesc, char key_out[37])
{
    if ((*env)->PushLocalFrame(env, 8) != 0) {
        log_exception(env, LW_LOG_WARN, "cannot watch");
        return LW_SDK_ERR_NOMEM;
    }
    lw_sdk_status st = LW_SDK_ERR_RUNTIME;
    jobject global = NULL;
    int in_set = 0;
    pthread_rwlock_rdlock(&g.client_lock);
    if (g.client == NULL) {
        st = LW_SDK_ERR_CLOSED;
        goto out;
    }
    if (jdesc == NULL && (jdesc = (*env)->NewStringUTF(env, desc)) == NULL)
        goto out;
    /* The key is made by lw_watch, which needs the handle first: construct with an empty key
     * and set the (final) field through JNI right after. */
    jstring empty = (*env)->NewStringUTF(env, "");
    if (empty == NULL)
        goto out;
    jobject kwr = (*env)->NewObject(env, g.kwr_class, g.kwr_init, obj, empty, jdesc,
                                    (jlong)clock_uptime_ms(NULL), (jobject)NULL);
    if (kwr == NULL)
        goto out;
    if ((global = (*env)->NewGlobalRef(env, kwr)) == NULL)
        goto out;
    /* Added before lw_watch so that a release() that comes early finds it. The set's lock is
     * never held while calling into the SDK. */
    (*env)->CallBooleanMethod(env, g.watched_set, g.set_add, kwr);
    if ((*env)->ExceptionCheck(env))
        goto out;
    in_set = 1;
    st = lw_watch(g.client, (lw_handle)(uintptr_t)global, desc, key_out);
    if (st != LW_SDK_OK)
        goto out;
    jstring jkey = (*env)->NewStringUTF(env, key_out);
    if (jkey != NULL)
        (*env)->SetObjectField(env, kwr, g.kwr_key, jkey);
    /* from here the SDK owns `global`: it frees it through release() */
    global = NULL;
out:
    pthread_rwlock_unlock(&g.client_lock);
    log_exception(env, LW_LOG_WARN, "cannot watch");
    if (st != LW_SDK_OK) {
        /* a full watch set refuses every watch: say so at the 1st, 2nd, 4th, 8th... refusal */
        static atomic_ulong refused;
        unsigned long n = atomic_fetch_add(&refused, 1) + 1;
        if (st != LW_SDK_ERR_CLOSED && st != LW_SDK_ERR_RUNTIME && (n & (n - 1)) == 0)
            logf_(LW_LOG_WARN, "not watching \"%s\": %s (%lu watches refused so far)", desc, lw_sdk_strerror(st), n);
        if (in_set) {
            (*env)->CallBooleanMethod(env, g.watched_set, g.set_remove, global);
            log_exception(env, LW_LOG_WARN, "cannot forget a watched reference");
        }
        if (global != NULL)
            (*env)->DeleteGlobalRef(env, global);
    }
    (*env)->PopLocalFrame(env, NULL);
    return st;
}

/* ---- natives of io.leakwatch.LeakWatch --------------------------------------------------- */

static jstring JNICALL native_watch(JNIEnv *env, jclass cls, jobject obj, jstring jdesc)
{
    (void)cls;
    if (obj == NULL || jdesc == NULL)
        return NULL; /* the facade checks them */
    const char *desc = (*env)->GetStringUTFChars(env, jdesc, NULL);
    if (desc == NULL)
        return NULL; /* OutOfMemoryError pending: the caller sees it */
    char key[37] = {0};
    lw_sdk_status st = watch_object(env, obj, desc, jdesc, key);
    if (st == LW_SDK_OK)
        logf_(LW_LOG_DEBUG, "watching key=%s \"%s\"", key, desc);
    (*env)->ReleaseStringUTFChars(env, jdesc, desc);
    return st == LW_SDK_OK ? (*env)->NewStringUTF(env, key) : NULL;
}

static void JNICALL native_set_visible(JNIEnv *env, jclass cls, jboolean visible)
{
    (void)env;
    (void)cls;
    pthread_rwlock_rdlock(&g.client_lock);
    if (g.client != NULL)
        lw_set_visible(g.client, visible ? 1 : 0);
    pthread_rwlock_unlock(&g.client_lock);
}

static jboolean JNICALL native_dump_now(JNIEnv *env, jclass cls)
{
    (void)env;
    (void)cls;
    lw_sdk_status st = LW_SDK_ERR_CLOSED;
    int started = 0;
    pthread_rwlock_rdlock(&g.client_lock);
    if (g.client != NULL)
        st = lw_dump_now(g.client, &started);
    pthread_rwlock_unlock(&g.client_lock);
    if (st != LW_SDK_OK)
        logf_(LW_LOG_INFO, "LeakWatch.dumpNow(): %s", lw_sdk_strerror(st));
    else if (!started)
        logf_(LW_LOG_INFO, "LeakWatch.dumpNow(): nothing is retained, so there is nothing to dump");
    /* true only when a dump was really requested */
    return st == LW_SDK_OK && started ? JNI_TRUE : JNI_FALSE;
}

static jboolean JNICALL native_is_installed(JNIEnv *env, jclass cls)
{
    (void)env;
    (void)cls;
    pthread_rwlock_rdlock(&g.client_lock);
    jboolean installed = g.client != NULL ? JNI_TRUE : JNI_FALSE;
    pthread_rwlock_unlock(&g.client_lock);
    return installed;
}

/* ---- watch=CLASS#METHOD: breakpoints ----------------------------------------------------- */

/* The watch= option a breakpointed method serves for receiver `self` (NULL: any), or -1. A
 * method inherited from a superclass (JFrame#dispose is declared by Window) serves only
 * receivers of the named class. */
static long hooked_spec(JNIEnv *env, jmethodID method, jobject self)
{
    long spec = -1;
    pthread_mutex_lock(&g.hook_lock);
    for (size_t i = 0; i < g.nhooked && spec < 0; i++) {
        if (g.hooked[i].method != method)
            continue;
        if (g.hooked[i].filter == NULL || self == NULL || (*env)->IsInstanceOf(env, self, g.hooked[i].filter))
            spec = (long)g.hooked[i].spec;
    }
    pthread_mutex_unlock(&g.hook_lock);
    return spec;
}

static void JNICALL on_breakpoint(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jmethodID method,
                                  jlocation location)
{
    (void)location;
    /* watching runs Java code (the KeyedWeakReference constructor, Set.add): never recurse */
    static _Thread_local int busy;
    if (busy)
        return;
    if (hooked_spec(env, method, NULL) < 0)
        return;
    busy = 1;
    if ((*env)->PushLocalFrame(env, 8) != 0) {
        take_exception(env, NULL, 0);
        busy = 0;
        return;
    }
    jobject self = NULL;
    jvmtiError err = (*jvmti)->GetLocalInstance(jvmti, thread, 0, &self);
    if (err != JVMTI_ERROR_NONE || self == NULL) {
        logf_(LW_LOG_DEBUG, "watch=: no receiver (JVMTI error %d)", (int)err);
        goto out;
    }
    long spec = hooked_spec(env, method, self);
    if (spec < 0) /* an inherited method called on an object of another class */
        goto out;
    /* An override that calls super.METHOD() hits twice with the same receiver: watch once.
     * (A hooked method calling METHOD on another object, e.g. a child screen, still counts.) */
    jmethodID caller = NULL;
    jlocation caller_location;
    if ((*jvmti)->GetFrameLocation(jvmti, thread, 1, &caller, &caller_location) == JVMTI_ERROR_NONE &&
        caller != NULL && hooked_spec(env, caller, NULL) >= 0) {
        jobject caller_self = NULL;
        if ((*jvmti)->GetLocalInstance(jvmti, thread, 1, &caller_self) == JVMTI_ERROR_NONE &&
            caller_self != NULL && (*env)->IsSameObject(env, caller_self, self))
            goto out;
    }
    const watch_spec *ws = &g.opt.watches[spec];
    char key[37] = {0};
    if (watch_object(env, self, ws->description, NULL, key) == LW_SDK_OK)
        logf_(LW_LOG_DEBUG, "watching key=%s \"%s\"", key, ws->description);
out:
    (*env)->PopLocalFrame(env, NULL);
    busy = 0;
}

/* Sets breakpoints at the start of klass's own instance methods named after spec. Called with
 * hook_lock held. Returns how many it set. */
static int hook_methods(jvmtiEnv *jvmti, jclass klass, const char *class_sig, size_t spec, jclass filter)
{
    const watch_spec *ws = &g.opt.watches[spec];
    jint n = 0;
    jmethodID *methods = NULL;
    int set = 0;
    if ((*jvmti)->GetClassMethods(jvmti, klass, &n, &methods) != JVMTI_ERROR_NONE)
        return 0;
    for (jint i = 0; i < n; i++) {
        char *name = NULL, *msig = NULL;
        if ((*jvmti)->GetMethodName(jvmti, methods[i], &name, &msig, NULL) != JVMTI_ERROR_NONE)
            continue;
        if (strcmp(name, ws->method_name) == 0) {
            jint mods = 0;
            jlocation start = 0, end = 0;
            (*jvmti)->GetMethodModifiers(jvmti, methods[i], &mods);
            if (mods & 0x0008) { /* static: there is no `this` to watch */
                logf_(LW_LOG_DEBUG, "watch=%s#%s: %s%s is static, not hooked", ws->class_name, ws->method_name,
                      name, msig);
            } else if ((mods & (0x0400 | 0x0100)) == 0 && /* abstract, native: no bytecode */
                       (*jvmti)->GetMethodLocation(jvmti, methods[i], &start, &end) == JVMTI_ERROR_NONE) {
                jvmtiError err = (*jvmti)->SetBreakpoint(jvmti, methods[i], start);
                if (err == JVMTI_ERROR_NONE || err == JVMTI_ERROR_DUPLICATE) {
                    if (g.nhooked == g.hooked_cap) {
                        size_t cap = g.hooked_cap ? g.hooked_cap * 2 : 16;
                        hooked_method *p = realloc(g.hooked, cap * sizeof *p);
                        if (p == NULL) {
                            (*jvmti)->ClearBreakpoint(jvmti, methods[i], start);
                            goto next;
                        }
                        g.hooked = p;
                        g.hooked_cap = cap;
                    }
                    /* A method already hooked for another watch= (or without a filter) still gets
                     * this entry: each names which receivers it serves. */
                    g.hooked[g.nhooked++] = (hooked_method){methods[i], spec, filter};
                    set++;
                    logf_(LW_LOG_DEBUG, "hooked %s %s%s", class_sig, name, msig);
                } else {
                    logf_(LW_LOG_WARN, "watch=%s#%s: SetBreakpoint failed (JVMTI error %d)", ws->class_name,
                          ws->method_name, (int)err);
                }
            }
        }
    next:
        (*jvmti)->Deallocate(jvmti, (unsigned char *)name);
        (*jvmti)->Deallocate(jvmti, (unsigned char *)msig);
    }
    (*jvmti)->Deallocate(jvmti, (unsigned char *)methods);
    return set;
}

/* A class was prepared: remember it when a watch= names it, and hook it when it is (or
 * extends, or implements) a named class. A superclass is always prepared before its
 * subclasses, so the targets are known in time. */
static void hook_class(jvmtiEnv *jvmti, JNIEnv *env, jclass klass)
{
    char *sig = NULL;
    if ((*jvmti)->GetClassSignature(jvmti, klass, &sig, NULL) != JVMTI_ERROR_NONE)
        return;
    pthread_mutex_lock(&g.hook_lock);
    for (size_t s = 0; s < g.opt.nwatches; s++) {
        watch_spec *ws = &g.opt.watches[s];
        int is_target = strcmp(sig, ws->signature) == 0;
        if (is_target) {
            if (ws->ntargets == ws->targets_cap) {
                size_t cap = ws->targets_cap ? ws->targets_cap * 2 : 2;
                jclass *p = realloc(ws->targets, cap * sizeof *p);
                if (p == NULL)
                    continue;
                ws->targets = p;
                ws->targets_cap = cap;
            }
            jclass ref = (jclass)(*env)->NewGlobalRef(env, klass);
            if (ref != NULL)
                ws->targets[ws->ntargets++] = ref;
        }
        int assignable = is_target;
        for (size_t t = 0; !assignable && t < ws->ntargets; t++)
            assignable = (*env)->IsAssignableFrom(env, klass, ws->targets[t]);
        if (!assignable)
            continue;
        int n = hook_methods(jvmti, klass, sig, s, NULL);
        if (is_target && n > 0)
            ws->hooked_any = 1;
        if (is_target && n == 0) {
            /* Declared up the superclass chain (JFrame#dispose is Window's): hook the nearest
             * declaration, for receivers of this class only. */
            jclass filter = ws->targets[ws->ntargets - 1];
            jclass super = (*env)->GetSuperclass(env, klass);
            while (super != NULL && n == 0) {
                char *ssig = NULL;
                if ((*jvmti)->GetClassSignature(jvmti, super, &ssig, NULL) == JVMTI_ERROR_NONE) {
                    n = hook_methods(jvmti, super, ssig, s, filter);
                    if (n > 0) {
                        /* "Ljava/awt/Window;" -> "java.awt.Window" */
                        char *name = ssig[0] == 'L' ? ssig + 1 : ssig;
                        size_t len = strlen(name);
                        if (len && name[len - 1] == ';') name[len - 1] = 0;
                        for (char *c = name; *c; c++)
                            if (*c == '/') *c = '.';
                        logf_(LW_LOG_INFO, "watch=%s#%s: the method is declared by %s; hooked there for %s only",
                              ws->class_name, ws->method_name, name, ws->class_name);
                    }
                    (*jvmti)->Deallocate(jvmti, (unsigned char *)ssig);
                }
                jclass next = n == 0 ? (*env)->GetSuperclass(env, super) : NULL;
                (*env)->DeleteLocalRef(env, super);
                super = next;
            }
            if (n > 0)
                ws->hooked_any = 1;
            else
                logf_(LW_LOG_WARN, "watch=%s#%s: %s has no instance method %s, nor its superclasses: only subclasses "
                                   "that declare it are watched",
                      ws->class_name, ws->method_name, ws->class_name, ws->method_name);
        }
    }
    pthread_mutex_unlock(&g.hook_lock);
    (*jvmti)->Deallocate(jvmti, (unsigned char *)sig);
}

static void JNICALL on_class_prepare(jvmtiEnv *jvmti, JNIEnv *env, jthread thread, jclass klass)
{
    (void)thread;
    if (!atomic_load(&g.live)) /* VMInit walks the classes prepared before it */
        return;
    hook_class(jvmti, env, klass);
}

/* Classes prepared before VMInit (the event is not sent then). */
static void hook_loaded_classes(jvmtiEnv *jvmti, JNIEnv *env)
{
    jint n = 0;
    jclass *classes = NULL;
    if ((*jvmti)->GetLoadedClasses(jvmti, &n, &classes) != JVMTI_ERROR_NONE)
        return;
    for (jint i = 0; i < n; i++) {
        jint status = 0;
        if ((*jvmti)->GetClassStatus(jvmti, classes[i], &status) == JVMTI_ERROR_NONE &&
            (status & JVMTI_CLASS_STATUS_PREPARED) && !(status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)))
            hook_class(jvmti, env, classes[i]);
        (*env)->DeleteLocalRef(env, classes[i]);
    }
    (*jvmti)->Deallocate(jvmti, (unsigned char *)classes);
}

/* ---- VMInit / VMDeath -------------------------------------------------------------------- */

/* Caches the classes, methods and fields the adapter uses. 0 on success. */
static int cache_jni(JNIEnv *env)
{
    g.object_to_string = NULL;
    jclass object = (*env)->FindClass(env, "java/lang/Object");
    if (object != NULL) {
        g.object_to_string = (*env)->GetMethodID(env, object, "toString", "()Ljava/lang/String;");
        (*env)->DeleteLocalRef(env, object);
    }
    if (g.object_to_string == NULL) {
        log_exception(env, LW_LOG_ERROR, "java.lang.Object");
        return -1;
    }
    g.kwr_class = global_class(env, "io/leakwatch/KeyedWeakReference");
    g.leakwatch_class = global_class(env, "io/leakwatch/LeakWatch");
    if (g.kwr_class == NULL || g.leakwatch_class == NULL) {
        logf_(LW_LOG_ERROR, "io.leakwatch.%s is not on the class path (add leakwatch.jar to -cp): "
                            "Leakwatch is disabled",
              g.kwr_class == NULL ? "KeyedWeakReference" : "LeakWatch");
        return -1;
    }
    g.kwr_init = (*env)->GetMethodID(env, g.kwr_class, "<init>",
                                     "(Ljava/lang/Object;Ljava/lang/String;Ljava/lang/String;JLjava/lang/ref/ReferenceQueue;)V");
    g.kwr_key = g.kwr_init ? (*env)->GetFieldID(env, g.kwr_class, "key", "Ljava/lang/String;") : NULL;
    g.kwr_retained = g.kwr_key ? (*env)->GetFieldID(env, g.kwr_class, "retainedUptimeMillis", "J") : NULL;
    g.kwr_heap_dump = g.kwr_retained ? (*env)->GetStaticFieldID(env, g.kwr_class, "heapDumpUptimeMillis", "J") : NULL;
    if (g.kwr_heap_dump == NULL) {
        log_exception(env, LW_LOG_ERROR, "io.leakwatch.KeyedWeakReference does not match this agent");
        return -1;
    }
    jclass ref = (*env)->FindClass(env, "java/lang/ref/Reference");
    if (ref == NULL) {
        log_exception(env, LW_LOG_ERROR, "java.lang.ref.Reference");
        return -1;
    }
    g.ref_refers_to = (*env)->GetMethodID(env, ref, "refersTo", "(Ljava/lang/Object;)Z");
    take_exception(env, NULL, 0); /* before JDK 16: get() */
    g.ref_get = (*env)->GetMethodID(env, ref, "get", "()Ljava/lang/Object;");
    (*env)->DeleteLocalRef(env, ref);
    if (g.ref_get == NULL) {
        log_exception(env, LW_LOG_ERROR, "java.lang.ref.Reference.get");
        return -1;
    }
    jfieldID set_field = (*env)->GetStaticFieldID(env, g.leakwatch_class, "watchedReferences", "Ljava/util/Set;");
    jobject set = set_field ? (*env)->GetStaticObjectField(env, g.leakwatch_class, set_field) : NULL;
    jclass set_class = set ? (*env)->FindClass(env, "java/util/Set") : NULL;
    if (set_class != NULL) {
        g.set_add = (*env)->GetMethodID(env, set_class, "add", "(Ljava/lang/Object;)Z");
        g.set_remove = g.set_add ? (*env)->GetMethodID(env, set_class, "remove", "(Ljava/lang/Object;)Z") : NULL;
        (*env)->DeleteLocalRef(env, set_class);
    }
    if (g.set_remove == NULL || (g.watched_set = (*env)->NewGlobalRef(env, set)) == NULL) {
        log_exception(env, LW_LOG_ERROR, "io.leakwatch.LeakWatch does not match this agent");
        return -1;
    }
    (*env)->DeleteLocalRef(env, set);
    jclass rt = (*env)->FindClass(env, "java/lang/Runtime");
    jmethodID get_rt = rt ? (*env)->GetStaticMethodID(env, rt, "getRuntime", "()Ljava/lang/Runtime;") : NULL;
    jobject runtime = get_rt ? (*env)->CallStaticObjectMethod(env, rt, get_rt) : NULL;
    if (runtime != NULL && !(*env)->ExceptionCheck(env)) {
        g.rt_total = (*env)->GetMethodID(env, rt, "totalMemory", "()J");
        g.rt_free = (*env)->GetMethodID(env, rt, "freeMemory", "()J");
        g.rt_max = (*env)->GetMethodID(env, rt, "maxMemory", "()J");
        g.runtime = (*env)->NewGlobalRef(env, runtime);
        (*env)->DeleteLocalRef(env, runtime);
    }
    if (rt != NULL)
        (*env)->DeleteLocalRef(env, rt);
    if (g.runtime == NULL || g.rt_total == NULL || g.rt_free == NULL || g.rt_max == NULL) {
        log_exception(env, LW_LOG_ERROR, "java.lang.Runtime");
        return -1;
    }
    return 0;
}

static int register_natives(JNIEnv *env)
{
    static const JNINativeMethod natives[] = {
        {(char *)"watch0", (char *)"(Ljava/lang/Object;Ljava/lang/String;)Ljava/lang/String;", (void *)native_watch},
        {(char *)"setVisible0", (char *)"(Z)V", (void *)native_set_visible},
        {(char *)"dumpNow0", (char *)"()Z", (void *)native_dump_now},
        {(char *)"isInstalled0", (char *)"()Z", (void *)native_is_installed},
    };
    if ((*env)->RegisterNatives(env, g.leakwatch_class, natives, (jint)(sizeof natives / sizeof natives[0])) != 0) {
        log_exception(env, LW_LOG_ERROR, "cannot register the natives of io.leakwatch.LeakWatch");
        return -1;
    }
    return 0;
}

/* System.getProperty(name) as a malloc'ed string, or NULL. (JVMTI GetSystemProperty sees only
 * the VM's own properties, not os.name and friends, which Java code sets.) */
static char *system_property(JNIEnv *env, const char *name)
{
    char *copy = NULL;
    jclass sys = (*env)->FindClass(env, "java/lang/System");
    jmethodID get = sys ? (*env)->GetStaticMethodID(env, sys, "getProperty", "(Ljava/lang/String;)Ljava/lang/String;") : NULL;
    jstring jname = get ? (*env)->NewStringUTF(env, name) : NULL;
    jstring value = jname ? (jstring)(*env)->CallStaticObjectMethod(env, sys, get, jname) : NULL;
    if (value != NULL && !(*env)->ExceptionCheck(env)) {
        const char *c = (*env)->GetStringUTFChars(env, value, NULL);
        if (c != NULL) {
            copy = strdup(c);
            (*env)->ReleaseStringUTFChars(env, value, c);
        }
    }
    take_exception(env, NULL, 0);
    if (value != NULL)
        (*env)->DeleteLocalRef(env, value);
    if (jname != NULL)
        (*env)->DeleteLocalRef(env, jname);
    if (sys != NULL)
        (*env)->DeleteLocalRef(env, sys);
    return copy;
}

static void JNICALL on_vm_init(jvmtiEnv *jvmti, JNIEnv *env, jthread thread)
{
    (void)thread;
    if (cache_jni(env) != 0 || register_natives(env) != 0)
        return;

    lw_runtime runtime = {
        .struct_size = sizeof runtime,
        .ctx = NULL,
        .is_reclaimed = rt_is_reclaimed,
        .run_gc = rt_run_gc,
        .mark_retained = rt_mark_retained,
        .will_dump = rt_will_dump,
        .dump_heap = rt_dump_heap,
        .can_fork = 0,
        .release = rt_release,
        .heap_usage = rt_heap_usage,
    };
    char *os_name = system_property(env, "os.name");
    char *os_version = system_property(env, "os.version");
    char *abi = system_property(env, "os.arch");
    const options *o = &g.opt;
    lw_config config = {
        .struct_size = sizeof config,
        .server_url = o->server,
        .ingest_key = o->key,
        .app = o->app,
        .app_version = o->version,
        .build = o->build,
        .runtime_name = "jvm",
        .mode = o->mode,
        .spool_dir = o->spool,
        .retained_delay_ms = o->retained_delay_ms,
        .analyzer_path = o->analyzer,
        .on_report = sdk_on_report,
        .log = sdk_log,
        .os_name = os_name,
        .os_version = os_version,
        .abi = abi,
        .clock = &agent_clock,
    };
    char err[512] = {0};
    lw_client *client = NULL;
    lw_sdk_status st = lw_client_new(&client, &config, &runtime, err, sizeof err);
    free(os_name);
    free(os_version);
    free(abi);
    if (st != LW_SDK_OK) {
        logf_(LW_LOG_ERROR, "Leakwatch is disabled: %s (%s)", err[0] ? err : "cannot start", lw_sdk_strerror(st));
        return;
    }
    pthread_rwlock_wrlock(&g.client_lock);
    g.client = client;
    pthread_rwlock_unlock(&g.client_lock);

    atomic_store(&g.live, 1);
    if (o->nwatches > 0) {
        hook_loaded_classes(jvmti, env);
        /* Say at start-up what each watch= resolved to. */
        for (size_t s = 0; s < o->nwatches; s++) {
            const watch_spec *ws = &o->watches[s];
            if (ws->ntargets == 0)
                logf_(LW_LOG_INFO, "watch=%s#%s: %s is not loaded yet; it is hooked when it loads", ws->class_name,
                      ws->method_name, ws->class_name);
            else if (!ws->hooked_any)
                logf_(LW_LOG_WARN, "watch=%s#%s: no method %s to hook on %s or its superclasses", ws->class_name,
                      ws->method_name, ws->method_name, ws->class_name);
        }
    }
    logf_(LW_LOG_INFO, "Leakwatch %s started: app=%s version=%s build=%lld mode=%s spool=%s%s%s", lw_sdk_version(),
          o->app, o->version, (long long)o->build, o->mode == LW_MODE_TRACES ? "traces" : "heap", o->spool,
          o->server ? " server=" : " (spool only)", o->server ? o->server : "");
}

static void JNICALL on_vm_death(jvmtiEnv *jvmti, JNIEnv *env)
{
    (void)jvmti;
    (void)env;
    atomic_store(&g.live, 0);
    pthread_rwlock_wrlock(&g.client_lock);
    lw_client *client = g.client;
    g.client = NULL;
    pthread_rwlock_unlock(&g.client_lock);
    /* Bounded: if VMDeath returns before the SDK's threads are done, they never run again. */
    lw_client_free(client, VMDEATH_FREE_TIMEOUT_MS);
    for (size_t s = 0; s < g.opt.nwatches; s++) {
        const watch_spec *ws = &g.opt.watches[s];
        if (ws->ntargets == 0)
            logf_(LW_LOG_INFO, "watch=%s#%s: class %s was never loaded", ws->class_name, ws->method_name,
                  ws->class_name);
    }
    atomic_store(&g.vm_dead, 1);
}

/* ---- option parsing ---------------------------------------------------------------------- */

static const char *const option_names =
    "server, key, app, version, build, mode, spool, watch, analyzer, log, retained_delay_ms";

static int option_error(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int option_error(const char *name, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "leakwatch: error: option %s%s%s\n", name ? name : "", name ? ": " : "", buf);
    return -1;
}

/* A decimal integer in [min, max], digits only (a leading '-' when min < 0). */
static int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    const char *p = s;
    if (*p == '-' && min < 0)
        p++;
    if (*p == '\0')
        return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || (unsigned char)c >= 0x80;
}

static int is_ident_part(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

/* A dot-separated Java name (dots allowed when `dotted`). */
static int valid_java_name(const char *s, int dotted)
{
    int at_start = 1;
    for (; *s; s++) {
        if (*s == '.' && dotted && !at_start) {
            at_start = 1;
        } else if (at_start ? is_ident_start(*s) : is_ident_part(*s)) {
            at_start = 0;
        } else {
            return 0;
        }
    }
    return !at_start;
}

static int valid_app_slug(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '.' || c == '_' || c == '-'));
        if (!ok)
            return 0;
    }
    return 1;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL)
        fprintf(stderr, "leakwatch: error: out of memory\n");
    return p;
}

static int add_watch(options *o, const char *value)
{
    if (o->nwatches == MAX_WATCH_SPECS)
        return option_error("watch", "at most %d may be given", MAX_WATCH_SPECS);
    const char *hash = strchr(value, '#');
    if (hash == NULL || strchr(hash + 1, '#') != NULL)
        return option_error("watch", "'%s' is not CLASS#METHOD (e.g. com.example.Screen#onDestroy)", value);
    size_t clen = (size_t)(hash - value);
    watch_spec *ws = &o->watches[o->nwatches];
    memset(ws, 0, sizeof *ws);
    ws->class_name = strndup(value, clen);
    ws->method_name = xstrdup(hash + 1);
    if (ws->class_name == NULL || ws->method_name == NULL)
        return -1;
    o->nwatches++; /* freed by free_options from here */
    if (!valid_java_name(ws->class_name, 1))
        return option_error("watch", "'%s' is not a class name in Java source form (com.example.Outer$Inner)",
                            ws->class_name);
    if (!valid_java_name(ws->method_name, 0))
        return option_error("watch", "'%s' is not a method name (constructors and static methods have no "
                                     "object to watch)", ws->method_name);
    size_t slen = clen + 3;
    size_t dlen = strlen(value) + sizeof " was called";
    ws->signature = malloc(slen);
    ws->description = malloc(dlen);
    if (ws->signature == NULL || ws->description == NULL)
        return option_error(NULL, "out of memory");
    ws->signature[0] = 'L';
    for (size_t i = 0; i < clen; i++)
        ws->signature[i + 1] = ws->class_name[i] == '.' ? '/' : ws->class_name[i];
    ws->signature[clen + 1] = ';';
    ws->signature[clen + 2] = '\0';
    snprintf(ws->description, dlen, "%s was called", value);
    return 0;
}

/* Sets a string option once. */
static int set_once(char **slot, const char *name, const char *value)
{
    if (*slot != NULL)
        return option_error(name, "given twice");
    if (*value == '\0')
        return option_error(name, "needs a value");
    *slot = xstrdup(value);
    return *slot != NULL ? 0 : -1;
}

static void free_options(options *o)
{
    free(o->server);
    free(o->key);
    free(o->app);
    free(o->version);
    free(o->spool);
    free(o->analyzer);
    for (size_t i = 0; i < o->nwatches; i++) {
        free(o->watches[i].class_name);
        free(o->watches[i].method_name);
        free(o->watches[i].signature);
        free(o->watches[i].description);
        free(o->watches[i].targets); /* global refs die with the VM */
    }
    memset(o, 0, sizeof *o);
}

/* Creates the spool directory (and its parents) when it does not exist; checks it is a
 * writable directory. */
static int check_spool(const char *dir)
{
    size_t n = strlen(dir);
    char *path = malloc(n + 1);
    if (path == NULL)
        return option_error(NULL, "out of memory");
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0700) != 0 && errno != EEXIST) {
                int e = errno;
                free(path);
                return option_error("spool", "cannot create %s: %s", dir, strerror(e));
            }
            *p = c;
            if (c == '\0')
                break;
        }
    }
    free(path);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return option_error("spool", "%s is not a directory", dir);
    if (access(dir, W_OK | X_OK) != 0)
        return option_error("spool", "%s is not writable: %s", dir, strerror(errno));
    return 0;
}

static int parse_options(const char *text, options *o)
{
    memset(o, 0, sizeof *o);
    o->log_level = LW_LOG_INFO;
    o->mode = LW_MODE_HEAP;
    int have_build = 0, have_mode = 0, have_log = 0, have_delay = 0;
    if (text == NULL)
        text = "";
    char *copy = xstrdup(text);
    if (copy == NULL)
        return -1;
    int rc = -1;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq == NULL) {
            option_error(NULL, "'%s' is not name=value (options: %s)", tok, option_names);
            goto out;
        }
        *eq = '\0';
        const char *name = tok, *value = eq + 1;
        if (strlen(value) > MAX_OPTION_VALUE) {
            option_error(name, "value longer than %d bytes", MAX_OPTION_VALUE);
            goto out;
        }
        if (strcmp(name, "server") == 0) {
            if (set_once(&o->server, name, value) != 0)
                goto out;
            if (strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0) {
                option_error(name, "'%s' is not an http:// or https:// URL", value);
                goto out;
            }
        } else if (strcmp(name, "key") == 0) {
            if (set_once(&o->key, name, value) != 0)
                goto out;
        } else if (strcmp(name, "app") == 0) {
            if (set_once(&o->app, name, value) != 0)
                goto out;
            if (!valid_app_slug(value)) {
                option_error(name, "'%s' is not an app name ([a-z0-9][a-z0-9._-]{0,63})", value);
                goto out;
            }
        } else if (strcmp(name, "version") == 0) {
            if (set_once(&o->version, name, value) != 0)
                goto out;
        } else if (strcmp(name, "build") == 0) {
            if (have_build++) {
                option_error(name, "given twice");
                goto out;
            }
            if (parse_int64(value, 0, INT64_MAX, &o->build) != 0) {
                option_error(name, "'%s' is not a non-negative integer", value);
                goto out;
            }
        } else if (strcmp(name, "mode") == 0) {
            if (have_mode++) {
                option_error(name, "given twice");
                goto out;
            }
            if (strcmp(value, "heap") == 0) {
                o->mode = LW_MODE_HEAP;
            } else if (strcmp(value, "traces") == 0) {
                o->mode = LW_MODE_TRACES;
            } else {
                option_error(name, "'%s' is not heap or traces", value);
                goto out;
            }
        } else if (strcmp(name, "spool") == 0) {
            if (set_once(&o->spool, name, value) != 0)
                goto out;
        } else if (strcmp(name, "watch") == 0) {
            if (add_watch(o, value) != 0)
                goto out;
        } else if (strcmp(name, "analyzer") == 0) {
            if (set_once(&o->analyzer, name, value) != 0)
                goto out;
        } else if (strcmp(name, "log") == 0) {
            static const char *const levels[] = {"debug", "info", "warn", "error"};
            if (have_log++) {
                option_error(name, "given twice");
                goto out;
            }
            o->log_level = -1;
            for (int i = 0; i < 4; i++)
                if (strcmp(value, levels[i]) == 0)
                    o->log_level = i;
            if (o->log_level < 0) {
                option_error(name, "'%s' is not debug, info, warn or error", value);
                goto out;
            }
        } else if (strcmp(name, "retained_delay_ms") == 0) {
            if (have_delay++) {
                option_error(name, "given twice");
                goto out;
            }
            if (parse_int64(value, 1, 24LL * 3600 * 1000, &o->retained_delay_ms) != 0) {
                option_error(name, "'%s' is not an integer from 1 to 86400000", value);
                goto out;
            }
        } else {
            option_error(NULL, "unknown option '%s' (options: %s)", name, option_names);
            goto out;
        }
    }
    if (o->spool == NULL) {
        option_error("spool", "is required (the directory reports are written to before upload)");
        goto out;
    }
    if (o->app == NULL) {
        option_error("app", "is required (the app's name on the server)");
        goto out;
    }
    if (o->server != NULL && o->key == NULL) {
        option_error("key", "is required with server= (an ingest key, lw_ingest_...)");
        goto out;
    }
    if (o->analyzer != NULL && o->mode != LW_MODE_TRACES) {
        option_error("analyzer", "is used only with mode=traces");
        goto out;
    }
    if (o->analyzer != NULL && access(o->analyzer, X_OK) != 0) {
        option_error("analyzer", "%s is not an executable: %s", o->analyzer, strerror(errno));
        goto out;
    }
    if (o->version == NULL && (o->version = xstrdup("unknown")) == NULL)
        goto out;
    if (check_spool(o->spool) != 0)
        goto out;
    rc = 0;
out:
    free(copy);
    if (rc != 0)
        free_options(o);
    return rc;
}

/* ---- entry points ------------------------------------------------------------------------ */

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options_text, void *reserved)
{
    (void)reserved;
    if (g.vm != NULL) {
        fprintf(stderr, "leakwatch: error: the agent is loaded twice; give -agentpath once\n");
        return JNI_ERR;
    }
    if (parse_options(options_text, &g.opt) != 0) {
        fprintf(stderr, "leakwatch: usage: -agentpath:libleakwatch_jvm.so=spool=DIR,app=NAME"
                        "[,server=URL,key=KEY][,version=V][,build=N][,mode=heap|traces][,watch=CLASS#METHOD]..."
                        "[,analyzer=PATH][,log=debug|info|warn|error][,retained_delay_ms=N]\n");
        return JNI_ERR;
    }
    g.vm = vm;
    jvmtiEnv *jvmti = NULL;
    if ((*vm)->GetEnv(vm, (void **)&jvmti, JVMTI_VERSION_1_2) != JNI_OK || jvmti == NULL) {
        fprintf(stderr, "leakwatch: error: this JVM has no JVMTI 1.2\n");
        return JNI_ERR;
    }
    g.jvmti = jvmti;
    if (pthread_key_create(&g.attach_key, detach_at_thread_exit) != 0 ||
        pthread_mutex_init(&g.hook_lock, NULL) != 0 || pthread_mutex_init(&g.dump_lock, NULL) != 0 ||
        pthread_rwlock_init(&g.client_lock, NULL) != 0) {
        fprintf(stderr, "leakwatch: error: cannot initialize locks\n");
        return JNI_ERR;
    }

    jvmtiCapabilities caps;
    memset(&caps, 0, sizeof caps);
    if (g.opt.nwatches > 0) {
        caps.can_generate_breakpoint_events = 1;
        caps.can_access_local_variables = 1;
    }
    jvmtiError err = (*jvmti)->AddCapabilities(jvmti, &caps);
    if (err != JVMTI_ERROR_NONE) {
        fprintf(stderr, "leakwatch: error: watch= needs the JVMTI breakpoint and local-variable capabilities "
                        "(error %d)\n", (int)err);
        return JNI_ERR;
    }
    jvmtiEventCallbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.VMInit = on_vm_init;
    cb.VMDeath = on_vm_death;
    cb.ClassPrepare = on_class_prepare;
    cb.Breakpoint = on_breakpoint;
    err = (*jvmti)->SetEventCallbacks(jvmti, &cb, (jint)sizeof cb);
    if (err == JVMTI_ERROR_NONE)
        err = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_INIT, NULL);
    if (err == JVMTI_ERROR_NONE)
        err = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL);
    if (err == JVMTI_ERROR_NONE && g.opt.nwatches > 0)
        err = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE, NULL);
    if (err == JVMTI_ERROR_NONE && g.opt.nwatches > 0)
        err = (*jvmti)->SetEventNotificationMode(jvmti, JVMTI_ENABLE, JVMTI_EVENT_BREAKPOINT, NULL);
    if (err != JVMTI_ERROR_NONE) {
        fprintf(stderr, "leakwatch: error: cannot enable JVMTI events (error %d)\n", (int)err);
        return JNI_ERR;
    }
    return JNI_OK;
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
    (void)vm;
    free(g.hooked);
    g.hooked = NULL;
    g.nhooked = g.hooked_cap = 0;
    free_options(&g.opt);
}
