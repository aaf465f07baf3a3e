/* ASHA's bookkeeping (asha.h): rungs, per-trial values, promotions and the get_job rule. */
#include "solver/asha.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

tfc_status tfc_asha_init(tfc_asha *a, int ntrials, int64_t min_iter, int64_t max_iter, double eta,
                         int higher_is_better, tfc_error *err)
{
    memset(a, 0, sizeof *a);
    if (min_iter < 1 || min_iter >= max_iter)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "--min-iter %lld: expected 1 <= min-iter < max_iter (%lld)",
                             (long long)min_iter, (long long)max_iter);
    if (!(eta > 1) || !isfinite(eta))
        return tfc_error_set(err, TFC_ERR_USAGE, "--eta %g: expected a number above 1", eta);
    double r = (double)min_iter;
    while (r < (double)max_iter) {
        if (a->nrungs == TFC_ASHA_MAX_RUNGS)
            return tfc_error_set(err, TFC_ERR_USAGE, "more than %d rungs between --min-iter %lld "
                                 "and max_iter %lld", TFC_ASHA_MAX_RUNGS, (long long)min_iter,
                                 (long long)max_iter);
        int64_t it = (int64_t)llround(r);
        if (a->nrungs == 0 || it > a->rung_iter[a->nrungs - 1]) a->rung_iter[a->nrungs++] = it;
        r *= eta;
    }
    a->rung_iter[a->nrungs] = max_iter;
    a->ntrials = ntrials;
    a->eta = eta;
    a->higher_is_better = higher_is_better;
    size_t n = (size_t)(ntrials > 0 ? ntrials : 1);
    a->reached = malloc(n * sizeof *a->reached);
    a->value = calloc(n * (size_t)(a->nrungs + 1), sizeof *a->value);
    a->promoted = calloc(n * (size_t)(a->nrungs + 1), 1);
    a->busy = calloc(n, 1);
    if (!a->reached || !a->value || !a->promoted || !a->busy) {
        tfc_asha_free(a);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int t = 0; t < ntrials; t++) a->reached[t] = -1;
    return TFC_OK;
}

/* 1 when trial s ranks before trial t at rung k (better value, then lower index). */
static int ranks_before(const tfc_asha *a, int k, int s, int t)
{
    double u = a->value[(size_t)s * (size_t)(a->nrungs + 1) + (size_t)k];
    double v = a->value[(size_t)t * (size_t)(a->nrungs + 1) + (size_t)k];
    int fu = isfinite(u), fv = isfinite(v);
    if (fu != fv) return fu;
    if (fu && u != v) return a->higher_is_better ? u > v : u < v;
    return s < t;
}

int tfc_asha_next(tfc_asha *a, int *trial, int *rung)
{
    for (int k = a->nrungs - 1; k >= 0; k--) {
        int n = 0;
        for (int t = 0; t < a->ntrials; t++) n += a->reached[t] >= k;
        int top = (int)floor((double)n / a->eta);
        /* the top `top` trials of rung k, in rank order: the first not yet promoted */
        for (int place = 0; place < top; place++) {
            int best = -1;
            for (int t = 0; t < a->ntrials; t++) {
                if (a->reached[t] < k) continue;
                int better = 0; /* trials ranking before t */
                for (int s = 0; s < a->ntrials; s++)
                    if (s != t && a->reached[s] >= k && ranks_before(a, k, s, t)) better++;
                if (better == place) {
                    best = t;
                    break;
                }
            }
            if (best < 0) break;
            unsigned char *p = &a->promoted[(size_t)best * (size_t)(a->nrungs + 1) + (size_t)k];
            if (*p || a->busy[best]) continue;
            *p = 1;
            a->busy[best] = 1;
            *trial = best;
            *rung = k + 1;
            return 1;
        }
    }
    if (a->next_new < a->ntrials) {
        *trial = a->next_new++;
        a->busy[*trial] = 1;
        *rung = 0;
        return 1;
    }
    return 0;
}

void tfc_asha_report(tfc_asha *a, int trial, int rung, double value)
{
    a->value[(size_t)trial * (size_t)(a->nrungs + 1) + (size_t)rung] = value;
    if (rung > a->reached[trial]) a->reached[trial] = rung;
    a->busy[trial] = 0;
}

void tfc_asha_release(tfc_asha *a, int trial)
{
    a->busy[trial] = 0;
}

void tfc_asha_replay_job(tfc_asha *a, int trial, int rung)
{
    if (rung == 0) {
        if (trial >= a->next_new) a->next_new = trial + 1;
    } else {
        a->promoted[(size_t)trial * (size_t)(a->nrungs + 1) + (size_t)(rung - 1)] = 1;
    }
}

void tfc_asha_free(tfc_asha *a)
{
    free(a->reached);
    free(a->value);
    free(a->promoted);
    free(a->busy);
    memset(a, 0, sizeof *a);
}

/* ---- median pruning ----------------------------------------------------------------------- */

tfc_status tfc_pruner_init(tfc_pruner *m, int ntrials, int64_t interval, int64_t max_iter,
                           int warmup, int startup, int higher_is_better, tfc_error *err)
{
    memset(m, 0, sizeof *m);
    if (interval < 1 || max_iter < 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "median pruning steps at the test evaluations: "
                                                 "the solver needs test_interval > 0");
    int64_t n = (max_iter + interval - 1) / interval;
    if (n > 100000)
        return tfc_error_set(err, TFC_ERR_USAGE, "%lld test evaluations per trial are too many "
                             "steps", (long long)n);
    m->nsteps = (int)n;
    m->ntrials = ntrials;
    m->warmup = warmup;
    m->startup = startup;
    m->higher_is_better = higher_is_better;
    size_t t = (size_t)(ntrials > 0 ? ntrials : 1);
    m->step_iter = malloc((size_t)m->nsteps * sizeof *m->step_iter);
    m->value = malloc(t * (size_t)m->nsteps * sizeof *m->value);
    m->next_step = calloc(t, sizeof *m->next_step);
    m->done = calloc(t, 1);
    m->busy = calloc(t, 1);
    if (!m->step_iter || !m->value || !m->next_step || !m->done || !m->busy) {
        tfc_pruner_free(m);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int s = 0; s < m->nsteps; s++) {
        int64_t it = (int64_t)(s + 1) * interval;
        m->step_iter[s] = it < max_iter ? it : max_iter;
    }
    for (size_t i = 0; i < t * (size_t)m->nsteps; i++) m->value[i] = NAN;
    return TFC_OK;
}

int tfc_pruner_next(tfc_pruner *m, int *trial, int *step)
{
    for (int t = 0; t < m->next_new; t++)
        if (!m->done[t] && !m->busy[t]) {
            m->busy[t] = 1;
            *trial = t;
            *step = m->next_step[t];
            return 1;
        }
    if (m->next_new < m->ntrials) {
        *trial = m->next_new++;
        m->busy[*trial] = 1;
        *step = 0;
        return 1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void tfc_pruner_report(tfc_pruner *m, int trial, int step, double value)
{
    m->busy[trial] = 0;
    double *row = m->value + (size_t)trial * (size_t)m->nsteps;
    row[step] = value;
    m->next_step[trial] = step + 1;
    if (step == m->nsteps - 1) {
        m->done[trial] = 1;
        m->ncompleted++;
        return;
    }
    if (!isfinite(value)) {
        m->done[trial] = 2;
        return;
    }
    if (step < m->warmup || m->ncompleted < m->startup || m->ncompleted == 0) return;
    /* the completed trials' values at this step, their median */
    double *v = malloc((size_t)m->ncompleted * sizeof *v);
    if (!v) return;
    int n = 0;
    for (int t = 0; t < m->ntrials; t++) {
        double x = m->value[(size_t)t * (size_t)m->nsteps + (size_t)step];
        if (m->done[t] == 1 && isfinite(x)) v[n++] = x;
    }
    if (n > 0) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        double pos = 0.5 * (n - 1), median = v[(int)pos];
        if (pos > (int)pos) median += (v[(int)pos + 1] - v[(int)pos]) * (pos - (int)pos);
        double best = row[0];
        for (int s = 1; s <= step; s++)
            if (isfinite(row[s]) && (!isfinite(best) || (m->higher_is_better ? row[s] > best
                                                                             : row[s] < best)))
                best = row[s];
        if (m->higher_is_better ? best < median : best > median) m->done[trial] = 2;
    }
    free(v);
}

void tfc_pruner_release(tfc_pruner *m, int trial)
{
    m->busy[trial] = 0;
}

void tfc_pruner_replay_job(tfc_pruner *m, int trial, int step)
{
    if (trial >= m->next_new) m->next_new = trial + 1;
    m->next_step[trial] = step;
}

void tfc_pruner_free(tfc_pruner *m)
{
    free(m->step_iter);
    free(m->value);
    free(m->next_step);
    free(m->done);
    free(m->busy);
    memset(m, 0, sizeof *m);
}
