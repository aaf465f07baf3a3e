/* tfc-grid's plan (grid.h): the keys --grid and --range add, their short names, the points
 * (the cartesian product of the --grid values, or seeded draws within the --range bounds),
 * each point's folder name and its --set strings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"

void *grid_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fputs("tfc-grid: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

char *grid_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) {
        fputs("tfc-grid: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

/* An integer literal (optional sign, digits only)? */
static int is_integer(const char *s)
{
    if (*s == '-' || *s == '+') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* "KEY=REST": KEY non-empty; returns REST or NULL. */
static const char *split_key(const char *arg, char *keybuf, size_t size)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= size) return NULL;
    memcpy(keybuf, arg, (size_t)(eq - arg));
    keybuf[eq - arg] = 0;
    return eq + 1;
}

static grid_key *find_or_add_key(grid *g, const char *name)
{
    for (int i = 0; i < g->nkeys; i++)
        if (!strcmp(g->keys[i].name, name)) return NULL; /* duplicate */
    if (g->nkeys == GRID_MAX_KEYS) return NULL;
    grid_key *k = &g->keys[g->nkeys++];
    k->name = grid_xstrdup(name);
    return k;
}

/* --grid KEY=v1,v2,...: commas split at bracket depth 0, so YAML flow values like [3, 3]
 * stay whole. Returns an error message or NULL. */
const char *grid_add_values(void *ctx, const char *arg)
{
    grid *g = ctx;
    char name[512];
    const char *rest = split_key(arg, name, sizeof name);
    if (!rest) return "expected KEY=v1,v2,...";
    grid_key *k = find_or_add_key(g, name);
    if (!k) return "the key is given twice (or more than 32 keys)";
    k->values = grid_xcalloc(GRID_MAX_VALUES, sizeof *k->values);
    int depth = 0;
    const char *start = rest;
    for (const char *p = rest;; p++) {
        if (*p == '[' || *p == '{') depth++;
        if ((*p == ']' || *p == '}') && depth > 0) depth--;
        if (*p == 0 || (*p == ',' && depth == 0)) {
            if (k->nvalues == GRID_MAX_VALUES) return "more than 1024 values";
            size_t len = (size_t)(p - start);
            char *v = grid_xcalloc(len + 1, 1);
            memcpy(v, start, len);
            /* trim spaces after commas: "0.1, 0.01" */
            char *t = v;
            while (*t == ' ') t++;
            memmove(v, t, strlen(t) + 1);
            k->values[k->nvalues++] = v;
            if (!*p) break;
            start = p + 1;
        }
    }
    return NULL;
}

/* --range KEY=lo:hi or KEY=log:lo:hi. */
const char *grid_add_range(void *ctx, const char *arg)
{
    grid *g = ctx;
    char name[512], lo[128], hi[128];
    const char *rest = split_key(arg, name, sizeof name);
    if (!rest) return "expected KEY=lo:hi or KEY=log:lo:hi";
    int log = 0;
    if (!strncmp(rest, "log:", 4)) {
        log = 1;
        rest += 4;
    }
    const char *colon = strchr(rest, ':');
    if (!colon || (size_t)(colon - rest) >= sizeof lo || strlen(colon + 1) >= sizeof hi)
        return "expected KEY=lo:hi or KEY=log:lo:hi";
    memcpy(lo, rest, (size_t)(colon - rest));
    lo[colon - rest] = 0;
    snprintf(hi, sizeof hi, "%s", colon + 1);
    char *e1, *e2;
    double a = strtod(lo, &e1), b = strtod(hi, &e2);
    if (!*lo || !*hi || *e1 || *e2 || !isfinite(a) || !isfinite(b))
        return "the bounds must be numbers";
    if (a > b) return "lo must not exceed hi";
    if (log && a <= 0) return "a log range needs positive bounds";
    grid_key *k = find_or_add_key(g, name);
    if (!k) return "the key is given twice (or more than 32 keys)";
    k->is_range = 1;
    k->log = log;
    k->integer = is_integer(lo) && is_integer(hi);
    k->lo = a;
    k->hi = b;
    return NULL;
}

/* The last path component that is not an index: optimizer.learning_rate -> learning_rate,
 * model.layers.6.Dropout.rate -> rate. */
void grid_short_names(grid *g)
{
    for (int i = 0; i < g->nkeys; i++) {
        grid_key *k = &g->keys[i];
        char buf[512];
        snprintf(buf, sizeof buf, "%s", k->name);
        const char *best = buf;
        for (char *tok = strtok(buf, ".[]"); tok; tok = strtok(NULL, ".[]"))
            if (!is_integer(tok)) best = tok;
        snprintf(k->short_name, sizeof k->short_name, "%s", best);
    }
    for (int i = 0; i < g->nkeys; i++) {
        int dup = 0;
        for (int j = 0; j < g->nkeys; j++)
            if (i != j && !strcmp(g->keys[i].short_name, g->keys[j].short_name)) dup = 1;
        if (dup)
            snprintf(g->keys[i].short_name, sizeof g->keys[i].short_name, "%s", g->keys[i].name);
    }
}

/* The point's folder name: short=value pairs joined by '_', characters outside
 * [A-Za-z0-9._+=-] replaced by '-'; a hash when that would be too long. */
static void point_name(const grid *g, grid_point *p)
{
    char buf[2048];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < g->nkeys && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%s", i ? "_" : "",
                              g->keys[i].short_name, p->vals[i]);
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("._+=-", *c)))
            *c = '-';
    if (n == 0) snprintf(buf, sizeof buf, "default");
    if (strlen(buf) < 180) {
        snprintf(p->name, sizeof p->name, "%s", buf);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const char *c = buf; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    snprintf(p->name, sizeof p->name, "point-%016llx", (unsigned long long)h);
}

static int name_taken(const grid *g, const char *name)
{
    for (int i = 0; i < g->npoints; i++)
        if (!strcmp(g->points[i].name, name)) return 1;
    return 0;
}

/* A uniform double in [0, 1) with 53 random bits: draw (point, key, attempt). */
static double unit53(uint64_t rkey, uint64_t pt, uint64_t k, uint64_t attempt)
{
    tfc_u32x4 r = tfc_philox(rkey, k, pt | (attempt << 40));
    uint64_t x = ((uint64_t)r.v[0] << 21) ^ r.v[1];
    return (double)(x & ((1ull << 53) - 1)) / 9007199254740992.0;
}

static char *format_draw(const grid_key *k, double u)
{
    char buf[64];
    if (k->log) {
        double v = exp(log(k->lo) + u * (log(k->hi) - log(k->lo)));
        if (k->integer) snprintf(buf, sizeof buf, "%lld", (long long)llround(v));
        else snprintf(buf, sizeof buf, "%.4g", v);
    } else if (k->integer) {
        double span = k->hi - k->lo + 1;
        long long v = (long long)k->lo + (long long)floor(u * span);
        if (v > (long long)k->hi) v = (long long)k->hi;
        snprintf(buf, sizeof buf, "%lld", v);
    } else {
        snprintf(buf, sizeof buf, "%.4g", k->lo + u * (k->hi - k->lo));
    }
    return grid_xstrdup(buf);
}

/* The points: the cartesian product (the last key varies fastest), or `nrandom` seeded
 * draws (a draw that repeats an earlier point is drawn again, up to 100 times). */
const char *grid_expand(grid *g, long nrandom, uint64_t seed)
{
    long total = 1;
    if (nrandom > 0) {
        total = nrandom;
    } else {
        for (int i = 0; i < g->nkeys; i++) {
            total *= g->keys[i].nvalues;
            if (total > GRID_MAX_POINTS) return "the grid has more than 100000 points";
        }
    }
    g->points = grid_xcalloc((size_t)total, sizeof *g->points);
    uint64_t rkey = tfc_rng_key(seed, 0x67726964); /* "grid" */
    for (long pi = 0; pi < total; pi++) {
        grid_point *p = &g->points[g->npoints];
        p->vals = grid_xcalloc((size_t)g->nkeys, sizeof *p->vals);
        p->slot = -1;
        int placed = 0;
        for (uint64_t attempt = 0; attempt < (nrandom > 0 ? 100u : 1u) && !placed; attempt++) {
            long rem = pi;
            for (int i = g->nkeys - 1; i >= 0; i--) {
                grid_key *k = &g->keys[i];
                free(p->vals[i]);
                if (nrandom > 0) {
                    double u = unit53(rkey, (uint64_t)pi, (uint64_t)i, attempt);
                    if (k->is_range)
                        p->vals[i] = format_draw(k, u);
                    else
                        p->vals[i] = grid_xstrdup(k->values[(int)(u * k->nvalues) % k->nvalues]);
                } else {
                    p->vals[i] = grid_xstrdup(k->values[rem % k->nvalues]);
                    rem /= k->nvalues;
                }
            }
            point_name(g, p);
            placed = !name_taken(g, p->name);
        }
        if (!placed) {
            for (int i = 0; i < g->nkeys; i++) free(p->vals[i]);
            free(p->vals);
            memset(p, 0, sizeof *p);
            if (nrandom > 0) continue;
            return "two points of the grid have the same folder name (a value is repeated?)";
        }
        g->npoints++;
    }
    return NULL;
}

/* --set strings of a point: the common ones, then KEY=VALUE per key. malloc'd array. */
char **grid_point_sets(const grid *g, const grid_point *p, int *n)
{
    char **s = grid_xcalloc((size_t)(g->nsets + g->nkeys + 1), sizeof *s);
    int k = 0;
    for (int i = 0; i < g->nsets; i++) s[k++] = grid_xstrdup(g->sets[i]);
    for (int i = 0; i < g->nkeys; i++) {
        size_t len = strlen(g->keys[i].name) + strlen(p->vals[i]) + 2;
        s[k] = grid_xcalloc(len, 1);
        snprintf(s[k++], len, "%s=%s", g->keys[i].name, p->vals[i]);
    }
    *n = k;
    return s;
}

void grid_free_sets(char **s, int n)
{
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

void grid_free(grid *g)
{
    for (int i = 0; i < g->nkeys; i++) {
        grid_key *k = &g->keys[i];
        for (int v = 0; v < k->nvalues; v++) free(k->values[v]);
        free(k->values);
        free((void *)k->name);
    }
    for (int i = 0; i < g->npoints; i++) {
        for (int k = 0; k < g->nkeys; k++) free(g->points[i].vals[k]);
        free(g->points[i].vals);
    }
    free(g->points);
}
