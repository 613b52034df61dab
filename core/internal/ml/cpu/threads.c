// threads.c: a small fork-join pool. The caller posts a parallel loop, works on it too, and
// returns when every task is done.
//
// A decode step posts a few hundred short loops back to back, so workers spin briefly between
// loops before sleeping on a condition variable. Tasks are handed out one by one from a counter
// and completion counts tasks, not workers: a worker that the OS has not scheduled yet (the
// machine may be shared) simply takes no task, and the caller runs the rest itself instead of
// waiting for it.
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

enum { SPIN_BEFORE_SLEEP = 1 << 14, SPIN_BEFORE_YIELD = 1 << 10 };

// job is one parallel loop; it lives on the caller's stack for the duration of pool_run.
typedef struct {
    pool_fn fn;
    void *ctx;
    int tasks;
    atomic_int next; // next task to hand out
    atomic_int done; // tasks finished
} job;

typedef struct worker_arg {
    pool *p;
    int thread;
} worker_arg;

struct pool {
    int n; // threads including the caller
    pthread_t *th;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic(job *) cur; // the loop being run, NULL between loops
    atomic_uint gen;    // bumped when a loop is posted
    atomic_int active;  // workers that may hold a pointer to cur
    atomic_int sleepers;
    atomic_int stop;
};

static void run_tasks(job *j, int thread) {
    for (;;) {
        int t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (t >= j->tasks) return;
        j->fn(j->ctx, t, thread);
        atomic_fetch_add_explicit(&j->done, 1, memory_order_release);
    }
}

static void *worker(void *arg) {
    pool *p = ((worker_arg *)arg)->p;
    int thread = ((worker_arg *)arg)->thread;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load(&p->gen);
        for (int spins = 0; g == seen && spins < SPIN_BEFORE_SLEEP; spins++) {
            cpu_relax();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (atomic_load(&p->stop)) return NULL;
        // Announce before looking: pool_run clears cur, then waits for active to drain, so a
        // job seen here is still alive. (All sequentially consistent.)
        atomic_fetch_add(&p->active, 1);
        job *j = atomic_load(&p->cur);
        if (j) run_tasks(j, thread);
        atomic_fetch_sub(&p->active, 1);
    }
}

pool *pool_new(int threads) {
    if (threads < 1) threads = 1;
    pool *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->n = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (threads > 1) {
        p->th = calloc((size_t)threads - 1, sizeof(pthread_t));
        p->args = calloc((size_t)threads - 1, sizeof(worker_arg));
        if (!p->th || !p->args) {
            p->n = 1;
            pool_free(p);
            return NULL;
        }
        for (int i = 0; i < threads - 1; i++) {
            p->args[i] = (worker_arg){p, i + 1};
            if (pthread_create(&p->th[i], NULL, worker, &p->args[i]) != 0) {
                p->n = i + 1; // only i workers exist; free joins exactly those
                pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

static void wake(pool *p) {
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->n > 1) {
        atomic_store(&p->stop, 1);
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add(&p->gen, 1);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n - 1; i++) pthread_join(p->th[i], NULL);
    }
    free(p->th);
    free(p->args);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int pool_threads(const pool *p) { return p->n; }

static void wait_until(atomic_int *v, int want) {
    for (long spins = 0; atomic_load(v) != want; spins++) {
        if (spins < SPIN_BEFORE_YIELD)
            cpu_relax();
        else
            sched_yield(); // a preempted worker holds a task: let it run
    }
}

void pool_run(pool *p, int tasks, pool_fn fn, void *ctx) {
    if (tasks <= 0) return;
    if (p->n == 1 || tasks == 1) {
        for (int t = 0; t < tasks; t++) fn(ctx, t, 0);
        return;
    }
    job j = {.fn = fn, .ctx = ctx, .tasks = tasks};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    atomic_store(&p->cur, &j);
    wake(p);
    run_tasks(&j, 0);
    wait_until(&j.done, tasks);
    atomic_store(&p->cur, NULL);
    wait_until(&p->active, 0);
}
