/* The CPU backend's one public entry: the op table on OpenBLAS and OpenMP loops. */
#ifndef TFC_CPU_CPU_H
#define TFC_CPU_CPU_H

#include "core/backend.h"

/* The CPU backend; `threads` <= 0 means all cores. Never fails. */
tfc_backend *tfc_cpu_backend_create(int threads);

/* OpenBLAS's kernel set in this process, as it names it ("SkylakeX", "Haswell", "Zen",
 * "Prescott", ...). OpenBLAS picks it once, when the library loads, from the CPU's model
 * number; a model it does not know (Debian 12's 0.3.21 on Intel Emerald Rapids) gets its
 * generic Prescott (SSE3) kernels, ~4x slower at sgemm there than the AVX-512 ones. */
const char *tfc_cpu_blas_core(void);

/* The OPENBLAS_CORETYPE value this CPU's instruction set supports ("SkylakeX" with AVX-512
 * F/BW/VL/DQ, "Haswell" with AVX2 + FMA) where OpenBLAS's `core` is a pre-Haswell set;
 * NULL where it is not, or nothing better fits. Pure: tfc_cpu_blas_better() asks it with
 * this machine's values. */
const char *tfc_cpu_blas_pick(const char *core, int avx2_fma, int avx512);

/* tfc_cpu_blas_pick for this process and CPU; NULL also when OPENBLAS_CORETYPE is set (a
 * user's choice is never second-guessed). */
const char *tfc_cpu_blas_better(void);

/* Where tfc_cpu_blas_better() names a set, runs this program again (execv of /proc/self/exe
 * with `argv`) with OPENBLAS_CORETYPE naming it and TFC_BLAS_FALLBACK naming what OpenBLAS
 * chose: OpenBLAS reads the variable only when it loads, before main. Returns where nothing
 * is to be done, or where the exec failed (the slow kernels stay). Once: the variable is set
 * after it. Every tfc-* tool calls it first (tools/cli.c), as do the tests and benchmarks; a
 * program embedding libtfc may call it first thing in main (docs/cpu.md). */
void tfc_cpu_blas_restart(char **argv);

/* After such a restart (inherited by the program's children too), what OpenBLAS had chosen by
 * itself; NULL where OPENBLAS_CORETYPE is not the value the restart sets. */
const char *tfc_cpu_blas_fallback(void);

/* Every parallel region of the CPU backends on at most `team` threads (their work still
 * split by each backend's thread count, so results do not change), or 0: as many as the
 * machine gives the process (cpu_team.c, docs/cpu.md). For the tests. */
void tfc_cpu_team_force(int team);
/* For the tests: every CPU backend's GEMMs (and one-row GEMVs) big enough to split are cut
 * into `blocks` blocks, on any thread count, or 0: as each backend's threads say (two blocks
 * per thread). A block is one single-threaded library call, and OpenBLAS's Haswell kernels
 * and oneDNN's AVX2 ones give an element other bits when the call's shape changes, so a GEMM
 * cut by the thread count repeats its bits at that count only (docs/cpu.md, Determinism);
 * held fixed, a test compares tfc's own splits on 1 and N threads bit for bit on any CPU. */
void tfc_cpu_gemm_blocks_force(int blocks);
/* Every parallel region the calling thread starts on at most `team` threads (0: no cap), with
 * the same results, as tfc_cpu_team_force's (per thread, where that is per process): an
 * inference pass on its thread alone, beside another thread's (tfc_predictor_run). */
void tfc_cpu_team_cap(int team);
/* For the tests: the next region that asks for its team looks at the machine's load (reads
 * every thread's schedstat), as it does every 40 ms. */
void tfc_cpu_team_look_soon(void);
/* For the tests: how many calls of a library's own team (oneDNN's convolutions on a frozen
 * backend) ran on the calling thread alone because the team had shrunk to one. */
long long tfc_cpu_team_lone_calls(void);

#endif
