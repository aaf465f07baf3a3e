/* EinsumDense's equation: the parser and the planner (einsum_spec.h). Keras's rules are
 * _analyze_einsum_string and _analyze_split_string (keras/src/layers/core/einsum_dense.py);
 * where Keras would fail later (a None in the kernel's shape, an index out of range) or
 * compute something tfc does not, this says why up front. */
#include "layers/einsum_spec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int fail(tfc_einsum_error *e, tfc_einsum_arg arg, int at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(tfc_einsum_error *e, tfc_einsum_arg arg, int at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->arg = arg;
    e->at = at;
    return -1;
}

static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* One operand, eq[from, to): its letters into `out`, where its '...' is into *ell (0 none,
 * 1 leading, 2 trailing). */
static int operand(const char *eq, int from, int to, const char *what, int may_elide, char *out,
                   int *n, int *ell, tfc_einsum_error *e)
{
    *n = 0;
    *ell = 0;
    for (int i = from; i < to; i++) {
        const char c = eq[i];
        if (c == '.') {
            if (to - i < 3 || eq[i + 1] != '.' || eq[i + 2] != '.')
                return fail(e, TFC_EINSUM_EQUATION, i, "a '.' that is not part of '...'");
            if (!may_elide)
                return fail(e, TFC_EINSUM_EQUATION, i, "the kernel cannot have '...': its axes "
                            "are all named");
            if (*ell)
                return fail(e, TFC_EINSUM_EQUATION, i, "the %s has '...' twice", what);
            if (i != from && i + 3 != to)
                return fail(e, TFC_EINSUM_EQUATION, i, "'...' in the middle of the %s: it may "
                            "only start or end both the input and the output", what);
            *ell = i == from ? 1 : 2;
            i += 2;
            continue;
        }
        if (!is_letter(c))
            return fail(e, TFC_EINSUM_EQUATION, i, "'%c' in the %s: an equation has letters "
                        "a-z and A-Z, '...', one ',' and '->' (no spaces)", c, what);
        for (int j = 0; j < *n; j++)
            if (out[j] == c)
                return fail(e, TFC_EINSUM_EQUATION, i, "'%c' appears twice in the %s: "
                            "EinsumDense takes no traces or diagonals", c, what);
        if (*n == TFC_EINSUM_AXES)
            return fail(e, TFC_EINSUM_EQUATION, i, "the %s has more than %d letters", what,
                        TFC_EINSUM_AXES);
        out[(*n)++] = c;
    }
    out[*n] = 0;
    if (*n == 0)
        return fail(e, TFC_EINSUM_EQUATION, from, "the %s has no letters", what);
    return 0;
}

int tfc_einsum_parse(const char *eq, tfc_einsum_spec *s, tfc_einsum_error *e)
{
    memset(s, 0, sizeof *s);
    if (!eq || !eq[0]) return fail(e, TFC_EINSUM_EQUATION, 0, "is empty");
    const int len = (int)strlen(eq);
    const char *arrow = strstr(eq, "->");
    if (!arrow)
        return fail(e, TFC_EINSUM_EQUATION, len, "has no '->': EinsumDense needs the "
                    "output's letters, \"INPUT,KERNEL->OUTPUT\"");
    const int at_arrow = (int)(arrow - eq);
    if (strstr(arrow + 2, "->"))
        return fail(e, TFC_EINSUM_EQUATION, (int)(strstr(arrow + 2, "->") - eq),
                    "has '->' twice");
    int commas = 0, comma = -1;
    for (int i = 0; i < len; i++)
        if (eq[i] == ',') {
            if (i > at_arrow)
                return fail(e, TFC_EINSUM_EQUATION, i, "a ',' in the output: EinsumDense has "
                            "one output");
            commas++;
            if (comma < 0) comma = i;
        }
    if (commas != 1)
        return fail(e, TFC_EINSUM_EQUATION, commas ? comma : 0, "has %d operand%s before "
                    "'->': EinsumDense takes two, the input and the kernel (\"ab,bc->ac\")",
                    commas + 1, commas ? "s" : "");
    int ell_in, ell_ker, ell_out;
    s->in_at = 0;
    s->ker_at = comma + 1;
    s->out_at = at_arrow + 2;
    if (operand(eq, 0, comma, "input", 1, s->in, &s->n_in, &ell_in, e) ||
        operand(eq, comma + 1, at_arrow, "kernel", 0, s->ker, &s->n_ker, &ell_ker, e) ||
        operand(eq, at_arrow + 2, len, "output", 1, s->out, &s->n_out, &ell_out, e))
        return -1;
    if (ell_in != ell_out)
        return fail(e, TFC_EINSUM_EQUATION, ell_in ? 0 : s->out_at, "'...' must %s both the "
                    "input and the output (Keras's \"...ab,bc->...ac\" or \"ab...,bc->ac...\")",
                    (ell_in ? ell_in : ell_out) == 1 ? "start" : "end");
    s->ellipsis = ell_in;
    if (ell_in == 1) s->in_at = 3;
    if (ell_out == 1) s->out_at += 3;
    if (s->ellipsis == 2 && s->n_in < 2)
        return fail(e, TFC_EINSUM_EQUATION, 0, "with '...' at its end the input needs two "
                    "letters at least (the batch's and another), as Keras's");
    /* each letter's role: present in which operands */
    for (int i = 0; i < s->n_out; i++)
        if (!strchr(s->in, s->out[i]) && !strchr(s->ker, s->out[i]))
            return fail(e, TFC_EINSUM_EQUATION, s->out_at + i, "the output's '%c' is in "
                        "neither the input nor the kernel", s->out[i]);
    for (int i = 0; i < s->n_ker; i++)
        if (!strchr(s->in, s->ker[i]) && !strchr(s->out, s->ker[i]))
            return fail(e, TFC_EINSUM_EQUATION, s->ker_at + i, "the kernel's '%c' is in "
                        "neither the input nor the output, which give the kernel's sizes",
                        s->ker[i]);
    /* the batch: the input's first axis, the output's first, never the kernel's (with a
     * leading '...' it may be that of the ellipsis: tfc_einsum_plan_make) */
    if (s->ellipsis != 1) {
        if (strchr(s->ker, s->in[0]))
            return fail(e, TFC_EINSUM_EQUATION, s->in_at, "the input's first letter '%c' is "
                        "the batch axis and cannot be in the kernel", s->in[0]);
        if (s->out[0] != s->in[0])
            return fail(e, TFC_EINSUM_EQUATION, s->out_at, "the output must start with the "
                        "batch letter '%c', as the input does", s->in[0]);
    }
    return 0;
}

/* An axis of a full operand (the batch included): a letter, or 256 + i for the ellipsis's
 * axis i. */
static int find(const int *ids, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id) return i;
    return -1;
}

/* The full axes (batch first) of an operand with letters `l` and `elided` ellipsis axes. */
static int full_axes(const char *l, int n, int ellipsis, int elided, int *ids)
{
    int at = 0;
    if (ellipsis == 1)
        for (int i = 0; i < elided; i++) ids[at++] = 256 + i;
    for (int i = 0; i < n; i++) ids[at++] = (unsigned char)l[i];
    if (ellipsis == 2)
        for (int i = 0; i < elided; i++) ids[at++] = 256 + i;
    return at;
}

/* perm[i] = position in `from` of to[i] (both n ids); whether that is the identity. */
static int perm_of(const int *from, const int *to, int n, int *perm)
{
    int moved = 0;
    for (int i = 0; i < n; i++) {
        perm[i] = find(from, n, to[i]);
        moved |= perm[i] != i;
    }
    return moved;
}

int tfc_einsum_plan_make(const tfc_einsum_spec *s, int in_rank, const int64_t *in_dim,
                         const int64_t *partial, int n_partial,
                         const char *bias_axes, tfc_einsum_plan *p, tfc_einsum_error *e)
{
    memset(p, 0, sizeof *p);
    const int full_in = in_rank + 1, elided = full_in - s->n_in;
    if (in_rank < 0 || in_rank >= TFC_EINSUM_AXES)
        return fail(e, TFC_EINSUM_INPUT, -1, "an input of %d axes is more than %d", in_rank,
                    TFC_EINSUM_AXES - 1);
    if (s->ellipsis == 0 && elided != 0)
        return fail(e, TFC_EINSUM_INPUT, -1, "the equation's input '%s' has %d axes but the "
                    "input has %d (with the batch axis)", s->in, s->n_in, full_in);
    if (elided < 0)
        return fail(e, TFC_EINSUM_INPUT, -1, "the equation's input '...%s' has %d letters "
                    "but the input has %d axes (with the batch axis)", s->in, s->n_in, full_in);
    if (s->n_out + elided - 1 > TFC_EINSUM_AXES)
        return fail(e, TFC_EINSUM_INPUT, -1, "the output would have %d axes, more than %d",
                    s->n_out + elided - 1, TFC_EINSUM_AXES);
    int in[TFC_EINSUM_AXES + 1], out[2 * TFC_EINSUM_AXES], ker[TFC_EINSUM_AXES];
    full_axes(s->in, s->n_in, s->ellipsis, elided, in);
    const int full_out = full_axes(s->out, s->n_out, s->ellipsis, elided, out);
    full_axes(s->ker, s->n_ker, 0, 0, ker);
    if (s->ellipsis == 1 && elided == 0) { /* the batch is the first letter after '...' */
        if (strchr(s->ker, s->in[0]))
            return fail(e, TFC_EINSUM_EQUATION, s->in_at, "the input's first letter '%c' is "
                        "the batch axis here (the '...' stands for no axis) and cannot be in "
                        "the kernel", s->in[0]);
        if (s->out[0] != s->in[0])
            return fail(e, TFC_EINSUM_EQUATION, s->out_at, "the output must start with the "
                        "batch letter '%c' (the '...' stands for no axis here)", s->in[0]);
    }
    /* output_shape: the output's letters but one at the batch's place (Keras's) */
    const int first = out[0] < 256; /* the output's first axis is a letter */
    const int want = s->n_out - first;
    if (n_partial != want)
        return fail(e, TFC_EINSUM_OUTPUT_SHAPE, -1, "has %d size%s but the output '%s%s%s' "
                    "needs %d: one for each letter%s", n_partial, n_partial == 1 ? "" : "s",
                    s->ellipsis == 1 ? "..." : "", s->out, s->ellipsis == 2 ? "..." : "", want,
                    first ? " but the first (the batch)" : " (the '...' is the input's)");
    p->rank_in = in_rank;
    p->rank_out = full_out - 1;
    for (int i = 0; i < in_rank; i++) p->in_dim[i] = in_dim[i];
    int64_t full_dim[2 * TFC_EINSUM_AXES];
    for (int o = 1; o < full_out; o++) {
        const int at_in = find(in, full_in, out[o]);
        const int letter = out[o] < 256 ? (int)(strchr(s->out, out[o]) - s->out) : -1;
        const int item = letter < 0 ? -1 : letter - first;
        const int64_t given = item < 0 ? -1 : partial[item];
        if (at_in >= 0) {
            full_dim[o] = in_dim[at_in - 1];
            if (given >= 0 && given != full_dim[o])
                return fail(e, TFC_EINSUM_OUTPUT_SHAPE, item, "output_shape[%d] is %lld but "
                            "'%c' is the input's axis of %lld (give that or null)", item,
                            (long long)given, out[o], (long long)full_dim[o]);
        } else {
            if (given < 1)
                return fail(e, TFC_EINSUM_OUTPUT_SHAPE, item, "output_shape[%d] is %s but the "
                            "kernel's '%c' is not in the input: give its size", item,
                            given < 0 ? "null" : "0", out[o]);
            full_dim[o] = given;
        }
        p->out_dim[o - 1] = full_dim[o];
    }
    /* the kernel: Keras's shape and fans (input_axes: the axes not in the output) */
    p->rank_ker = s->n_ker;
    p->fan_in = p->fan_out = 1;
    for (int i = 0; i < s->n_ker; i++) {
        const int o = find(out, full_out, ker[i]);
        p->ker_dim[i] = o >= 0 ? full_dim[o] : in_dim[find(in, full_in, ker[i]) - 1];
        *(o >= 0 ? &p->fan_out : &p->fan_in) *= p->ker_dim[i];
    }
    /* the roles and the GEMM's layouts: B, S, C, R in the input's order, N in the output's */
    int b[TFC_EINSUM_AXES], sh[TFC_EINSUM_AXES], c[TFC_EINSUM_AXES], nn[TFC_EINSUM_AXES];
    int r[TFC_EINSUM_AXES], nb = 0, ns = 0, nc = 0, nk = 0, nr = 0;
    p->rows_per = p->shared = p->k = p->n = p->reduce = 1;
    for (int i = 1; i < full_in; i++) {
        const int inker = find(ker, s->n_ker, in[i]) >= 0, inout = find(out, full_out, in[i]) >= 0;
        if (inker && inout) sh[ns++] = in[i], p->shared *= in_dim[i - 1];
        else if (inker) c[nc++] = in[i], p->k *= in_dim[i - 1];
        else if (inout) b[nb++] = in[i], p->rows_per *= in_dim[i - 1];
        else r[nr++] = in[i], p->reduce *= in_dim[i - 1];
    }
    for (int o = 1; o < full_out; o++)
        if (find(in, full_in, out[o]) < 0) nn[nk++] = out[o], p->n *= full_dim[o];
    int canon[TFC_EINSUM_AXES], nca = 0;
    /* x to (B, S, C, R) */
    for (int i = 0; i < nb; i++) canon[nca++] = b[i];
    for (int i = 0; i < ns; i++) canon[nca++] = sh[i];
    for (int i = 0; i < nc; i++) canon[nca++] = c[i];
    for (int i = 0; i < nr; i++) canon[nca++] = r[i];
    p->x_permuted = perm_of(in + 1, canon, in_rank, p->x_perm);
    /* (B, S, N) to y */
    nca = nb + ns;
    for (int i = 0; i < nk; i++) canon[nca++] = nn[i];
    for (int i = 0; i < nca; i++) p->y_canon_dim[i] = full_dim[find(out, full_out, canon[i])];
    p->y_permuted = perm_of(canon, out + 1, nca, p->y_perm);
    /* the kernel: (S, C, N) or, read transposed, (S, N, C); else permuted to (S, C, N) */
    int kc[TFC_EINSUM_AXES], kt[TFC_EINSUM_AXES], na = 0;
    for (int i = 0; i < ns; i++) kc[na] = kt[na] = sh[i], na++;
    for (int i = 0; i < nc; i++) kc[na + i] = c[i], kt[na + nk + i] = c[i];
    for (int i = 0; i < nk; i++) kc[na + nc + i] = nn[i], kt[na + i] = nn[i];
    int tperm[TFC_EINSUM_AXES];
    p->k_permuted = perm_of(ker, kc, s->n_ker, p->k_perm);
    if (p->k_permuted && !perm_of(ker, kt, s->n_ker, tperm)) p->k_permuted = 0, p->k_trans = 1;
    /* the bias (Keras's): the output's letters from the first in bias_axes on, 1 on the
     * others, and 1 for each trailing '...' axis */
    if (!bias_axes) return 0;
    if (!bias_axes[0]) return fail(e, TFC_EINSUM_BIAS_AXES, 0, "is empty (null: no bias)");
    int first_letter = s->n_out;
    for (int i = 0; bias_axes[i]; i++) {
        const char *at = is_letter(bias_axes[i]) ? strchr(s->out, bias_axes[i]) : NULL;
        if (!at)
            return fail(e, TFC_EINSUM_BIAS_AXES, i, "'%c' is not a letter of the output '%s'",
                        bias_axes[i], s->out);
        if (find(out, full_out, bias_axes[i]) == 0)
            return fail(e, TFC_EINSUM_BIAS_AXES, i, "'%c' is the batch axis", bias_axes[i]);
        if (at - s->out < first_letter) first_letter = (int)(at - s->out);
    }
    const int start = find(out, full_out, (unsigned char)s->out[first_letter]);
    int src[TFC_EINSUM_AXES], nq = 0, np = 0, q_ax[TFC_EINSUM_AXES], p_ax[TFC_EINSUM_AXES];
    p->bias_block = p->bias_q = p->bias_p = 1;
    for (int o = start; o < full_out; o++) {
        const int on = out[o] < 256 && strchr(bias_axes, out[o]);
        p->bias_dim[p->rank_bias++] = on ? full_dim[o] : 1;
        p->bias_block *= full_dim[o];
        if (on) p_ax[np++] = o, p->bias_p *= full_dim[o];
        else q_ax[nq++] = o, p->bias_q *= full_dim[o];
    }
    p->bias_expand = p->bias_q > 1;
    p->bias_ndim = full_out - start;
    for (int i = 0; i < nq; i++) src[i] = q_ax[i];
    for (int i = 0; i < np; i++) src[nq + i] = p_ax[i];
    for (int i = 0; i < p->bias_ndim; i++) {
        p->bias_src_dim[i] = full_dim[src[i]];
        p->bias_perm[i] = find(src, p->bias_ndim, start + i);
    }
    return 0;
}
