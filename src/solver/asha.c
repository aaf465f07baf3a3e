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
