/* The inference API (include/tfc.h, SPEC §5c): a model file and its weights opened once, then
 * run from any number of threads. Each concurrent call borrows a worker (a model bound on its
 * own backend, parameters copied from one host copy) from an idle list guarded by a mutex, so
 * calls never share activation buffers; a worker is bound for the largest batch it has seen,
 * so once every thread has run at its largest n, calls allocate nothing. */
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfc.h"

#ifndef TFC_VERSION
#define TFC_VERSION "dev"
#endif


/* CPU passes on several threads take turns, each on every thread: OpenBLAS's OpenMP build
 * runs one threaded GEMM at a time and makes a second caller spin until the first is done
 * (measured: 8 threads of small MLP calls ran 40x slower than the same calls in turn).
 * Process-wide, as OpenBLAS's threads are. Passes on one thread (options.threads 1) and GPU
 * workers run at once, each on its own backend (and stream). */
static pthread_mutex_t cpu_turn = PTHREAD_MUTEX_INITIALIZER;

/* A pass of a CPU worker of several threads runs on its team or on the calling thread
 * alone (tfc_cpu_team_cap 1): the same bits (the regions' splits stay the backend's,
 * cpu_team.c; oneDNN's convolutions keep a one-thread primitive beside the team's, cpu_dnnl.c).
 * Which is faster depends on the model and the batch (fashion_mobilenet's batch-1 pass took
 * 0.32 ms on two threads, 0.24 on one: its layers are too small to pay for waking the team),
 * and on the machine's mood: a recurrence whose steps meet at a barrier (cpu_lstm.c) ran
 * fortunes_classify's batch-1 call in 0.098 ms on two threads for seconds, then 0.19, on one
 * VM. So each worker races them for each batch it runs: after WARM calls on the team, DUEL
 * calls alternate between the two, timed, and their medians start each way's running mean
 * of a call's time. From then on every call is timed (two reads of the monotonic clock) and
 * takes the way of the lower mean; the way taken has its mean follow it (a sample counts for
 * at most twice the mean, so that one preempted call does not turn the race), and every
 * EXPLORE calls BURST calls take the other way, whose mean becomes the median of the burst's
 * last BURST - 2 (its first calls wake a team that has slept: one team call among lone ones
 * took 0.4 ms where a team kept busy took 0.14). A busy machine still cuts every team
 * (cpu_team.c). */
#define WARM 2
#define DUEL 16
#define EXPLORE 1024
#define BURST 6  /* 0.6% of the calls: below a p99 */
#define RACES 4  /* batches raced at once per worker */

typedef struct race {
    int batch;         /* 0: unused */
    long long calls;   /* since the race began */
    double mean[2];    /* ns: running means of a call on the team, alone */
    int best;          /* the way of the lower mean: 1 alone */
    long long t[DUEL]; /* ns: the duel's, team's at even indices, lone's at odd; a burst's */
} race;

/* One bound copy of the model; `next` links the idle list, `all` every worker. */
typedef struct worker {
    tfc_model *m;
    tfc_backend *be;
    int bound; /* the batch it is bound for */
    race races[RACES];
    int next_race;
    struct worker *next, *all;
} worker;

/* Passes side by side. A call of at least as many passes as a CPU predictor has threads
 * (T > 1) runs T passes at once, each on one thread (its own worker, tfc_cpu_team_cap 1),
 * where one pass at a time on the team waits for the team at every layer's end. Only for a
 * model whose worker needs SIDE_MAX bytes or less (tfc_model_memory's arena at the pass),
 * as each thread binds one: fashion_mobilenet (passes of 16, 6.4 MiB) and fashion_mlp (2.5
 * MiB) ran batch 1000 1.4-2x and 1.0-1.4x faster so on two threads, where the zoo's other
 * models (35-160 MiB) gained 5% or lost as much and would have needed 20-175 MB more
 * (docs/cpu.md). The passes are claimed in turn from `next`; each one's bits are the
 * team's. The calling thread runs passes too; the crew (T - 1 threads, started at the
 * predictor's first such call, ended by tfc_predictor_close) runs the rest. */
#define SIDE_MAX ((size_t)16 << 20)
typedef struct crew {
    pthread_t *threads;
    int count;                  /* threads started */
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    long long job;              /* the job's number: a thread that has not run it takes it */
    int busy;                   /* crew threads still on the job */
    int quit;
    /* the job */
    const void *const *inputs;  /* one per model input */
    float *const *outputs;      /* one per model output */
    int64_t n, length;
    int batch;
    _Atomic int64_t next;       /* the next pass's first example */
    _Atomic int64_t failed_at;  /* the first failed pass's first example (INT64_MAX: none) */
    tfc_error err;              /* its error */
} crew;

struct tfc_predictor {
    char *yaml;      /* the model file's text, parsed again for each worker */
    size_t yaml_len;
    char path[1024]; /* the model file, named in errors */
    char device[64];
    int has_device;
    int threads;     /* options.threads: the CPU backend's, 0 = every core */
    float *params;   /* every parameter, in the bound arena's order */
    int64_t nparams;
    tfc_shape in_shape, out_shape;
    int64_t max_length; /* input.max_length; 0: a model of fixed shape */
    int pass;           /* examples per forward pass (tfc_model_inference_pass): a larger n
                           runs in passes of this many, so memory stays that of one pass.
                           It is tfc-predict's default --batch, so both give the same bits
                           (OpenBLAS may take another kernel for another row count: the last
                           bits of an output can depend on the batch it ran in) */
    tfc_dtype in_dtype;
    /* a model of several inputs (in_shape, in_dtype: input 0's): each one's, as reported */
    int ninputs;
    tfc_shape in_shapes[TFC_MODEL_MAX_INPUTS];
    tfc_dtype in_dtypes[TFC_MODEL_MAX_INPUTS];
    char in_names[TFC_MODEL_MAX_INPUTS][128];
    /* its outputs (out_shape: output 0's), as reported */
    int noutputs;
    tfc_shape out_shapes[TFC_MODEL_MAX_OUTPUTS];
    char out_names[TFC_MODEL_MAX_OUTPUTS][128];
    const tfc_model *named; /* the first worker's model: the weights' class names */
    pthread_mutex_t lock; /* guards idle and all */
    worker *idle, *all;
    crew *crew;           /* NULL until the first call of passes side by side */
};

/* The first line of the error's text (as the tools print it) into buf. */
static void report(const tfc_error *e, char *buf, size_t size)
{
    if (!buf || !size) return;
    const char *t = e->text[0] ? e->text : e->msg[0] ? e->msg : "unknown error";
    size_t n = strcspn(t, "\n");
    if (n >= size) n = size - 1;
    memcpy(buf, t, n);
    buf[n] = 0;
}

static int fail(char *buf, size_t size, const char *msg)
{
    if (buf && size) snprintf(buf, size, "%s", msg);
    return -1;
}

static void worker_free(worker *w)
{
    if (!w) return;
    tfc_model_free(w->m);
    tfc_backend_free(w->be);
    free(w);
}

/* A model parsed from the predictor's text, bound on a fresh backend for `batch` examples.
 * With the predictor's parameters when it has them; else (the first worker) without. */
static worker *worker_create(tfc_predictor *p, int batch, tfc_error *err)
{
    worker *w = calloc(1, sizeof *w);
    if (!w) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    w->m = tfc_model_from_string(p->yaml, p->yaml_len, p->path, err);
    w->be = w->m ? tfc_backend_open(p->has_device ? p->device : NULL, p->threads, err) : NULL;
    if (!w->be || tfc_model_bind_inference(w->m, w->be, batch, err)) {
        worker_free(w);
        return NULL;
    }
    w->bound = batch;
    if (p->params)
        w->be->ops->upload(w->be, tfc_model_params(w->m), p->params, (size_t)p->nparams * 4);
    return w;
}

/* Binds w for `batch` examples (the old buffers go) and uploads the parameters again. */
static tfc_status worker_rebind(tfc_predictor *p, worker *w, int batch, tfc_error *err)
{
    tfc_status s = tfc_model_bind_inference(w->m, w->be, batch, err);
    if (s) {
        w->bound = 0;
        return s;
    }
    w->bound = batch;
    w->be->ops->upload(w->be, tfc_model_params(w->m), p->params, (size_t)p->nparams * 4);
    return TFC_OK;
}

/* Whether libgomp's wait policy, read from OMP_WAIT_POLICY when it loaded, is what `spin`
 * asks for; else writes the error. */
static int spin_matches(int spin, char *err, size_t err_size)
{
    if (spin == TFC_SPIN_PROCESS) return 1;
    if (spin != TFC_SPIN_ON && spin != TFC_SPIN_OFF) {
        if (err && err_size)
            snprintf(err, err_size, "tfc_predictor_open: options.spin is %d; expected "
                     "TFC_SPIN_PROCESS (0), TFC_SPIN_ON (1) or TFC_SPIN_OFF (2)", spin);
        return 0;
    }
    const char *v = getenv("OMP_WAIT_POLICY");
    const int passive = v && !strcasecmp(v, "passive");
    if (passive == (spin == TFC_SPIN_OFF)) return 1;
    if (err && err_size)
        snprintf(err, err_size, "tfc_predictor_open: options.spin %s needs OMP_WAIT_POLICY=%s "
                 "in the environment when the program starts (OpenMP reads it once, when it "
                 "loads; it is %s%s%s)", spin == TFC_SPIN_OFF ? "off" : "on",
                 spin == TFC_SPIN_OFF ? "passive" : "active", v ? "'" : "", v ? v : "unset",
                 v ? "'" : "");
    return 0;
}

/* The shapes tfc_predictor_shape reports: for a model of variable length, the axes that
 * differ between max_length and one step less are -1 (the input's first, an output's time
 * axis). The model is left at max_length. */
static tfc_status axes(tfc_predictor *p, tfc_model *m, tfc_error *e)
{
    p->in_shape = *tfc_model_input_shape(m);
    p->ninputs = tfc_model_ninputs(m);
    p->noutputs = tfc_model_noutputs(m);
    for (int k = 0; k < p->noutputs; k++) {
        p->out_shapes[k] = *tfc_model_output_shape_at(m, k);
        snprintf(p->out_names[k], sizeof p->out_names[k], "%s", tfc_model_output_name(m, k));
    }
    for (int k = 0; k < p->ninputs; k++) {
        p->in_shapes[k] = *tfc_model_input_shape_at(m, k);
        p->in_dtypes[k] = tfc_model_input_dtype_at(m, k);
        snprintf(p->in_names[k], sizeof p->in_names[k], "%s", tfc_model_input_name(m, k));
    }
    p->out_shape = p->out_shapes[0];
    const int64_t max = tfc_model_max_length(m);
    p->max_length = max;
    if (max < 2) return TFC_OK;
    tfc_status s = tfc_model_set_length(m, max - 1, e);
    for (int k = 0; !s && k < p->noutputs; k++)
        for (int i = 0; i < p->out_shapes[k].ndim; i++)
            if (tfc_model_output_shape_at(m, k)->dim[i] != p->out_shapes[k].dim[i])
                p->out_shapes[k].dim[i] = -1;
    p->in_shape.dim[0] = p->in_shapes[0].dim[0] = -1;
    p->out_shape = p->out_shapes[0];
    return s ? s : tfc_model_set_length(m, max, e);
}

tfc_predictor *tfc_predictor_open(const char *model_yaml, const char *weights_file,
                                  const char *device, char *err, size_t err_size)
{
    return tfc_predictor_open_options(model_yaml, weights_file, device, NULL, err, err_size);
}

tfc_predictor *tfc_predictor_open_options(const char *model_yaml, const char *weights_file,
                                          const char *device,
                                          const tfc_predictor_options *options, char *err,
                                          size_t err_size)
{
    const tfc_predictor_options none = {0}, *o = options ? options : &none;
    if (o->threads < 0) {
        if (err && err_size)
            snprintf(err, err_size, "tfc_predictor_open: options.threads is %d; expected 0 "
                     "(every core) or more", o->threads);
        return NULL;
    }
    if (!spin_matches(o->spin, err, err_size)) return NULL;
    if (!model_yaml || !weights_file) {
        fail(err, err_size, "tfc_predictor_open: the model file and the weights file are needed "
                            "(NULL given)");
        return NULL;
    }
    if (device && strlen(device) >= sizeof ((tfc_predictor *)0)->device) {
        fail(err, err_size, "tfc_predictor_open: device name too long");
        return NULL;
    }
    tfc_error e;
    tfc_error_clear(&e);
    tfc_predictor *p = calloc(1, sizeof *p);
    if (!p) {
        fail(err, err_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->threads = o->threads;
    snprintf(p->path, sizeof p->path, "%s", model_yaml);
    if (device) {
        snprintf(p->device, sizeof p->device, "%s", device);
        p->has_device = 1;
    }
    tfc_status s = tfc_file_read_all(model_yaml, 64u << 20, &p->yaml, &p->yaml_len, &e);
    worker *w = s ? NULL : worker_create(p, 1, &e);
    if (w && w->be->device >= 0 && p->threads) {
        s = tfc_error_set(&e, TFC_ERR_USAGE, "tfc_predictor_open: options.threads is %d, but "
                          "the device is a GPU (threads are the CPU's; give 0)", p->threads);
        worker_free(w);
        w = NULL;
    }
    if (w) {
        p->all = p->idle = w;
        p->named = w->m;
        s = tfc_model_load_weights(w->m, weights_file, NULL, &e);
        p->nparams = tfc_model_param_count(w->m);
        p->params = s ? NULL : malloc((size_t)(p->nparams ? p->nparams : 1) * 4);
        if (!s && !p->params) s = tfc_error_set(&e, TFC_ERR_NOMEM, "out of memory");
        if (!s)
            w->be->ops->download(w->be, p->params, tfc_model_params(w->m),
                                 (size_t)p->nparams * 4);
        p->in_dtype = tfc_model_input_dtype(w->m);
        p->pass = tfc_model_inference_pass(w->m, w->be->device < 0);
        if (!s) s = axes(p, w->m, &e);
    }
    if (!w || s) {
        report(&e, err, err_size);
        tfc_predictor_close(p);
        return NULL;
    }
    return p;
}

int tfc_predictor_inputs(const tfc_predictor *p) { return p ? p->ninputs : -1; }

int tfc_predictor_input(const tfc_predictor *p, int k, int64_t dims[8], const char **dtype,
                        const char **name)
{
    if (!p || !dims || k < 0 || k >= p->ninputs) return -1;
    const tfc_shape *s = &p->in_shapes[k];
    for (int i = 0; i < 8; i++) dims[i] = i < s->ndim ? s->dim[i] : 0;
    if (dtype) *dtype = p->in_dtypes[k] == TFC_I32 ? "int32" : "float32";
    if (name) *name = p->in_names[k];
    return s->ndim;
}

int tfc_predictor_outputs(const tfc_predictor *p) { return p ? p->noutputs : -1; }

int tfc_predictor_output(const tfc_predictor *p, int k, int64_t dims[8], const char **dtype,
                         const char **name)
{
    if (!p || !dims || k < 0 || k >= p->noutputs) return -1;
    const tfc_shape *s = &p->out_shapes[k];
    for (int i = 0; i < 8; i++) dims[i] = i < s->ndim ? s->dim[i] : 0;
    if (dtype) *dtype = "float32";
    if (name) *name = p->out_names[k];
    return s->ndim;
}

int tfc_predictor_shape(const tfc_predictor *p, int which, int64_t dims[8], const char **dtype)
{
    if (!p || !dims || (which != 0 && which != 1)) return -1;
    const tfc_shape *s = which == 0 ? &p->in_shape : &p->out_shape;
    for (int i = 0; i < 8; i++) dims[i] = i < s->ndim ? s->dim[i] : 0;
    if (dtype) *dtype = which == 0 && p->in_dtype == TFC_I32 ? "int32" : "float32";
    return s->ndim;
}

int64_t tfc_predictor_max_length(const tfc_predictor *p)
{
    return p ? p->max_length : -1;
}

const char *tfc_predictor_class_name(const tfc_predictor *p, int64_t index)
{
    int n = 0;
    const char *const *names = p ? tfc_model_class_names(p->named, &n) : NULL;
    return names && index >= 0 && index < n ? names[index] : NULL;
}

/* An idle worker for `batch` examples: one bound for that many already, else the idle one
 * bound for the most (to be rebound), else none (the caller creates one). */
static worker *borrow(tfc_predictor *p, int batch)
{
    pthread_mutex_lock(&p->lock);
    worker **best = NULL;
    for (worker **at = &p->idle; *at; at = &(*at)->next)
        if (!best || ((*best)->bound < batch && (*at)->bound > (*best)->bound) ||
            ((*at)->bound >= batch && (*at)->bound < (*best)->bound))
            best = at;
    worker *w = best ? *best : NULL;
    if (w) *best = w->next;
    pthread_mutex_unlock(&p->lock);
    return w;
}

static void give_back(tfc_predictor *p, worker *w, int is_new)
{
    pthread_mutex_lock(&p->lock);
    if (is_new) {
        w->all = p->all;
        p->all = w;
    }
    w->next = p->idle;
    p->idle = w;
    pthread_mutex_unlock(&p->lock);
}

/* A worker bound for `batch` examples at least, at `length` (0: the input's fixed length, or
 * max_length, where workers are bound): borrowed, or made (*is_new). */
static tfc_status take(tfc_predictor *p, int batch, int64_t length, worker **out, int *is_new,
                       tfc_error *e)
{
    worker *w = borrow(p, batch);
    tfc_status s = TFC_OK;
    *is_new = !w;
    if (!w) {
        w = worker_create(p, batch, e);
        if (!w) s = e->code ? e->code : TFC_ERR_NOMEM;
    } else if (w->bound < batch) {
        s = worker_rebind(p, w, batch, e);
    }
    if (!s && (length || tfc_model_max_length(w->m)))
        s = tfc_model_set_length(w->m, length ? length : tfc_model_max_length(w->m), e);
    *out = w;
    return s;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The median of the k values at v[0], v[step], ... (k <= DUEL / 2). */
static long long median(const long long *v, int k, int step)
{
    long long a[DUEL / 2];
    for (int i = 0; i < k; i++) { /* insertion sort: k is small */
        long long x = v[i * step];
        int j = i;
        for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
    return a[k / 2];
}

/* w's race for `batch` (a fresh one, in place of the oldest, when it has none). */
static race *race_for(worker *w, int batch)
{
    for (int i = 0; i < RACES; i++)
        if (w->races[i].batch == batch) return &w->races[i];
    race *r = &w->races[w->next_race];
    w->next_race = (w->next_race + 1) % RACES;
    memset(r, 0, sizeof *r);
    r->batch = batch;
    return r;
}

/* One pass of cnt examples on w, from example `at` of each input into example `at` of each
 * output: on its team, or with lone on the calling thread alone. */
static tfc_status pass(worker *w, const void *const *inputs, int64_t at, int cnt,
                       float *const *outputs, int lone, tfc_error *e)
{
    const void *in[TFC_MODEL_MAX_INPUTS];
    for (int k = 0; k < tfc_model_ninputs(w->m); k++)
        in[k] = (const char *)inputs[k] +
                at * tfc_shape_numel(tfc_model_input_shape_at(w->m, k)) * 4;
    if (lone) tfc_cpu_team_cap(1);
    tfc_status s = tfc_model_forward_inputs(w->m, in, cnt, 0, 0, 0, e);
    for (int k = 0; !s && k < tfc_model_noutputs(w->m); k++) {
        const int64_t per = tfc_shape_numel(tfc_model_output_shape_at(w->m, k));
        tfc_model_get_output_at(w->m, k, outputs[k] + at * per);
    }
    if (lone) tfc_cpu_team_cap(0);
    return s;
}

static _Atomic long long side_passes; /* tfc_predictor_side_passes */

long long tfc_predictor_side_passes(void)
{
    return atomic_load(&side_passes);
}

/* The passes of the crew's job claimed on w, each on the calling thread alone, until none is
 * left or one before it has failed. A failure is kept where it is the first pass's to fail:
 * the passes are claimed in order, and each one before it runs, so the call fails as one
 * pass at a time would have. */
static void claim(crew *c, worker *w)
{
    tfc_error e;
    for (;;) {
        const int64_t at = atomic_fetch_add(&c->next, c->batch);
        if (at >= c->n || at > atomic_load(&c->failed_at)) return;
        const int cnt = c->n - at < c->batch ? (int)(c->n - at) : c->batch;
        atomic_fetch_add_explicit(&side_passes, 1, memory_order_relaxed);
        tfc_error_clear(&e);
        if (!pass(w, c->inputs, at, cnt, c->outputs, 1, &e))
            continue;
        pthread_mutex_lock(&c->lock);
        if (at < atomic_load(&c->failed_at)) {
            atomic_store(&c->failed_at, at);
            c->err = e;
        }
        pthread_mutex_unlock(&c->lock);
        return;
    }
}

/* A crew thread: each job's passes on a worker of its own. One that cannot get a worker
 * (out of memory) leaves the passes to the others. */
static void *crew_main(void *arg)
{
    tfc_predictor *p = arg;
    crew *c = p->crew;
    for (long long seen = 0;;) {
        pthread_mutex_lock(&c->lock);
        while (!c->quit && c->job == seen) pthread_cond_wait(&c->go, &c->lock);
        if (c->quit) {
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        seen = c->job;
        pthread_mutex_unlock(&c->lock);
        worker *w = NULL;
        int is_new = 0;
        tfc_error e;
        tfc_error_clear(&e);
        const tfc_status s = take(p, c->batch, c->length, &w, &is_new, &e);
        if (!s) {
            omp_set_num_threads(w->be->threads); /* as the caller's: OpenBLAS reads it */
            claim(c, w);
        }
        if (w) give_back(p, w, is_new);
        pthread_mutex_lock(&c->lock);
        if (--c->busy == 0) pthread_cond_signal(&c->done);
        pthread_mutex_unlock(&c->lock);
    }
}

/* p's crew of `threads` - 1 threads, started at the first call; NULL where none could be. */
static crew *crew_get(tfc_predictor *p, int threads)
{
    if (p->crew) return p->crew->count ? p->crew : NULL;
    crew *c = calloc(1, sizeof *c);
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    if (!c || !t) {
        free(c), free(t);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->done, NULL);
    c->threads = t;
    p->crew = c;
    for (int i = 0; i < threads - 1; i++)
        if (pthread_create(&c->threads[c->count], NULL, crew_main, p) == 0) c->count++;
    return c->count ? c : NULL;
}

static void crew_end(crew *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->quit = 1;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->count; i++) pthread_join(c->threads[i], NULL);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->lock);
    free(c->threads);
    free(c);
}

/* n examples in passes of `batch` side by side: the caller's on w, the crew's on theirs. */
static tfc_status side_by_side(crew *c, worker *w, const void *const *inputs, int64_t n,
                               int64_t length, int batch, float *const *outputs, tfc_error *e)
{
    pthread_mutex_lock(&c->lock);
    c->inputs = inputs, c->outputs = outputs;
    c->n = n, c->length = length;
    c->batch = batch;
    atomic_store(&c->next, 0);
    atomic_store(&c->failed_at, INT64_MAX);
    c->busy = c->count;
    c->job++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->lock);
    claim(c, w);
    pthread_mutex_lock(&c->lock);
    while (c->busy) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
    if (atomic_load(&c->failed_at) == INT64_MAX) return TFC_OK;
    *e = c->err;
    return e->code ? e->code : TFC_ERR_USAGE;
}

/* tfc_predictor_run_outputs, its arguments checked. */
static int run(tfc_predictor *p, const void *const *inputs, int64_t n, int64_t length,
               float *const *outputs, char *err, size_t err_size)
{
    if (n < 1) {
        if (err && err_size)
            snprintf(err, err_size, "tfc_predictor_run: n is %lld; at least 1 example is needed",
                     (long long)n);
        return -1;
    }
    int batch = n < p->pass ? (int)n : p->pass;
    const int saved = omp_get_max_threads(); /* creating a CPU backend sets it too */
    tfc_error e;
    tfc_error_clear(&e);
    worker *w = NULL;
    int is_new = 0;
    tfc_status s = take(p, batch, length, &w, &is_new, &e);
    const int cpu = w && w->be->device < 0, turn = cpu && w->be->threads > 1;
    if (turn) pthread_mutex_lock(&cpu_turn);
    /* OpenBLAS and oneDNN take the calling thread's count where tfc does not pass one */
    if (cpu) omp_set_num_threads(w->be->threads);
    /* as many passes as threads or more: side by side (crew); one: raced (race) */
    crew *c = !s && turn && n > (int64_t)(w->be->threads - 1) * batch &&
                      tfc_model_memory(w->m)->arena <= SIDE_MAX
                  ? crew_get(p, w->be->threads)
                  : NULL;
    if (c) {
        s = side_by_side(c, w, inputs, n, length, batch, outputs, &e);
    } else if (!s && turn && n == batch) {
        race *r = race_for(w, batch);
        const long long k = r->calls - WARM;
        const int at = k < DUEL ? -1 : (int)((k - DUEL) % EXPLORE) - (EXPLORE - BURST);
        const int lone = k < 0 ? 0 : k < DUEL ? (int)(k & 1) : at >= 0 ? !r->best : r->best;
        const long long t0 = k >= 0 ? now_ns() : 0;
        s = pass(w, inputs, 0, batch, outputs, lone, &e);
        if (!s && k >= 0) {
            const long long ns = now_ns() - t0;
            if (k < DUEL) {
                r->t[k] = ns;
                if (k == DUEL - 1)
                    for (int way = 0; way < 2; way++)
                        r->mean[way] = (double)median(r->t + way, DUEL / 2, 2);
            } else if (at >= 0) { /* the burst's */
                r->t[at] = ns;
                if (at == BURST - 1) r->mean[lone] = (double)median(r->t + 2, BURST - 2, 1);
            } else {
                const double m = r->mean[lone], x = ns < 2 * m ? (double)ns : 2 * m;
                r->mean[lone] = m + (x - m) / 16;
            }
            if (k >= DUEL - 1) r->best = r->mean[1] < r->mean[0];
        }
        if (!s) r->calls++;
    } else {
        for (int64_t done = 0; !s && done < n; done += batch) {
            int cnt = n - done < batch ? (int)(n - done) : batch;
            s = pass(w, inputs, done, cnt, outputs, 0, &e);
        }
    }
    if (omp_get_max_threads() != saved) omp_set_num_threads(saved);
    if (turn) pthread_mutex_unlock(&cpu_turn);
    if (w) give_back(p, w, is_new);
    if (s) {
        report(&e, err, err_size);
        return -1;
    }
    return 0;
}

int tfc_predictor_run_outputs(tfc_predictor *p, const void *const *inputs, int ninputs,
                              int64_t n, int64_t length, float *const *outputs, int noutputs,
                              char *err, size_t err_size)
{
    if (!p) return fail(err, err_size, "tfc_predictor_run: no predictor (NULL)");
    if (!inputs || !outputs)
        return fail(err, err_size, "tfc_predictor_run: input and output are needed (NULL given)");
    if (noutputs != p->noutputs) {
        if (err && err_size)
            snprintf(err, err_size, "tfc_predictor_run: the model gives %d output%s, given %d "
                     "buffer%s%s", p->noutputs, p->noutputs == 1 ? "" : "s", noutputs,
                     noutputs == 1 ? "" : "s",
                     p->noutputs > 1 ? " (tfc_predictor_run_outputs, one buffer each)" : "");
        return -1;
    }
    for (int k = 0; k < noutputs; k++)
        if (!outputs[k]) {
            if (err && err_size)
                snprintf(err, err_size, "tfc_predictor_run: output %d ('%s') is NULL", k,
                         p->out_names[k]);
            return -1;
        }
    if (ninputs != p->ninputs) {
        if (err && err_size)
            snprintf(err, err_size, "tfc_predictor_run: the model takes %d input%s, given %d%s",
                     p->ninputs, p->ninputs == 1 ? "" : "s", ninputs,
                     p->ninputs > 1 ? " (tfc_predictor_run_inputs, one buffer each)" : "");
        return -1;
    }
    for (int k = 0; k < ninputs; k++)
        if (!inputs[k]) {
            if (err && err_size)
                snprintf(err, err_size, "tfc_predictor_run: input %d ('%s') is NULL", k,
                         p->in_names[k]);
            return -1;
        }
    return run(p, inputs, n, length, outputs, err, err_size);
}

int tfc_predictor_run_inputs(tfc_predictor *p, const void *const *inputs, int ninputs,
                             int64_t n, int64_t length, float *output, char *err,
                             size_t err_size)
{
    if (!output)
        return fail(err, err_size, "tfc_predictor_run: input and output are needed (NULL given)");
    float *out[1] = {output};
    return tfc_predictor_run_outputs(p, inputs, ninputs, n, length, out, 1, err, err_size);
}

int tfc_predictor_run_length(tfc_predictor *p, const void *input, int64_t n, int64_t length,
                             float *output, char *err, size_t err_size)
{
    const void *in[1] = {input};
    return tfc_predictor_run_inputs(p, in, 1, n, length, output, err, err_size);
}

int tfc_predictor_run(tfc_predictor *p, const void *input, int64_t n, float *output,
                      char *err, size_t err_size)
{
    return tfc_predictor_run_length(p, input, n, 0, output, err, err_size);
}

void tfc_predictor_close(tfc_predictor *p)
{
    if (!p) return;
    crew_end(p->crew);
    for (worker *w = p->all, *next; w; w = next) {
        next = w->all;
        worker_free(w);
    }
    pthread_mutex_destroy(&p->lock);
    free(p->params);
    free(p->yaml);
    free(p);
}

const char *tfc_version(void)
{
    return TFC_VERSION;
}
