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
    /* rungs max_iter·eta^-k down to min_iter, so every promotion multiplies the iterations
     * by eta, the last one included (Li et al.'s r·eta^k with r = max_iter·eta^-s) */
    int smax = (int)floor(log((double)max_iter / (double)min_iter) / log(eta) + 1e-9);
    if (smax > TFC_ASHA_MAX_RUNGS)
        return tfc_error_set(err, TFC_ERR_USAGE, "more than %d rungs between --min-iter %lld "
                             "and max_iter %lld", TFC_ASHA_MAX_RUNGS, (long long)min_iter,
                             (long long)max_iter);
    for (int k = 0; k < smax; k++) {
        int64_t it = (int64_t)llround((double)max_iter * pow(eta, (double)(k - smax)));
        if (it < 1) it = 1;
        if (a->nrungs == 0 || it > a->rung_iter[a->nrungs - 1]) a->rung_iter[a->nrungs++] = it;
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

/* A finite grid's end: every trial started, none running, none at the top. ASHA's rule alone
 * (floor(n_k / eta) of a rung go on) leaves a rung of fewer than eta trials where it is, so a
 * grid smaller than eta^nrungs would stop every trial below max_iter; the best of the highest
 * rung reached (finite value, not promoted out of it) goes on instead. 1 with the job (as
 * tfc_asha_next), or 0 when a trial reached the top or none can go on. */
static int finish_one(tfc_asha *a, int *trial, int *rung)
{
    int high = -1;
    for (int t = 0; t < a->ntrials; t++) {
        if (a->busy[t]) return 0;
        if (a->reached[t] > high) high = a->reached[t];
    }
    if (high < 0 || high >= a->nrungs) return 0;
    int best = -1;
    for (int t = 0; t < a->ntrials; t++) {
        size_t at = (size_t)t * (size_t)(a->nrungs + 1) + (size_t)high;
        if (a->reached[t] < high || a->promoted[at] || !isfinite(a->value[at])) continue;
        if (best < 0 || ranks_before(a, high, t, best)) best = t;
    }
    if (best < 0) return 0;
    a->promoted[(size_t)best * (size_t)(a->nrungs + 1) + (size_t)high] = 1;
    a->busy[best] = 1;
    *trial = best;
    *rung = high + 1;
    return 1;
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
    return finish_one(a, trial, rung);
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

/* ---- Hyperband --------------------------------------------------------------------------- */

tfc_status tfc_hyperband_init(tfc_hyperband *h, int ntrials, int64_t min_iter, int64_t max_iter,
                              double eta, int higher_is_better, tfc_error *err)
{
    memset(h, 0, sizeof *h);
    if (min_iter < 1 || min_iter >= max_iter)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "--min-iter %lld: expected 1 <= min-iter < max_iter (%lld)",
                             (long long)min_iter, (long long)max_iter);
    if (!(eta > 1) || !isfinite(eta))
        return tfc_error_set(err, TFC_ERR_USAGE, "--eta %g: expected a number above 1", eta);
    double R = (double)max_iter / (double)min_iter;
    int smax = (int)floor(log(R) / log(eta) + 1e-9);
    if (smax > TFC_ASHA_MAX_RUNGS)
        return tfc_error_set(err, TFC_ERR_USAGE, "more than %d stages", TFC_ASHA_MAX_RUNGS);
    h->smax = smax;
    h->ntrials = ntrials;
    h->eta = eta;
    h->higher_is_better = higher_is_better;
    for (int j = 0; j <= smax; j++)
        h->stage_iter[j] = (int64_t)llround((double)max_iter * pow(eta, (double)(j - smax)));
    h->stage_iter[smax] = max_iter;
    size_t n = (size_t)(ntrials > 0 ? ntrials : 1);
    h->bracket = malloc(n * sizeof *h->bracket);
    h->want = malloc(n * sizeof *h->want);
    h->have = malloc(n * sizeof *h->have);
    h->value = calloc(n * (size_t)(smax + 1), sizeof *h->value);
    h->busy = calloc(n, 1);
    if (!h->bracket || !h->want || !h->have || !h->value || !h->busy) {
        tfc_hyperband_free(h);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    int t = 0;
    for (int s = smax; s >= 0; s--) {
        int b = h->nbrackets++;
        double want = ceil((double)(smax + 1) / (double)(s + 1) * pow(eta, (double)s) - 1e-9);
        int count = (int)want < ntrials - t ? (int)want : ntrials - t;
        h->first[b] = t;
        h->count[b] = count;
        h->level[b] = smax - s;
        for (int i = 0; i < count; i++, t++) {
            h->bracket[t] = b;
            h->want[t] = smax - s;
            h->have[t] = smax - s - 1;
        }
    }
    for (; t < ntrials; t++) h->bracket[t] = -1, h->want[t] = -1, h->have[t] = -1;
    return TFC_OK;
}

/* 1 when trial u ranks before trial w at stage j. */
static int hb_before(const tfc_hyperband *h, int j, int u, int w)
{
    double x = h->value[(size_t)u * (size_t)(h->smax + 1) + (size_t)j];
    double y = h->value[(size_t)w * (size_t)(h->smax + 1) + (size_t)j];
    int fx = isfinite(x), fy = isfinite(y);
    if (fx != fy) return fx;
    if (fx && x != y) return h->higher_is_better ? x > y : x < y;
    return u < w;
}

/* When every trial of bracket b's stage has its value: the best floor(n / eta) go on (one at
 * least, see below). */
static void hb_promote(tfc_hyperband *h, int b)
{
    int L = h->level[b];
    if (L >= h->smax) return;
    int n = 0, nfinite = 0;
    for (int t = h->first[b]; t < h->first[b] + h->count[b]; t++) {
        if (h->want[t] < L) continue; /* left at an earlier stage */
        if (h->have[t] < L || h->busy[t]) return; /* not all in yet */
        n++;
        nfinite += isfinite(h->value[(size_t)t * (size_t)(h->smax + 1) + (size_t)L]) != 0;
    }
    /* a bracket the grid cut short (fewer trials than Li et al.'s n) keeps one trial with a
     * finite value, so it still ends with one trained to max_iter */
    int keep = (int)floor((double)n / h->eta);
    if (keep < 1 && nfinite > 0) keep = 1;
    for (int t = h->first[b]; t < h->first[b] + h->count[b]; t++) {
        if (h->want[t] < L) continue;
        int better = 0;
        for (int u = h->first[b]; u < h->first[b] + h->count[b]; u++)
            if (u != t && h->want[u] >= L && hb_before(h, L, u, t)) better++;
        if (better < keep) h->want[t] = L + 1;
    }
    h->level[b] = L + 1;
}

int tfc_hyperband_next(tfc_hyperband *h, int *trial, int *stage)
{
    for (int b = 0; b < h->nbrackets; b++) {
        for (int pass = 0; pass < 2; pass++) {
            for (int t = h->first[b]; t < h->first[b] + h->count[b]; t++)
                if (h->want[t] > h->have[t] && !h->busy[t]) {
                    h->busy[t] = 1;
                    *trial = t;
                    *stage = h->want[t];
                    return 1;
                }
            if (pass == 0) hb_promote(h, b);
        }
    }
    return 0;
}

void tfc_hyperband_report(tfc_hyperband *h, int trial, int stage, double value)
{
    h->value[(size_t)trial * (size_t)(h->smax + 1) + (size_t)stage] = value;
    if (stage > h->have[trial]) h->have[trial] = stage;
    h->busy[trial] = 0;
}

void tfc_hyperband_replay_job(tfc_hyperband *h, int trial, int stage)
{
    /* the bracket's level is not moved: hb_promote decides the same promotions again, all
     * of them, once the stage's values are in (a log cut between two promotions loses none) */
    if (h->bracket[trial] >= 0 && stage > h->want[trial]) h->want[trial] = stage;
}

void tfc_hyperband_free(tfc_hyperband *h)
{
    free(h->bracket);
    free(h->want);
    free(h->have);
    free(h->value);
    free(h->busy);
    memset(h, 0, sizeof *h);
}
