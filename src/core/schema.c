/* The schema validator: reads a YAML mapping against a field table into a C struct,
 * reporting every unknown key, wrong type, out-of-range value and unknown enum value at its
 * FILE:LINE:COL with the key path. Defaults are YAML text run through the same converters. */
#include "core/schema.h"

#include "core/backend.h"
#include "core/init.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int tfc_node_is_null(const tfc_node *n)
{
    if (!n) return 1;
    if (n->kind != TFC_NODE_SCALAR || n->quoted) return 0;
    const char *s = n->str;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
           !strcmp(s, "NULL");
}

void tfc_node_describe(const tfc_node *n, char *buf, size_t size)
{
    if (!n) snprintf(buf, size, "nothing");
    else if (n->kind != TFC_NODE_SCALAR) snprintf(buf, size, "%s", tfc_node_kind_name(n->kind));
    else if (strlen(n->str) > 40) snprintf(buf, size, "\"%.37s...\"", n->str);
    else snprintf(buf, size, "\"%s\"", n->str);
}

/* What a value written as Python writes it stands for in YAML, as a note after an error:
 * None, a tuple (whose commas split it inside a flow mapping: `(28`, then the keys `28` and
 * `1)`, a number or a closing parenthesis); "" for anything else. `key`: n is a mapping's
 * key. */
static const char *python_note(const tfc_node *n, int key)
{
    if (!n || n->kind != TFC_NODE_SCALAR || n->quoted) return "";
    const char *s = n->str;
    const size_t len = strlen(s);
    if (!key && !strcmp(s, "None")) return " (Python's None: YAML writes null, or ~)";
    if ((!key && s[0] == '(') ||
        (key && len && (s[len - 1] == ')' || strspn(s, "0123456789.- ") == len)))
        return " (a Python tuple? YAML writes a list in brackets, [28, 28, 1])";
    return "";
}

static tfc_status expected(const tfc_node *n, const char *path, const char *what, tfc_error *err)
{
    char found[64];
    tfc_node_describe(n, found, sizeof found);
    if (n && n->kind == TFC_NODE_SCALAR && n->quoted)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "expected %s, found the string %s",
                              what, found);
    return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "expected %s, found %s%s", what, found,
                          python_note(n, 0));
}

tfc_status tfc_node_int(const tfc_node *n, const char *path, long long lo, long long hi,
                        long long *out, tfc_error *err)
{
    char what[96];
    if (lo > hi) snprintf(what, sizeof what, "an integer");
    else if (hi == LLONG_MAX) snprintf(what, sizeof what, "an integer >= %lld", lo);
    else snprintf(what, sizeof what, "an integer in [%lld, %lld]", lo, hi);
    if (!n || n->kind != TFC_NODE_SCALAR || n->quoted || !*n->str)
        return expected(n, path, what, err);
    char *end;
    errno = 0;
    long long v = strtoll(n->str, &end, 10);
    if (*end || errno) return expected(n, path, what, err);
    if (lo <= hi && (v < lo || v > hi)) return expected(n, path, what, err);
    *out = v;
    return TFC_OK;
}

tfc_status tfc_node_double(const tfc_node *n, const char *path, double *out, tfc_error *err)
{
    if (!n || n->kind != TFC_NODE_SCALAR || n->quoted || !*n->str)
        return expected(n, path, "a number", err);
    char *end;
    double v = strtod(n->str, &end);
    if (*end || !isfinite(v)) return expected(n, path, "a finite number", err);
    *out = v;
    return TFC_OK;
}

tfc_status tfc_node_bool(const tfc_node *n, const char *path, int *out, tfc_error *err)
{
    if (n && n->kind == TFC_NODE_SCALAR && !n->quoted) {
        const char *s = n->str;
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
            *out = 1;
            return TFC_OK;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
            *out = 0;
            return TFC_OK;
        }
    }
    return expected(n, path, "true or false", err);
}

/* Keras's second names of a value (keras.activations: silu is swish, hard_swish is
 * hard_silu, and Keras 3 writes silu and hard_silu into a model's config;
 * keras.initializers: uniform, normal, one, zero): an enum whose choices hold the first name
 * takes the second as well. */
static const char *const enum_aliases[][2] = {{"swish", "silu"},
                                              {"hard_silu", "hard_swish"},
                                              {"random_uniform", "uniform"},
                                              {"random_normal", "normal"},
                                              {"ones", "one"},
                                              {"zeros", "zero"}};

/* Whether name[0, len) is `choice` but for case and underscores (HeNormal, he_normal) */
static int loosely(const char *name, size_t len, const char *choice)
{
    size_t i = 0;
    for (const char *c = choice; *c; c++) {
        if (*c == '_') continue;
        while (i < len && name[i] == '_') i++;
        if (i == len || tolower((unsigned char)name[i]) != tolower((unsigned char)*c)) return 0;
        i++;
    }
    while (i < len && name[i] == '_') i++;
    return i == len;
}

int tfc_python_name(const char *s, const char **name, int *len, int *args)
{
    const char *open = strchr(s, '(');
    const size_t n = strlen(s);
    if (open && s[n - 1] != ')') return 0;
    const char *end = open ? open : s + n, *at = end;
    while (at > s && (isalnum((unsigned char)at[-1]) || at[-1] == '_')) at--;
    for (const char *p = s; p < at; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.') return 0;
    if (at == end || (!open && at == s)) return 0; /* a bare name is no Python of its own */
    *name = at;
    *len = (int)(end - at);
    *args = 0;
    for (const char *p = open ? open + 1 : end; p < s + n - 1; p++)
        *args |= !isspace((unsigned char)*p);
    return 1;
}

/* A value written as Python writes it that stands for one of `choices` (HeNormal(), L2(0.01),
 * keras.activations.relu, tf.nn.relu): an error naming the choice and how YAML writes it;
 * TFC_OK otherwise. */
static tfc_status python_form(const tfc_node *n, const char *path, const char *const *choices,
                              tfc_error *err)
{
    const char *s = n->str, *name, *choice = NULL;
    int len, args;
    if (!tfc_python_name(s, &name, &len, &args)) return TFC_OK;
    for (int i = 0; choices[i] && !choice; i++)
        if (loosely(name, (size_t)len, choices[i])) choice = choices[i];
    if (!choice) return TFC_OK;
    if (!args)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "\"%s\" is Python; write %s (tfc's "
                              "name, %s)", s, choice, strchr(s, '(') ? "without the call"
                              : "without a module");
    if (choices == tfc_act_names)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "\"%s\" is a Python call: an "
                              "activation here is its name alone (%s, at Keras's defaults); "
                              "one with arguments is a layer of its own after this one, "
                              "- %.*s: {...}", s, choice, len, name);
    return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "\"%s\" is a Python call: write %s, "
                          "and the arguments by name in a mapping where this key takes one, "
                          "{type: %s, ...}", s, choice, choice);
}

tfc_status tfc_node_enum(const tfc_node *n, const char *path, const char *const *choices,
                         int *out, tfc_error *err)
{
    char names[1024];
    tfc_join_names(names, sizeof names, choices);
    if (!n || n->kind != TFC_NODE_SCALAR) {
        char what[1100];
        snprintf(what, sizeof what, "one of: %s", names);
        return expected(n, path, what, err);
    }
    for (int i = 0; choices[i]; i++)
        if (strcmp(n->str, choices[i]) == 0) {
            *out = i;
            return TFC_OK;
        }
    for (size_t a = 0; a < sizeof enum_aliases / sizeof *enum_aliases; a++)
        for (int i = 0; !strcmp(n->str, enum_aliases[a][1]) && choices[i]; i++)
            if (strcmp(enum_aliases[a][0], choices[i]) == 0) {
                *out = i;
                return TFC_OK;
            }
    if (python_form(n, path, choices, err)) return TFC_ERR_CONFIG;
    if (*python_note(n, 0))
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "unknown value \"%s\"%s", n->str,
                              python_note(n, 0));
    const char *guess = tfc_did_you_mean(n->str, choices);
    if (guess)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "unknown value \"%s\"; did you mean \"%s\"? (one of: %s)", n->str,
                              guess, names);
    return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "unknown value \"%s\" (one of: %s)",
                          n->str, names);
}

static int out_of_range(const tfc_field *f, double v)
{
    return f->min <= f->max && (v < f->min || v > f->max);
}

static tfc_status range_error(const tfc_field *f, const tfc_node *n, const char *path,
                              tfc_error *err)
{
    char what[128];
    const char *kind = f->type == TFC_F_FLOAT || f->type == TFC_F_FLOAT_LIST ? "a number"
                                                                               : "an integer";
    if (f->max >= 1e300) snprintf(what, sizeof what, "%s >= %.15g", kind, f->min);
    else if (f->min <= -1e300) snprintf(what, sizeof what, "%s <= %.15g", kind, f->max);
    else snprintf(what, sizeof what, "%s in [%.15g, %.15g]", kind, f->min, f->max);
    return expected(n, path, what, err);
}

static tfc_status read_int(const tfc_field *f, const tfc_node *n, const char *path, int *out,
                           tfc_error *err)
{
    long long v;
    int bounded = f->min <= f->max;
    tfc_status s = tfc_node_int(n, path, bounded ? (long long)f->min : INT32_MIN,
                                bounded ? (long long)f->max : INT32_MAX, &v, err);
    if (s) return s;
    if (out_of_range(f, (double)v)) return range_error(f, n, path, err);
    *out = (int)v;
    return TFC_OK;
}

static tfc_status read_double(const tfc_field *f, const tfc_node *n, const char *path,
                              double *out, tfc_error *err)
{
    tfc_status s = tfc_node_double(n, path, out, err);
    if (s) return s;
    return out_of_range(f, *out) ? range_error(f, n, path, err) : TFC_OK;
}

/* Reads a list of numbers; a single scalar counts as a one-item list. */
static tfc_status read_list(const tfc_field *f, const tfc_node *n, const char *path, void *dst,
                            tfc_error *err)
{
    int is_int = f->type == TFC_F_INT_LIST;
    int count = n->kind == TFC_NODE_SEQ ? n->n : 1;
    if (n->kind == TFC_NODE_MAP) return expected(n, path, "a list of numbers", err);
    if (count > TFC_LIST_MAX) {
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "expected at most %d items, found %d",
                              TFC_LIST_MAX, count);
    }
    tfc_int_list *il = dst;
    tfc_float_list *fl = dst;
    for (int i = 0; i < count; i++) {
        const tfc_node *item = n->kind == TFC_NODE_SEQ ? n->vals[i] : n;
        char ipath[320];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        tfc_status s = is_int ? read_int(f, item, ipath, &il->v[i], err)
                              : read_double(f, item, ipath, &fl->v[i], err);
        if (s) return s;
    }
    if (is_int) il->n = count;
    else fl->n = count;
    return TFC_OK;
}

/* A TFC_F_FIXED field given a value (not null): its default, or an error naming it. A
 * true/false or numeric default matches any spelling of its value (True, 0.0, 1e0). */
static tfc_status read_fixed(const tfc_field *f, const tfc_node *n, const char *path,
                             tfc_error *err)
{
    int only_null = !strcmp(f->def, TFC_NO_DEFAULT), same = 0;
    if (!only_null && n->kind == TFC_NODE_SCALAR) {
        tfc_node d = {.kind = TFC_NODE_SCALAR, .str = (char *)f->def};
        int a, b;
        double x, y;
        tfc_error quiet;
        tfc_error_clear(&quiet);
        if (!tfc_node_bool(&d, path, &a, &quiet))
            same = !tfc_node_bool(n, path, &b, &quiet) && a == b;
        else if (!tfc_node_double(&d, path, &x, &quiet))
            same = !tfc_node_double(n, path, &y, &quiet) && x == y;
        else
            same = !strcmp(n->str, f->def);
    }
    if (same) return TFC_OK;
    if (only_null)
        tfc_node_error(err, TFC_ERR_CONFIG, n, path, "not supported by tfc: only null "
                       "(Keras's default, None) is accepted");
    else
        tfc_node_error(err, TFC_ERR_CONFIG, n, path, "not supported by tfc: only %s (Keras's "
                       "default) is accepted", f->def);
    if (f->help) tfc_error_hint(err, "%s", f->help);
    return TFC_ERR_CONFIG;
}

static tfc_status read_field(const tfc_field *f, const tfc_node *n, const char *path, char *out,
                             tfc_error *err)
{
    void *dst = out + f->offset;
    switch (f->type) {
    case TFC_F_INT: return read_int(f, n, path, dst, err);
    case TFC_F_FLOAT: return read_double(f, n, path, dst, err);
    case TFC_F_BOOL: return tfc_node_bool(n, path, dst, err);
    case TFC_F_ENUM: return tfc_node_enum(n, path, f->choices, dst, err);
    case TFC_F_STRING:
        if (n->kind != TFC_NODE_SCALAR || !*n->str) return expected(n, path, "a string", err);
        *(const char **)dst = n->str;
        return TFC_OK;
    case TFC_F_NODE: *(const tfc_node **)dst = n; return TFC_OK;
    case TFC_F_FIXED: return read_fixed(f, n, path, err);
    case TFC_F_REFUSED: return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "%s", f->help);
    case TFC_F_REGULARIZER: {
        tfc_regularizer r;
        return tfc_regularizer_parse(n, path, &r, err);
    }
    case TFC_F_CONSTRAINT: {
        tfc_constraint c;
        return tfc_constraint_parse(n, path, &c, err);
    }
    case TFC_F_INT_PAIR: {
        int *pair = dst;
        long long probe;
        tfc_error quiet;
        tfc_error_clear(&quiet);
        if (n->kind == TFC_NODE_SCALAR &&
            tfc_node_int(n, path, LLONG_MIN, LLONG_MAX, &probe, &quiet) == TFC_OK) {
            tfc_status s = read_int(f, n, path, &pair[0], err);
            if (s) return s;
            pair[1] = pair[0];
            return TFC_OK;
        }
        if (n->kind != TFC_NODE_SEQ || n->n != 2) {
            char what[96];
            snprintf(what, sizeof what, "%s or a pair",
                     f->min >= 1 && f->min <= f->max ? "a positive integer" : "an integer");
            return expected(n, path, what, err);
        }
        for (int i = 0; i < 2; i++) {
            char ipath[320];
            snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
            tfc_status s = read_int(f, n->vals[i], ipath, &pair[i], err);
            if (s) return s;
        }
        return TFC_OK;
    }
    case TFC_F_INT_LIST:
    case TFC_F_FLOAT_LIST: return read_list(f, n, path, dst, err);
    }
    return TFC_ERR_INTERNAL;
}

static void clear_field(const tfc_field *f, char *out)
{
    void *dst = out + f->offset;
    switch (f->type) {
    case TFC_F_INT:
    case TFC_F_BOOL:
    case TFC_F_ENUM: *(int *)dst = 0; break;
    case TFC_F_FLOAT: *(double *)dst = 0; break;
    case TFC_F_STRING: *(const char **)dst = NULL; break;
    case TFC_F_NODE: *(const tfc_node **)dst = NULL; break;
    case TFC_F_FIXED:
    case TFC_F_REGULARIZER:
    case TFC_F_CONSTRAINT:
    case TFC_F_REFUSED: break;
    case TFC_F_INT_PAIR: ((int *)dst)[0] = ((int *)dst)[1] = 0; break;
    case TFC_F_INT_LIST: memset(dst, 0, sizeof(tfc_int_list)); break;
    case TFC_F_FLOAT_LIST: memset(dst, 0, sizeof(tfc_float_list)); break;
    }
}

/* Applies a field's default: its text read as an unquoted scalar. A bad default is a bug in
 * the table, caught by the assert. */
static void apply_default(const tfc_field *f, char *out)
{
    clear_field(f, out);
    if (!strcmp(f->def, TFC_NO_DEFAULT) || f->type == TFC_F_NODE || f->type == TFC_F_FIXED ||
        f->type == TFC_F_REGULARIZER || f->type == TFC_F_CONSTRAINT)
        return;
    tfc_node n = {.kind = TFC_NODE_SCALAR, .str = (char *)f->def};
    if (f->type == TFC_F_STRING) {
        *(const char **)(out + f->offset) = f->def;
        return;
    }
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(read_field(f, &n, f->name, out, &err) == TFC_OK);
}

tfc_status tfc_schema_apply(const tfc_field *fields, const tfc_node *map, const char *path,
                            void *out, tfc_error *err)
{
    tfc_status status = TFC_OK;
    char kpath[320];
    if (map && tfc_node_is_null(map)) map = NULL;
    if (map && map->kind != TFC_NODE_MAP) {
        expected(map, path, "a mapping of arguments", err);
        map = NULL;
        status = TFC_ERR_CONFIG;
    }
    const char *names[128], *settable[128]; /* settable: the list an unknown key shows */
    int nf = 0, ns = 0;
    for (const tfc_field *f = fields; f->name && nf < 127; f++) {
        names[nf++] = f->name;
        if (f->type != TFC_F_FIXED && f->type != TFC_F_REFUSED) settable[ns++] = f->name;
    }
    names[nf] = settable[ns] = NULL;
    const char *suggested[128];
    int nsuggested = 0;
    for (int i = 0; map && i < map->n; i++) {
        const char *key = map->keys[i]->str;
        int known = 0;
        for (int j = 0; j < nf; j++) known |= strcmp(names[j], key) == 0;
        if (known) continue;
        /* A file's top level may hold anchors for later aliases under keys no schema has:
         * `x-...` (as docker-compose) or `.name`. */
        if (!*path && (!strncmp(key, "x-", 2) || key[0] == '.')) continue;
        snprintf(kpath, sizeof kpath, "%s%s%s", path, *path ? "." : "", key);
        const char *guess = tfc_did_you_mean(key, names);
        char list[1024];
        tfc_join_names(list, sizeof list, settable);
        if (guess && nsuggested < 128) suggested[nsuggested++] = guess;
        if (*python_note(map->keys[i], 1))
            tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], kpath, "unknown key '%s'%s", key,
                           python_note(map->keys[i], 1));
        else if (guess)
            tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], kpath,
                           "unknown key '%s'; did you mean '%s'?", key, guess);
        else
            tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], kpath,
                           "unknown key '%s' (known keys: %s)", key, ns ? list : "none");
        status = TFC_ERR_CONFIG;
    }
    for (const tfc_field *f = fields; f->name; f++) {
        const tfc_node *n = tfc_node_get(map, f->name);
        snprintf(kpath, sizeof kpath, "%s%s%s", path, *path ? "." : "", f->name);
        if (tfc_node_is_null(n)) {
            if (f->def) {
                apply_default(f, out);
                continue;
            }
            int misspelt = 0; /* already reported as a did-you-mean */
            for (int j = 0; j < nsuggested; j++) misspelt |= strcmp(suggested[j], f->name) == 0;
            if (!misspelt && map)
                tfc_node_error(err, TFC_ERR_CONFIG, map, kpath, "missing required key '%s'",
                               f->name);
            else if (!misspelt)
                tfc_error_set(err, TFC_ERR_CONFIG, "%s: missing required key '%s'", path,
                              f->name);
            clear_field(f, out);
            status = TFC_ERR_CONFIG;
            continue;
        }
        if (read_field(f, n, kpath, out, err) != TFC_OK) {
            clear_field(f, out);
            status = TFC_ERR_CONFIG;
        }
    }
    return status;
}

void tfc_schema_print_help(FILE *f, const tfc_field *fields, const char *indent)
{
    static const char *const type_names[] = {"int", "float", "bool", "string", "enum",
                                              "int or [int, int]", "list of int",
                                              "list of float", "mapping", "fixed",
                                              "regularizer", "constraint", "refused"};
    for (const tfc_field *fd = fields; fd->name; fd++) {
        if (fd->type == TFC_F_REFUSED) continue;
        fprintf(f, "%s%-22s %-18s", indent, fd->name, type_names[fd->type]);
        if (fd->type == TFC_F_FIXED)
            fprintf(f, " only %s", strcmp(fd->def, TFC_NO_DEFAULT) ? fd->def : "null");
        else if (!fd->def) fprintf(f, " (required)");
        else if (strcmp(fd->def, TFC_NO_DEFAULT)) fprintf(f, " default %s", fd->def);
        if (fd->help) fprintf(f, "  %s", fd->help);
        if (fd->choices) {
            char names[1024];
            tfc_join_names(names, sizeof names, fd->choices);
            fprintf(f, " [%s]", names);
        }
        fputc('\n', f);
    }
}
