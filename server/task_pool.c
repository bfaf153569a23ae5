/* task_pool.c — a FIFO of tasks and the threads that run them. */
#include "task_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ld_task_pool {
    pthread_mutex_t mu;
    pthread_cond_t work;
    ld_task *head, *tail;
    int stopping;
    int nthreads;
    pthread_t *threads;
};

static void *task_main(void *arg) {
    ld_task_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stopping) pthread_cond_wait(&p->work, &p->mu);
        ld_task *t = p->head;
        if (!t) break; /* stopping, and nothing left */
        p->head = t->next;
        if (!p->head) p->tail = NULL;
        pthread_mutex_unlock(&p->mu);
        t->fn(t);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void join(ld_task_pool *p, int started) {
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < started; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    free(p->threads);
    free(p);
}

ld_task_pool *ld_task_pool_start(int threads, char *err, size_t cap) {
    ld_task_pool *p = calloc(1, sizeof *p);
    if (threads < 1) threads = 1;
    if (p) p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p || !p->threads) {
        free(p);
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    for (int i = 0; i < threads; i++) {
        int rc = pthread_create(&p->threads[i], NULL, task_main, p);
        if (rc != 0) {
            snprintf(err, cap, "cannot start a request thread: %s", strerror(rc));
            join(p, i);
            return NULL;
        }
        p->nthreads = i + 1;
    }
    return p;
}

int ld_task_pool_run(ld_task_pool *p, ld_task *t) {
    int rc = -1;
    t->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (!p->stopping) {
        if (p->tail) p->tail->next = t;
        else p->head = t;
        p->tail = t;
        pthread_cond_signal(&p->work);
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void ld_task_pool_stop(ld_task_pool *p) {
    if (p) join(p, p->nthreads);
}
