/* The sweep schedulers (solver/asha.h) on scripted curves, worked by hand: ASHA against Li et
 * al. 2020's Algorithm 2 (rung sizes, the order of starts and promotions, the budget spent,
 * busy trials skipped, a replay of saved decisions reaching the same next job), and median
 * pruning against Optuna's MedianPruner rule (best so far against the interpolated median of
 * the completed trials at the same step, after warmup steps and startup trials). */
#include <math.h>
#include <string.h>

#include "solver/asha.h"
#include "testutil.h"

/* Rungs: max_iter · eta^-k down to min_iter, the top max_iter. */
static void test_rungs(void)
{
    tfc_asha a;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 4, 1, 100, 3, 1, &err), TFC_OK);
    /* s = floor(log3 100) = 4: 100/81, 100/27, 100/9, 100/3 rounded, then 100 */
    const int64_t want[] = {1, 4, 11, 33, 100};
    CU_ASSERT_EQUAL(a.nrungs, 4);
    for (int k = 0; k <= 4; k++) CU_ASSERT_EQUAL(a.rung_iter[k], want[k]);
    tfc_asha_free(&a);
    CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 4, 469, 4690, 3, 1, &err), TFC_OK);
    CU_ASSERT(a.nrungs == 2 && a.rung_iter[0] == 521 && a.rung_iter[1] == 1563 &&
              a.rung_iter[2] == 4690);
    tfc_asha_free(&a);
    CU_ASSERT_EQUAL(tfc_asha_init(&a, 4, 10, 10, 3, 1, &err), TFC_ERR_USAGE);
    CU_ASSERT_EQUAL(tfc_asha_init(&a, 4, 1, 10, 1, 1, &err), TFC_ERR_USAGE);
}

/* Nine trials, rungs 1 and 3, top 9, eta 3, one job at a time; the value at rung 0 is v0,
 * then v0 + 0.05 at rung 1 and v0 + 0.1 at the top (higher is better). By hand: 9 starts,
 * promotions t1 (after three values at rung 0, the best of floor(3/3) = 1), t3 (the best of
 * four once t3 reports), t5 (second of six), t3 again to the top (the best of the three at rung
 * 1); then every top-1/3 of each rung is promoted and nothing is left: 9 + 2·3 + 6 = 21
 * iterations of the full grid's 81. */
static const double v0[9] = {.5, .7, .6, .9, .1, .8, .3, .2, .4};
static const int want_jobs[][2] = {{0, 0}, {1, 0}, {2, 0}, {1, 1}, {3, 0}, {3, 1}, {4, 0},
                                   {5, 0}, {5, 1}, {3, 2}, {6, 0}, {7, 0}, {8, 0}};

static void test_sequential_sweep(void)
{
    tfc_asha a;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 9, 1, 9, 3, 1, &err), TFC_OK);
    CU_ASSERT(a.nrungs == 2 && a.rung_iter[0] == 1 && a.rung_iter[1] == 3 && a.rung_iter[2] == 9);
    int n = 0, t, k;
    int64_t spent = 0;
    while (tfc_asha_next(&a, &t, &k)) {
        CU_ASSERT_FATAL(n < 13);
        if (t != want_jobs[n][0] || k != want_jobs[n][1])
            printf("\njob %d: trial %d to rung %d, want trial %d to rung %d\n", n, t, k,
                   want_jobs[n][0], want_jobs[n][1]);
        CU_ASSERT(t == want_jobs[n][0] && k == want_jobs[n][1]);
        spent += a.rung_iter[k] - (k ? a.rung_iter[k - 1] : 0);
        tfc_asha_report(&a, t, k, v0[t] + 0.05 * k);
        n++;
    }
    CU_ASSERT_EQUAL(n, 13);
    CU_ASSERT_EQUAL(spent, 21);
    tfc_asha_free(&a);
}

/* A busy trial is not promoted: the next candidate (or a new trial) goes instead; lower is
 * better turns the order around; a non-finite value ranks last. */
static void test_busy_mode_and_nan(void)
{
    tfc_asha a;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 6, 1, 9, 3, 0, &err), TFC_OK);
    int t, k;
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == i && k == 0);
    }
    /* losses: t1 best, t2 NaN */
    tfc_asha_report(&a, 0, 0, 0.9);
    tfc_asha_report(&a, 2, 0, NAN);
    tfc_asha_report(&a, 1, 0, 0.3);
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == 1 && k == 1);
    /* t1 is running at rung 1; with six values at rung 0 the top two are t1 (busy, promoted)
     * and t0: t0 goes */
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == 3 && k == 0);
    tfc_asha_report(&a, 3, 0, 2.0);
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == 4 && k == 0);
    tfc_asha_report(&a, 4, 0, 1.5);
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == 5 && k == 0);
    tfc_asha_report(&a, 5, 0, 1.0);
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == 0 && k == 1);
    tfc_asha_free(&a);
}

/* Saved decisions replayed (starts, promotions, reports) give the next job the uninterrupted
 * sweep gave: after the first five jobs of test_sequential_sweep, job 5 (t3 to rung 1). */
static void test_replay(void)
{
    tfc_asha a;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 9, 1, 9, 3, 1, &err), TFC_OK);
    for (int n = 0; n < 5; n++) {
        int t = want_jobs[n][0], k = want_jobs[n][1];
        tfc_asha_replay_job(&a, t, k);
        tfc_asha_report(&a, t, k, v0[t] + 0.05 * k);
    }
    int t, k;
    CU_ASSERT(tfc_asha_next(&a, &t, &k) && t == want_jobs[5][0] && k == want_jobs[5][1]);
    tfc_asha_free(&a);
}

/* A grid smaller than eta^nrungs: six trials, rungs 1 and 3, top 9, values falling with the
 * trial's index. ASHA's rule promotes t0 (top 1 of three) and t1 (top 2 of six) to rung 1 and
 * no further (floor(2/3) = 0); with nothing left to start or run, the best at the highest rung
 * reached, t0, goes on to the top. A rung whose values are all non-finite sends none. */
static void test_finite_grid_finishes(void)
{
    static const double fv[6] = {.9, .8, .7, .6, .5, .4};
    static const int want[][2] = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {3, 0},
                                  {4, 0}, {5, 0}, {1, 1}, {0, 2}};
    for (int failing = 0; failing < 2; failing++) {
        tfc_asha a;
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_asha_init(&a, 6, 1, 9, 3, 1, &err), TFC_OK);
        int n = 0, t, k;
        while (tfc_asha_next(&a, &t, &k)) {
            CU_ASSERT_FATAL(n < 9);
            if (t != want[n][0] || k != want[n][1])
                printf("\njob %d: trial %d to rung %d, want trial %d to rung %d\n", n, t, k,
                       want[n][0], want[n][1]);
            CU_ASSERT(t == want[n][0] && k == want[n][1]);
            tfc_asha_report(&a, t, k, failing && k == 1 ? NAN : fv[t] + 0.05 * k);
            n++;
        }
        CU_ASSERT_EQUAL(n, failing ? 8 : 9);
        CU_ASSERT_EQUAL(a.reached[0], failing ? 1 : 2);
        tfc_asha_free(&a);
    }
}

/* Runs a pruner sweep one job at a time over scripted values (vals[t][step]); the jobs it gave
 * go to jobs[] as (trial, step); returns their count. */
static int pruner_sweep(tfc_pruner *m, const double vals[][3], int jobs[][2], int max)
{
    int n = 0, t, k;
    while (n < max && tfc_pruner_next(m, &t, &k)) {
        jobs[n][0] = t;
        jobs[n++][1] = k;
        tfc_pruner_report(m, t, k, vals[t][k]);
    }
    return n;
}

/* Steps 1, 2, 3 (interval 1, max_iter 3); higher is better. t0 completes; t1 (0.4 at step 0,
 * below the completed median 0.5) is pruned there; t2 passes step 0 (0.55 >= 0.5) and is pruned
 * at step 1 (best 0.58 < 0.6); t3 completes. With warmup 1 t1 goes on past step 0 and is pruned
 * at step 1 (best 0.45 < 0.6); with startup 2 nothing is pruned until two trials completed. */
static void test_median_pruner(void)
{
    static const double vals[4][3] = {
        {0.5, 0.6, 0.7}, {0.4, 0.45, 0.9}, {0.55, 0.58, 0.9}, {0.6, 0.65, 0.66}};
    tfc_pruner m;
    tfc_error err;
    tfc_error_clear(&err);
    int jobs[32][2];
    CU_ASSERT_EQUAL_FATAL(tfc_pruner_init(&m, 4, 1, 3, 0, 1, 1, &err), TFC_OK);
    CU_ASSERT(m.nsteps == 3 && m.step_iter[0] == 1 && m.step_iter[2] == 3);
    static const int want[][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {2, 0}, {2, 1},
                                  {3, 0}, {3, 1}, {3, 2}};
    int n = pruner_sweep(&m, vals, jobs, 32);
    CU_ASSERT_EQUAL(n, 9);
    CU_ASSERT(n == 9 && !memcmp(jobs, want, sizeof want));
    CU_ASSERT(m.done[0] == 1 && m.done[1] == 2 && m.done[2] == 2 && m.done[3] == 1);
    tfc_pruner_free(&m);

    CU_ASSERT_EQUAL_FATAL(tfc_pruner_init(&m, 4, 1, 3, 1, 1, 1, &err), TFC_OK);
    n = pruner_sweep(&m, vals, jobs, 32);
    CU_ASSERT(m.done[1] == 2 && m.next_step[1] == 2); /* pruned after step 1 */
    CU_ASSERT(m.done[2] == 2 && m.next_step[2] == 2);
    tfc_pruner_free(&m);

    CU_ASSERT_EQUAL_FATAL(tfc_pruner_init(&m, 4, 1, 3, 0, 2, 1, &err), TFC_OK);
    n = pruner_sweep(&m, vals, jobs, 32);
    CU_ASSERT(m.done[0] == 1 && m.done[1] == 1); /* t1 ran while only t0 had completed */
    tfc_pruner_free(&m);

    /* the median interpolates: completed values 0.2 and 0.4 at step 0 make 0.3; 0.29 is pruned,
     * 0.31 is not (steps 10 and 20 of max_iter 20) */
    static const double two[4][3] = {{0.2, 0.2, 0}, {0.4, 0.4, 0}, {0.29, 1, 0}, {0.31, 1, 0}};
    CU_ASSERT_EQUAL_FATAL(tfc_pruner_init(&m, 4, 10, 20, 0, 2, 1, &err), TFC_OK);
    CU_ASSERT(m.nsteps == 2 && m.step_iter[1] == 20);
    n = pruner_sweep(&m, two, jobs, 32);
    CU_ASSERT(m.done[2] == 2 && m.done[3] == 1);
    tfc_pruner_free(&m);
    CU_ASSERT_EQUAL(tfc_pruner_init(&m, 4, 0, 20, 0, 2, 1, &err), TFC_ERR_USAGE);
}

/* Hyperband with R = 9 (min_iter 1, max_iter 9), eta 3, by hand from Li et al. 2018's
 * Algorithm 1: s_max = 2, stages at 1, 3 and 9 iterations; brackets of n = 9, 5 and 3 trials
 * (ceil(3/(s+1)·3^s)) from stages 0, 1 and 2. Bracket 0: nine at stage 0, the best 3 go on
 * (t1, t3, t5), the best of them (t3) to the end; bracket 1: five at stage 1, the best one
 * (t10) to the end; bracket 2: three straight to the end — 22 jobs, 69 of 17·9 iterations. */
static void test_hyperband(void)
{
    static const double hv[17] = {.5, .7, .6, .9, .1, .8, .3, .2, .4, .3, .6, .2, .5, .4,
                                  .1, .2, .3};
    static const int want[22][2] = {
        {0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}, {8, 0}, {1, 1}, {3, 1},
        {5, 1}, {3, 2}, {9, 1}, {10, 1}, {11, 1}, {12, 1}, {13, 1}, {10, 2}, {14, 2}, {15, 2},
        {16, 2}};
    tfc_hyperband h;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_hyperband_init(&h, 17, 1, 9, 3, 1, &err), TFC_OK);
    CU_ASSERT(h.smax == 2 && h.stage_iter[0] == 1 && h.stage_iter[1] == 3 && h.stage_iter[2] == 9);
    CU_ASSERT(h.nbrackets == 3 && h.count[0] == 9 && h.count[1] == 5 && h.count[2] == 3);
    int n = 0, t, k;
    int64_t spent = 0, trained[17] = {0};
    while (n < 30 && tfc_hyperband_next(&h, &t, &k)) {
        if (n < 22 && (t != want[n][0] || k != want[n][1]))
            printf("\njob %d: trial %d to stage %d, want %d to %d\n", n, t, k, want[n][0],
                   want[n][1]);
        CU_ASSERT(n < 22 && t == want[n][0] && k == want[n][1]);
        spent += h.stage_iter[k] - trained[t]; /* a trial starts from 0 at any stage */
        trained[t] = h.stage_iter[k];
        tfc_hyperband_report(&h, t, k, hv[t] + 0.05 * k);
        n++;
    }
    CU_ASSERT_EQUAL(n, 22);
    CU_ASSERT_EQUAL(spent, 69);
    tfc_hyperband_free(&h);
    /* fewer trials than the brackets take: the last brackets shrink or stay empty */
    CU_ASSERT_EQUAL_FATAL(tfc_hyperband_init(&h, 10, 1, 9, 3, 1, &err), TFC_OK);
    CU_ASSERT(h.count[0] == 9 && h.count[1] == 1 && h.count[2] == 0);
    tfc_hyperband_free(&h);
    /* six trials, one short bracket: the best two of stage 0 (t3, t5) go on, and of those
     * two (floor(2/3) = 0) still the best, t3, to the end */
    static const int short_want[9][2] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0},
                                         {5, 0}, {3, 1}, {5, 1}, {3, 2}};
    CU_ASSERT_EQUAL_FATAL(tfc_hyperband_init(&h, 6, 1, 9, 3, 1, &err), TFC_OK);
    n = 0;
    while (n < 12 && tfc_hyperband_next(&h, &t, &k)) {
        CU_ASSERT(n < 9 && t == short_want[n][0] && k == short_want[n][1]);
        tfc_hyperband_report(&h, t, k, hv[t] + 0.05 * k);
        n++;
    }
    CU_ASSERT_EQUAL(n, 9);
    tfc_hyperband_free(&h);
    /* replaying the first ten jobs and nine reports, then asking: the uninterrupted order */
    CU_ASSERT_EQUAL_FATAL(tfc_hyperband_init(&h, 17, 1, 9, 3, 1, &err), TFC_OK);
    for (int j = 0; j < 10; j++) {
        tfc_hyperband_replay_job(&h, want[j][0], want[j][1]);
        if (j < 9) tfc_hyperband_report(&h, want[j][0], want[j][1], hv[want[j][0]]);
    }
    /* job 9 (t1 to stage 1) is owed: the caller restarts it; then t3 and t5 follow */
    tfc_hyperband_report(&h, 1, 1, hv[1] + 0.05);
    CU_ASSERT(tfc_hyperband_next(&h, &t, &k) && t == 3 && k == 1);
    tfc_hyperband_free(&h);
}

TFC_TEST_MAIN("asha", {"rungs", test_rungs}, {"sequential_sweep", test_sequential_sweep},
              {"busy_mode_and_nan", test_busy_mode_and_nan}, {"replay", test_replay},
              {"finite_grid_finishes", test_finite_grid_finishes},
              {"median_pruner", test_median_pruner}, {"hyperband", test_hyperband})
