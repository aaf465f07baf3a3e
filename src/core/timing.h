/* Wall-clock timing for tools and benchmarks: a monotonic clock and the median of samples. */
#ifndef TFC_CORE_TIMING_H
#define TFC_CORE_TIMING_H

/* Seconds on a monotonic clock (CLOCK_MONOTONIC). */
double tfc_now(void);

/* The median of v[0..n) (n > 0); sorts v in place. */
double tfc_median(double *v, int n);

#endif
