/* EinsumDense's equation: parsed (tfc_einsum_parse) into the input's, the kernel's and the
 * output's letters, then planned against the input's shape, output_shape and bias_axes
 * (tfc_einsum_plan_make) into Keras's kernel, bias and output shapes and the permutes and
 * GEMMs that compute it. Plain C with no dependency beyond libc, so that the fuzzer links it
 * alone (fuzz/fuzz_einsum.c).
 *
 * Each letter's role follows from where it appears:
 *   batch-like (B)  input and output:           rows of the GEMM (the batch axis is one)
 *   contracted (C)  input and kernel:           the GEMM's inner dimension, summed
 *   kernel-free (N) kernel and output:          the GEMM's columns
 *   shared (S)      input, kernel and output:   one GEMM per index (a batched GEMM)
 *   summed (R)      input alone:                summed with the contracted axes, the kernel
 *                                               repeated along it
 * A trace or a diagonal (a letter twice in one operand) and letters that nothing defines are
 * errors. */
#ifndef TFC_LAYERS_EINSUM_SPEC_H
#define TFC_LAYERS_EINSUM_SPEC_H

#include <stdint.h>

#define TFC_EINSUM_AXES 16 /* letters of one operand, at most; axes after '...' expands */

/* What an error is about, and where: the argument, and a character offset into the
 * equation or bias_axes, or an item of output_shape (-1: the argument as a whole). */
typedef enum tfc_einsum_arg {
    TFC_EINSUM_EQUATION = 0,
    TFC_EINSUM_OUTPUT_SHAPE,
    TFC_EINSUM_BIAS_AXES,
    TFC_EINSUM_INPUT /* the layer's input shape */
} tfc_einsum_arg;

typedef struct tfc_einsum_error {
    tfc_einsum_arg arg;
    int at;
    char msg[320];
} tfc_einsum_error;

/* The equation "IN,KER->OUT", letters a-z and A-Z; '...' may start both the input and the
 * output (Keras's "...ab,bc->...ac") or end both ("ab...,bc->ac...", two input letters at
 * least), never the kernel. */
typedef struct tfc_einsum_spec {
    char in[TFC_EINSUM_AXES + 1], ker[TFC_EINSUM_AXES + 1], out[TFC_EINSUM_AXES + 1];
    int n_in, n_ker, n_out;
    int ellipsis;               /* 0 none, 1 leading, 2 trailing */
    int in_at, ker_at, out_at;  /* offsets of the first letter of each in the equation */
} tfc_einsum_spec;

/* Parses `eq` into *s. Returns 0, or -1 with *e saying what is wrong where (arg
 * TFC_EINSUM_EQUATION, `at` the offending character's offset). */
int tfc_einsum_parse(const char *eq, tfc_einsum_spec *s, tfc_einsum_error *e);

/* The layer planned for one input shape. Per-example axis lists leave the batch out. */
typedef struct tfc_einsum_plan {
    int rank_in, rank_out;             /* per example */
    int64_t in_dim[TFC_EINSUM_AXES], out_dim[TFC_EINSUM_AXES];
    int rank_ker;
    int64_t ker_dim[TFC_EINSUM_AXES];  /* Keras's kernel shape */
    int rank_bias;                     /* 0: no bias */
    int64_t bias_dim[TFC_EINSUM_AXES]; /* Keras's bias shape (1 on the axes it broadcasts) */
    int64_t fan_in, fan_out;           /* Keras's input_axes / output_axes fans of the kernel */
    /* The GEMMs: for s < shared, Y_s (rows, n) = X_s (rows, k reduce) K_s (k reduce, n),
     * rows = batch x rows_per; X as (B, S, C, R) and Y as (B, S, N) per example, K as
     * (S, C, N) or, with k_trans, (S, N, C), and where reduce > 1 repeated along R into
     * (S, C, R, N) or (S, N, C, R). */
    int64_t rows_per, shared, k, n, reduce;
    int k_trans;
    /* permutes into those layouts, as the permute op takes them (output axis i is input axis
     * perm[i]): the input per example to (B, S, C, R); (B, S, N) per example to the output; the
     * kernel (one example) to (S, C, N). A flag 0: already so, no permute. */
    int x_permuted, y_permuted, k_permuted;
    int x_perm[TFC_EINSUM_AXES], y_perm[TFC_EINSUM_AXES], k_perm[TFC_EINSUM_AXES];
    int64_t y_canon_dim[TFC_EINSUM_AXES];  /* (B, S, N) per example: the y permute's input */
    /* The bias over the output's last bias_block floats of each example (the axes from the
     * first bias letter on); with bias_expand it broadcasts over some of them: the bias read
     * as (Q, P) (Q the product of the broadcast axes, P the bias's size, copied Q times)
     * permuted by bias_perm from bias_src_dim into the output's order. */
    int64_t bias_block, bias_q, bias_p;
    int bias_expand, bias_ndim;
    int bias_perm[TFC_EINSUM_AXES];
    int64_t bias_src_dim[TFC_EINSUM_AXES];
} tfc_einsum_plan;

/* Plans spec for an input of in_rank axes in_dim (per example, the batch left out), Keras's
 * output_shape (n_partial sizes, -1 for None: the output's axes other than the batch's and
 * those of '...') and bias_axes (NULL: no bias). Returns 0, or -1 with *e (arg and at: the
 * equation's character, output_shape's item or bias_axes' character at fault; or the input). */
int tfc_einsum_plan_make(const tfc_einsum_spec *s, int in_rank, const int64_t *in_dim,
                         const int64_t *partial, int n_partial,
                         const char *bias_axes, tfc_einsum_plan *p, tfc_einsum_error *e);

#endif
