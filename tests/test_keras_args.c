/* A layer's YAML is its Keras 3 constructor (docs/SPEC.md): every layer's schema held against
 * Keras's own signatures, which tests/ref/keras_signatures.py wrote into
 * tests/ref/keras_signatures.txt (so this runs without Keras). Each argument tfc takes is one
 * of Keras's, with Keras's default; each of Keras's arguments is one tfc takes, or is listed
 * below with what tfc does instead (so a new gap, or a closed one, fails here). Then the
 * arguments tfc accepts only at Keras's default (TFC_F_FIXED) and Conv2D's groups. A layer's
 * first field is Keras's first parameter, which a scalar item gives (`- Dense: 64`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/model.h"
#include "core/init.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "layers/layer.h"
#include "layers/rnn.h"
#include "solver/optimizer.h"
#include "testutil.h"

/* One layer's line of the fixture: its type, then name=default pairs (tab-separated). */
typedef struct keras_sig {
    char type[64];
    int n;
    char name[48][40];
    char def[48][80];
} keras_sig;

static int load_sigs(keras_sig *sig, int max)
{
    char *text = tfc_test_read("tests/ref/keras_signatures.txt", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        CU_ASSERT_FATAL(n < max);
        keras_sig *s = &sig[n++];
        memset(s, 0, sizeof *s);
        char *save, *tok = strtok_r(line, "\t", &save);
        snprintf(s->type, sizeof s->type, "%s", tok);
        while ((tok = strtok_r(NULL, "\t", &save))) {
            char *eq = strchr(tok, '=');
            CU_ASSERT_FATAL(eq && s->n < 48);
            *eq = 0;
            snprintf(s->name[s->n], sizeof s->name[0], "%s", tok);
            snprintf(s->def[s->n], sizeof s->def[0], "%s", eq + 1);
            s->n++;
        }
    }
    free(text);
    return n;
}

/* TYPE.ARG pairs, each with why: the lists below. */
typedef struct listed {
    const char *arg, *why;
} listed;

/* tfc's arguments Keras 3.15's constructor does not have */
static const listed tfc_only[] = {
    {"LayerNormalization.rms_scaling", "Keras 3's earlier LayerNormalization argument, kept"},
    {"MultiHeadAttention.use_causal_mask", "Keras's call() argument: tfc's layer has no call"},
    {"GroupQueryAttention.use_causal_mask", "Keras's call() argument: tfc's layer has no call"},
    {"Attention.use_causal_mask", "Keras's call() argument: tfc's layer has no call"},
    {"Attention.return_attention_scores", "Keras's call() argument: only false"},
    {"AdditiveAttention.use_causal_mask", "Keras's call() argument: tfc's layer has no call"},
    {"AdditiveAttention.return_attention_scores", "Keras's call() argument: only false"},
    {"RandomContrast.data_format", "channels_last only, as every tfc image layer"},
    {"LeakyReLU.alpha", "Keras 2's name of negative_slope, which Keras 3 still takes (kwargs)"},
    {"EinsumDense.activity_regularizer", "the base Layer's keyword, which EinsumDense takes in "
     "its kwargs"},
    {"RNN.activity_regularizer", "the base Layer's keyword, which RNN takes in its kwargs"},
    {"AutoContrast.data_format", "BaseImagePreprocessingLayer's keyword, which AutoContrast "
     "takes in its kwargs; channels_last only"},
    {"Embedding.input_length", "Keras 2's argument, which Keras 3 pops from its kwargs with a "
     "deprecation warning; checked against the steps"},
    {"LSTM.implementation", "the cell's keyword, which Keras 3 pops from its kwargs"},
    {"GRU.implementation", "the cell's keyword, which Keras 3 pops from its kwargs"},
    {"LSTMCell.implementation", "Keras 3 pops it from its kwargs"},
    {"GRUCell.implementation", "Keras 3 pops it from its kwargs"},
    {NULL, NULL}};

/* tfc defaults of "~" that the layer resolves to Keras's default when it builds */
static const listed resolved_at_build[] = {
    {"Bidirectional.layer", "required: the layer checks it names one recurrent layer"},
    {"TimeDistributed.layer", "required: the layer checks it names one layer it can wrap"},
    {"SpectralNormalization.layer", "required: the layer checks it names one layer with a "
     "kernel"},
    {"RNN.cell", "required: the layer checks it names one cell or a StackedRNNCells"},
    {"ZeroPadding2D.padding", "1 on every side"},
    {"Cropping2D.cropping", "0 on every side"},
    {"ZeroPadding1D.padding", "1 on each side"},
    {"Cropping1D.cropping", "1 on each side"},
    {"ZeroPadding3D.padding", "1 on every side"},
    {"Cropping3D.cropping", "1 on every side"},
    {"RandomContrast.value_range", "[0, 255]"},
    {"RandomBrightness.value_range", "[0, 255]"},
    {"RandomInvert.value_range", "[0, 255]"},
    {"Solarization.value_range", "[0, 255]"},
    {"RandomPosterization.value_range", "[0, 255]"},
    {"RandomColorDegeneration.value_range", "[0, 255]"},
    {"RandomSaturation.value_range", "[0, 255]"},
    {"RandomHue.value_range", "[0, 255]"},
    {"RandomColorJitter.value_range", "[0, 255]"},
    {"RandomErasing.scale", "[0.02, 0.33]"},
    {"RandomErasing.value_range", "[0, 255]"},
    {"RandomGaussianBlur.value_range", "[0, 255]"},
    {"AutoContrast.value_range", "[0, 255]"},
    {"Equalization.value_range", "[0, 255]"},
    {"RandomSharpness.value_range", "[0, 255]"},
    {"RandAugment.value_range", "[0, 255]"},
    {"AugMix.value_range", "[0, 255]"},
    {"ContrastLimitedAdaptiveHistogramEqualization.value_range", "[0, 255]"},
    {"ContrastLimitedAdaptiveHistogramEqualization.tile_grid_size", "[8, 8]"},
    {"RandomElasticTransform.value_range", "[0, 255]"},
    {NULL, NULL}};

/* Keras's arguments tfc's schema does not take: an unknown key, so an error naming it */
static const listed keras_only[] = {
    /* Keras's dtype policy, a keyword of every layer (in **kwargs elsewhere, so in no other
     * signature); an unknown key whose hint names the solver's `precision` (graph/model.c) */
    {"SpatialDropout1D.dtype", "a dtype policy: the solver's precision"},
    {"SpatialDropout2D.dtype", "a dtype policy: the solver's precision"},
    {"SpatialDropout3D.dtype", "a dtype policy: the solver's precision"},
    {NULL, NULL}};

static const char *find_listed(const listed *list, const char *type, const char *arg)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", type, arg);
    for (const listed *l = list; l->arg; l++)
        if (!strcmp(l->arg, key)) return l->why;
    return NULL;
}

/* Whether tfc's default text `t` (a field of type `type` named `name`) means Keras's default
 * `k` (Python's repr: None, True, 0.0, 'valid', (1, 1)). */
static int same_default(const char *name, const char *t, const char *k)
{
    int none = !strcmp(k, "None"), tnull = !strcmp(t, TFC_NO_DEFAULT);
    if (none)
        return tnull || (!strcmp(name, "activation") && !strcmp(t, "linear")) ||
               (!strcmp(name, "data_format") && !strcmp(t, "channels_last")) ||
               (!strcmp(name, "seed") && !strcmp(t, "0")); /* 0: drawn from the run's seed */
    if (tnull) return 0;
    char kb[80];
    snprintf(kb, sizeof kb, "%s", k);
    size_t n = strlen(kb);
    if (n >= 2 && kb[0] == '\'' && kb[n - 1] == '\'') { /* a string */
        kb[n - 1] = 0;
        return !strcmp(t, kb + 1);
    }
    if (!strcmp(kb, "True") || !strcmp(kb, "False"))
        return !strcmp(t, kb[0] == 'T' ? "true" : "false");
    if (kb[0] == '(') { /* a tuple of equal numbers, which tfc writes as one */
        double first = 0;
        int count = 0;
        for (char *p = kb + 1; *p && *p != ')';) {
            char *end;
            double v = strtod(p, &end);
            if (end == p) return 0;
            if (count++ && v != first) return 0;
            first = v;
            p = end + strspn(end, ", ");
        }
        char *end;
        return count > 0 && strtod(t, &end) == first && !*end;
    }
    char *e1, *e2;
    double a = strtod(t, &e1), b = strtod(kb, &e2);
    return !*e1 && !*e2 && a == b;
}

/* What test_signatures has found: arguments compared, and the list entries used. */
typedef struct tally {
    int checked, used_only, used_build, used_keras;
} tally;

/* The fields of `type` (a layer type, or @optimizer.NAME; its `type` key skipped) against
 * Keras's signature s. */
static void check_fields(const char *type, const tfc_field *fields, const keras_sig *s,
                         tally *t)
{
    for (const tfc_field *f = fields; f && f->name; f++) {
        if (type[0] == '@' && !strcmp(f->name, "type")) continue;
        int k = -1;
        for (int j = 0; j < s->n; j++)
            if (!strcmp(s->name[j], f->name)) k = j;
        if (k < 0 && f->type == TFC_F_REFUSED) continue; /* an old name, refused with a hint */
        if (k < 0) {
            const char *why = find_listed(tfc_only, type, f->name);
            if (!why) fprintf(stderr, "\n%s.%s: not Keras's argument\n", type, f->name);
            CU_ASSERT(why != NULL);
            t->used_only += why != NULL;
            continue;
        }
        t->checked++;
        const char *kd = s->def[k];
        if (!f->def || !strcmp(kd, "<required>")) { /* required on both sides */
            int ok = (!f->def) == !strcmp(kd, "<required>") ||
                     find_listed(resolved_at_build, type, f->name);
            if (!ok) fprintf(stderr, "\n%s.%s: required on one side only\n", type, f->name);
            CU_ASSERT(ok);
            t->used_build += ok && f->def;
            continue;
        }
        int ok;
        if (f->type == TFC_F_NODE && strstr(f->name, "initializer")) {
            /* the default is in the help: "default glorot_uniform" */
            char want[80];
            snprintf(want, sizeof want, "%.*s", (int)strlen(kd) - 2, kd + 1);
            ok = f->help && strstr(f->help, want);
        } else if (same_default(f->name, f->def, kd)) {
            ok = 1;
        } else {
            ok = find_listed(resolved_at_build, type, f->name) != NULL;
            t->used_build += ok;
        }
        if (!ok)
            fprintf(stderr, "\n%s.%s: tfc's default %s, Keras's %s\n", type, f->name, f->def,
                    kd);
        CU_ASSERT(ok);
    }
    for (int j = 0; j < s->n; j++) {
        int mine = 0;
        for (const tfc_field *f = fields; f && f->name; f++) mine |= !strcmp(f->name, s->name[j]);
        if (!strcmp(s->name[j], "name") || mine) continue;
        const char *why = find_listed(keras_only, type, s->name[j]);
        if (!why)
            fprintf(stderr, "\n%s.%s: Keras's argument, neither in tfc's schema nor listed\n",
                    type, s->name[j]);
        CU_ASSERT(why != NULL);
        t->used_keras += why != NULL;
    }
}

static const keras_sig *find_sig(const keras_sig *sig, int n, const char *type)
{
    for (int j = 0; j < n; j++)
        if (!strcmp(sig[j].type, type)) return &sig[j];
    return NULL;
}

static void test_signatures(void)
{
    static keras_sig sig[192];
    const int nsig = load_sigs(sig, 192);
    CU_ASSERT(nsig >= 58);
    tally t = {0};
    int layers = 0, optimizers = 0;
    for (int i = 0; tfc_layer_registry[i]; i++) {
        const tfc_layer_ops *o = tfc_layer_registry[i];
        const keras_sig *s = find_sig(sig, nsig, o->type);
        if (!s) { /* KerasHub's layers: not in keras.layers */
            int hub = !strcmp(o->type, "PositionEmbedding") ||
                      !strcmp(o->type, "TokenAndPositionEmbedding");
            if (!hub) fprintf(stderr, "\n%s: not in tests/ref/keras_signatures.txt\n", o->type);
            CU_ASSERT(hub);
            continue;
        }
        layers++;
        /* a scalar item (`- Dense: 64`) is the schema's first field: Keras's first parameter */
        const char *mine = o->schema && o->schema[0].name ? o->schema[0].name : NULL;
        const int first = mine ? s->n && !strcmp(mine, s->name[0]) : !s->n;
        if (!first)
            fprintf(stderr, "\n%s: the first field is %s, Keras's first parameter %s\n", o->type,
                    mine ? mine : "none", s->n ? s->name[0] : "none");
        CU_ASSERT(first);
        check_fields(o->type, o->schema, s, &t);
    }
    /* an RNN's cells: their layers' schemas without the RNN's arguments (rnn_layer.c) */
    static const char *const cell_types[] = {"LSTMCell", "GRUCell", "SimpleRNNCell", NULL};
    for (const char *const *c = cell_types; *c; c++) {
        tfc_field fields[64];
        const keras_sig *s = find_sig(sig, nsig, *c);
        CU_ASSERT_FATAL(s != NULL && tfc_rnn_cell_schema(*c, fields, 64) > 0);
        check_fields(*c, fields, s, &t);
        layers++;
    }
    for (int k = 0; k < TFC_OPTIMIZER_COUNT; k++) {
        char type[64];
        snprintf(type, sizeof type, "@optimizer.%s", tfc_optimizer_names[k]);
        const keras_sig *s = find_sig(sig, nsig, type);
        if (!s) fprintf(stderr, "\n%s: not in tests/ref/keras_signatures.txt\n", type);
        CU_ASSERT_PTR_NOT_NULL(s);
        if (!s) continue;
        optimizers++;
        check_fields(type, tfc_optimizer_fields((tfc_optimizer_type)k), s, &t);
    }
    int initializers = 0;
    for (int k = 0; k < TFC_INIT_COUNT; k++) {
        if (k == TFC_INIT_LSTM_BIAS) continue; /* tfc's own: the LSTM's unit_forget_bias */
        char type[64];
        snprintf(type, sizeof type, "@initializer.%s", tfc_init_names[k]);
        const keras_sig *s = find_sig(sig, nsig, type);
        if (!s) fprintf(stderr, "\n%s: not in tests/ref/keras_signatures.txt\n", type);
        CU_ASSERT_PTR_NOT_NULL(s);
        if (!s) continue;
        initializers++;
        check_fields(type, tfc_init_fields((tfc_init_kind)k), s, &t);
    }
    /* every listed entry is used: a gap closed or an argument renamed leaves none stale */
    int listed_only = 0, listed_build = 0, listed_keras = 0;
    for (const listed *l = tfc_only; l->arg; l++) listed_only++;
    for (const listed *l = resolved_at_build; l->arg; l++) listed_build++;
    for (const listed *l = keras_only; l->arg; l++) listed_keras++;
    CU_ASSERT_EQUAL(t.used_only, listed_only);
    CU_ASSERT_EQUAL(t.used_build, listed_build);
    CU_ASSERT_EQUAL(t.used_keras, listed_keras);
    printf("\n  %d layers, %d optimizers and %d initializers: %d arguments checked against "
           "Keras 3's", layers, optimizers, initializers, t.checked);
    CU_ASSERT(layers >= 49 && optimizers == TFC_OPTIMIZER_COUNT && initializers == 14 && t.checked >= 340);
}

/* The model text of one layer after a 6x6x4 image, or NULL with err set. */
static tfc_model *one_layer(const char *layer, tfc_error *err)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [6, 6, 4]}\nlayers:\n  - %s\n", layer);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

static void expect_ok(const char *layer)
{
    tfc_error err;
    tfc_model *m = one_layer(layer, &err);
    if (!m) fprintf(stderr, "\n%s: %s\n", layer, err.text);
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
}

static void expect_error(const char *layer, const char *want1, const char *want2)
{
    tfc_error err;
    tfc_model *m = one_layer(layer, &err);
    CU_ASSERT_PTR_NULL(m);
    int ok = strstr(err.text, want1) && (!want2 || strstr(err.text, want2));
    if (!ok) fprintf(stderr, "\n%s: expected '%s' and '%s' in: %s\n", layer, want1,
                     want2 ? want2 : "", err.text);
    CU_ASSERT(ok);
    tfc_model_free(m);
}

/* keras.activations that tfc has no kernel for: an unknown value of `activation`, so an
 * error naming it with tfc's list */
static const char *const keras_only_acts[] = {
    "celu", "glu", "hard_shrink", "hard_tanh", "log_sigmoid", "log_softmax", "soft_shrink",
    "sparse_plus", "sparse_sigmoid", "sparsemax", "squareplus", "tanh_shrink", "threshold",
    NULL};

/* The activation of name s as tfc's enum reads it, or -1. */
static int act_of(const char *s)
{
    tfc_node n = {.kind = TFC_NODE_SCALAR, .str = (char *)s};
    tfc_error quiet;
    tfc_error_clear(&quiet);
    int v = -1;
    return tfc_node_enum(&n, "activation", tfc_act_names, &v, &quiet) ? -1 : v;
}

/* Every activation name tfc knows is one of keras.activations'; every one of those is
 * tfc's, or listed above; a name and the one Keras writes for it into a config (swish:
 * silu, hard_swish: hard_silu) are the same activation in tfc. */
static void test_activations(void)
{
    static keras_sig sig[192];
    const int nsig = load_sigs(sig, 192);
    const keras_sig *s = NULL;
    for (int j = 0; j < nsig; j++)
        if (!strcmp(sig[j].type, "@activations")) s = &sig[j];
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int a = 0; tfc_act_names[a]; a++) {
        int found = 0;
        for (int j = 0; j < s->n; j++) found |= !strcmp(s->name[j], tfc_act_names[a]);
        if (!found) fprintf(stderr, "\n%s: not in keras.activations\n", tfc_act_names[a]);
        CU_ASSERT(found);
    }
    int missing = 0, nlisted = 0, aliases = 0;
    for (int j = 0; j < s->n; j++) {
        int mine = act_of(s->name[j]), written = act_of(s->def[j]);
        int is_listed = 0;
        for (int k = 0; keras_only_acts[k]; k++)
            is_listed |= !strcmp(keras_only_acts[k], s->name[j]);
        if (mine < 0) {
            if (!is_listed) fprintf(stderr, "\nkeras.activations.%s: not tfc's\n", s->name[j]);
            CU_ASSERT(is_listed);
            missing++;
            continue;
        }
        CU_ASSERT(!is_listed);
        if (written != mine)
            fprintf(stderr, "\n%s: Keras writes %s, which tfc reads as another\n", s->name[j],
                    s->def[j]);
        CU_ASSERT_EQUAL(written, mine);
        aliases += strcmp(s->name[j], s->def[j]) != 0;
    }
    for (int k = 0; keras_only_acts[k]; k++) nlisted++;
    CU_ASSERT_EQUAL(missing, nlisted);
    CU_ASSERT_EQUAL(aliases, 2); /* swish and hard_swish */
    expect_ok("Flatten: {}\n  - Dense: {units: 3, activation: silu}");
    expect_ok("Activation: {activation: hard_swish}");
    expect_error("Dense: {units: 3, activation: hard_tanh}", "unknown value \"hard_tanh\"",
                 "one of: linear");
}

/* Keras's arguments that tfc has one value of load at it (null, Keras's None, or the
 * default in any spelling: a model's config written by Keras) and fail at any other, at the
 * value's FILE:LINE:COL, naming the argument, with what tfc has instead. */
static void test_fixed_arguments(void)
{
    expect_ok("Dense: {units: 3, kernel_regularizer: null, bias_constraint: ~, lora_rank: null}");
    expect_ok("Conv2D: {filters: 2, kernel_size: 3, data_format: channels_last, "
              "activity_regularizer: null}");
    expect_ok("BatchNormalization: {renorm: False, renorm_momentum: 0.990, synchronized: false,"
              " gamma_regularizer: null}");
    expect_ok("MaxPooling2D: {data_format: null}");
    expect_ok("Flatten: {data_format: channels_last}");
    expect_ok("Dropout: {rate: 0.5, noise_shape: null}");
    expect_ok("Reshape: {target_shape: [36, 4]}\n  - GRU: {units: 2, use_cudnn: auto, "
              "recurrent_regularizer: null}");
    expect_ok("Reshape: {target_shape: [36, 4]}\n  - LSTM: {units: 2, use_cudnn: false}");
    /* the constraints are Keras's: its names and serialized form load, a bad one fails */
    expect_ok("Dense: {units: 3, bias_constraint: {class_name: NonNeg, config: {}}, "
              "kernel_constraint: max_norm}");
    expect_error("Dense: {units: 3, bias_constraint: {class_name: NonNeg, config: {axis: 0}}}",
                 "error: layers[0].Dense.bias_constraint.config.axis: unknown key 'axis'",
                 NULL);
    expect_error("Conv2D: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "layers[0].Conv2D.data_format: not supported by tfc: only channels_last",
                 "(height, width, channels)");
    expect_error("BatchNormalization: {renorm: true}",
                 "layers[0].BatchNormalization.renorm: not supported by tfc: only false",
                 "renormalization");
    expect_error("BatchNormalization: {renorm_momentum: 0.9}", "only 0.99", NULL);
    expect_error("Flatten: {data_format: channels_first}", "Flatten.data_format", NULL);
    expect_ok("Conv2DTranspose: {filters: 2, kernel_size: 2, kernel_constraint: max_norm}");
    expect_error("Conv2DTranspose: {filters: 2, kernel_size: 2, kernel_constraint: {type: "
                 "max_norm, axis: [1, 2]}}", "kernel_constraint: axis: tfc takes a leading run",
                 NULL);
    expect_error("Reshape: {target_shape: [36, 4]}\n  - LSTM: {units: 2, use_cudnn: true}",
                 "use_cudnn", "auto, false");
    expect_error("Dropout: {rate: 0.5, noise_shape: [null, 1, 6, 1]}",
                 "layer 'dropout': noise_shape: the axes of size 1", "axis 2 between");
    /* an argument Keras lacks is still an unknown key */
    expect_error("Dense: {units: 3, kernel_regulariser: null}",
                 "unknown key 'kernel_regulariser'; did you mean 'kernel_regularizer'?", NULL);
}

/* An initializer of kernel_initializer in a Dense layer after a 6x6x4 image: its parsed form
 * (NULL: an error, its text in err). */
static int init_of(const char *text, tfc_init *out, tfc_error *err)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s", text);
    tfc_error_clear(err);
    tfc_doc *d = tfc_doc_load_string(yaml, strlen(yaml), "i.yaml", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    tfc_status s = tfc_init_parse(tfc_doc_root(d), "kernel_initializer",
                                  tfc_init_make(TFC_INIT_GLOROT_UNIFORM), out, err);
    tfc_doc_free(d);
    return s == TFC_OK;
}

/* Keras's initializer names (uniform, normal, one, zero too) and each type's arguments only:
 * another type's argument is an error, never ignored (it was, before each type had its
 * table); variance_scaling with Keras's formulas; seed null only. */
static void test_initializers(void)
{
    tfc_init in;
    tfc_error err;
    CU_ASSERT(init_of("uniform", &in, &err) && in.kind == TFC_INIT_RANDOM_UNIFORM &&
              in.a == -0.05 && in.b == 0.05);
    CU_ASSERT(init_of("normal", &in, &err) && in.kind == TFC_INIT_RANDOM_NORMAL);
    CU_ASSERT(init_of("one", &in, &err) && in.kind == TFC_INIT_ONES);
    CU_ASSERT(init_of("zero", &in, &err) && in.kind == TFC_INIT_ZEROS);
    CU_ASSERT(init_of("{type: he_normal, seed: null}", &in, &err) &&
              in.kind == TFC_INIT_HE_NORMAL);
    CU_ASSERT(!init_of("{type: glorot_uniform, minval: -1}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "kernel_initializer.minval: unknown key 'minval' "
                                            "(known keys: type, seed)"));
    /* Keras's seed: the weight drawn from it alone (test_layers seeded_initializers) */
    CU_ASSERT(init_of("{type: random_normal, seed: 42}", &in, &err) && in.seeded &&
              in.seed == 42);
    CU_ASSERT(init_of("{type: random_normal}", &in, &err) && !in.seeded);
    CU_ASSERT(!init_of("{type: random_normal, seed: 4.5}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "kernel_initializer.seed"));
    CU_ASSERT(init_of("{type: variance_scaling, scale: 2, mode: fan_avg, distribution: uniform}",
                      &in, &err));
    CU_ASSERT(in.kind == TFC_INIT_VARIANCE_SCALING && in.a == 2 && in.mode == TFC_FAN_AVG &&
              in.distribution == TFC_DIST_UNIFORM);
    CU_ASSERT(!init_of("{type: variance_scaling, mode: fan_sum}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "fan_in, fan_out, fan_avg"));
    /* variance_scaling's spread against its formula on a [300, 200] kernel (fan_in 300,
     * fan_out 200): the sample's variance within 3% of scale / n, and with uniform no value
     * beyond sqrt(3 scale / n); the same draws as he_normal at scale 2, fan_in, truncated */
    const tfc_shape shape = tfc_shape_make(2, (int64_t[]){300, 200});
    static float w[60000], h[60000];
    const struct { const char *yaml; double n; int uniform; } cases[] = {
        {"{type: variance_scaling}", 300, 0},
        {"{type: variance_scaling, scale: 3, mode: fan_out, distribution: untruncated_normal}",
         200 / 3.0, 0},
        {"{type: variance_scaling, scale: 0.5, mode: fan_avg, distribution: uniform}", 500, 1}};
    for (int c = 0; c < 3; c++) {
        CU_ASSERT_FATAL(init_of(cases[c].yaml, &in, &err));
        CU_ASSERT_EQUAL(tfc_init_fill(&in, &shape, 7, w, &err), TFC_OK);
        double sum = 0, sq = 0, top = 0;
        for (int i = 0; i < 60000; i++) {
            sum += w[i], sq += (double)w[i] * w[i];
            top = fmax(top, fabs(w[i]));
        }
        double var = sq / 60000 - (sum / 60000) * (sum / 60000), want = 1 / cases[c].n;
        printf("\n  %s: variance %.4g, formula %.4g", cases[c].yaml, var, want);
        CU_ASSERT(fabs(var / want - 1) < 0.03);
        if (cases[c].uniform) CU_ASSERT(top <= sqrt(3 * want) * (1 + 1e-6));
    }
    CU_ASSERT(init_of("{type: variance_scaling, scale: 2}", &in, &err));
    CU_ASSERT_EQUAL(tfc_init_fill(&in, &shape, 9, w, &err), TFC_OK);
    tfc_init he = tfc_init_make(TFC_INIT_HE_NORMAL);
    CU_ASSERT_EQUAL(tfc_init_fill(&he, &shape, 9, h, &err), TFC_OK);
    CU_ASSERT(memcmp(w, h, sizeof w) == 0);
    /* in a layer, under Keras's names */
    expect_ok("Flatten: {}\n  - Dense: {units: 2, kernel_initializer: uniform, "
              "bias_initializer: {type: variance_scaling, mode: fan_out}}");
    /* Keras's class names, and its serialized form as a model's config writes it */
    CU_ASSERT(init_of("HeNormal", &in, &err) && in.kind == TFC_INIT_HE_NORMAL);
    CU_ASSERT(init_of("Zeros", &in, &err) && in.kind == TFC_INIT_ZEROS);
    CU_ASSERT(init_of("OrthogonalInitializer", &in, &err) && in.kind == TFC_INIT_ORTHOGONAL);
    CU_ASSERT(init_of("{type: RandomNormal, stddev: 0.02}", &in, &err) &&
              in.kind == TFC_INIT_RANDOM_NORMAL && in.b == 0.02);
    CU_ASSERT(init_of("{module: keras.initializers, class_name: GlorotUniform, config: {seed: "
                      "null, input_axes: null, output_axes: null}, registered_name: null}",
                      &in, &err) && in.kind == TFC_INIT_GLOROT_UNIFORM);
    CU_ASSERT(init_of("{class_name: Constant, config: {value: 0.5}}", &in, &err) &&
              in.kind == TFC_INIT_CONSTANT && in.a == 0.5);
    CU_ASSERT(init_of("{class_name: VarianceScaling, config: {seed: null, scale: 2.0, mode: "
                      "fan_out, distribution: uniform}}", &in, &err) &&
              in.kind == TFC_INIT_VARIANCE_SCALING && in.a == 2 && in.mode == TFC_FAN_OUT);
    CU_ASSERT(init_of("{class_name: Zeros, config: {}}", &in, &err) && in.kind == TFC_INIT_ZEROS);
    CU_ASSERT(init_of("{class_name: HeNormal, config: {seed: 3}}", &in, &err) &&
              in.kind == TFC_INIT_HE_NORMAL && in.seeded && in.seed == 3);
    CU_ASSERT(!init_of("{class_name: RandomUniform, config: {stddev: 1}}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "config.stddev: unknown key"));
    CU_ASSERT(!init_of("{class_name: HeNormall}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "kernel_initializer.class_name"));
    CU_ASSERT(!init_of("{class_name: HeNormal, conf: {}}", &in, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "unknown key 'conf'"));
}

/* BatchNormalization's center and scale: without them Keras's layer has no beta (gamma)
 * variable, so neither has a tfc weights file, nor the count of weights (Keras's
 * count_params); the layer reads constants (values: test_vision's Keras fixture
 * batch_norm_no_scale; gradients: test_layers' batchnorm_no_scale; ONNX: test_onnx's
 * bn_no_scale). A file saved so loads back strictly, and its constants are the layer's. */
static void test_batch_norm_center_scale(void)
{
    tfc_error err;
    tfc_model *m = one_layer("BatchNormalization: {name: a, scale: false}\n"
                             "  - BatchNormalization: {name: b, center: false, scale: false}",
                             &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_weight_count(m), 3 * 4 + 2 * 4); /* a: beta, moving; b: moving */
    CU_ASSERT_EQUAL(tfc_model_trainable_count(m), 4);
    CU_ASSERT_EQUAL(tfc_layer_weight_count(tfc_model_layer(m, 0)), 12);
    tfc_backend *be = tfc_cpu_backend_create(1);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    const char *path = tfc_test_path("bn.safetensors");
    CU_ASSERT_EQUAL(tfc_model_save_weights(m, path, &err), TFC_OK);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(tfc_st_count(f), 5);
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "a/gamma"));
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "a/beta"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "b/gamma"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "b/beta"));
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "b/moving_variance"));
    tfc_st_close(f);
    CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, NULL, &err), TFC_OK);
    /* the constant gamma is ones, in the bound model, without any initialisation */
    float g[4];
    tfc_model_param_download(m, &tfc_model_layer(m, 1)->params[0], g);
    CU_ASSERT(g[0] == 1 && g[1] == 1 && g[2] == 1 && g[3] == 1);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A model of `out` outputs with `loss` and `metrics`: NULL and err set on an error. */
static tfc_model *metric_model(int out, const char *loss, const char *metrics, tfc_error *err)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [4]}\nlayers:\n  - Dense: {units: %d}\n"
             "loss: %s\nmetrics: %s\n", out, loss, metrics);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

/* Keras's other metric names: reported as written, computed as tfc's accuracy or top-k
 * accuracy, each allowed with the loss whose labels it reads. */
static void test_metric_names(void)
{
    tfc_error err;
    tfc_model *m = metric_model(6, "sparse_categorical_crossentropy",
                                "[acc, sparse_categorical_accuracy, "
                                "{sparse_top_k_categorical_accuracy: {k: 3}}, loss]", &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_nmetrics(m), 4);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 0)->name, "acc");
    CU_ASSERT_EQUAL(tfc_model_metric(m, 0)->kind, TFC_METRIC_ACCURACY);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 1)->name, "sparse_categorical_accuracy");
    CU_ASSERT_EQUAL(tfc_model_metric(m, 1)->kind, TFC_METRIC_ACCURACY);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 2)->name, "sparse_top_k_categorical_accuracy");
    CU_ASSERT_EQUAL(tfc_model_metric(m, 2)->kind, TFC_METRIC_TOP_K);
    CU_ASSERT_EQUAL(tfc_model_metric(m, 2)->k, 3);
    tfc_model_free(m);
    m = metric_model(6, "categorical_crossentropy",
                     "[categorical_accuracy, top_k_categorical_accuracy]", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    CU_ASSERT(m && tfc_model_metric(m, 1)->k == 5); /* Keras's default */
    tfc_model_free(m);
    /* binary_accuracy thresholds every output (Keras's BinaryAccuracy), beside any float
     * targets */
    m = metric_model(3, "binary_crossentropy", "[binary_accuracy]", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
    m = metric_model(1, "mse", "[binary_accuracy]", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
    /* the classes: a name given alone is reported as written, one with arguments under the
     * instance's default name (Keras's) or its name: */
    m = metric_model(6, "categorical_crossentropy",
                     "[CategoricalAccuracy, {TopKCategoricalAccuracy: {k: 2}}, "
                     "{CategoricalAccuracy: {name: ca}}]", &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 0)->name, "CategoricalAccuracy");
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 1)->name, "top_k_categorical_accuracy");
    CU_ASSERT_EQUAL(tfc_model_metric(m, 1)->k, 2);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 2)->name, "ca");
    CU_ASSERT_EQUAL(tfc_model_metric(m, 2)->kind, TFC_METRIC_ACCURACY);
    tfc_model_free(m);
    const struct { int out; const char *loss, *metrics, *want; } bad[] = {
        {6, "categorical_crossentropy", "[sparse_categorical_accuracy]",
         "m.yaml:5:11: error: metrics[0]: sparse_categorical_accuracy reads the labels of "
         "sparse_categorical_crossentropy, but the loss is categorical_crossentropy; write "
         "accuracy"},
        {6, "sparse_categorical_crossentropy", "[binary_accuracy]", "one class id per row"},
        {6, "sparse_categorical_crossentropy", "[CategoricalAccuracy]",
         "CategoricalAccuracy reads the labels of categorical_crossentropy"},
        {6, "sparse_categorical_crossentropy", "[top_k_categorical_accuracy]",
         "write top_k_accuracy"},
        {6, "sparse_categorical_crossentropy", "[accuracy_top]", "unknown value"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = metric_model(bad[i].out, bad[i].loss, bad[i].metrics, &err);
        CU_ASSERT_PTR_NULL(m);
        if (!strstr(err.text, bad[i].want))
            fprintf(stderr, "\nexpected '%s' in: %s", bad[i].want, err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[i].want));
        tfc_model_free(m);
    }
}

/* Conv2D's groups: the kernel is (kh, kw, channels / groups, filters), as Keras's; channels
 * and filters must divide by it. (Values: test_vision's Keras fixture grouped_conv2d;
 * gradients: test_layers' conv2d_groups; the ONNX export: test_onnx's conv_groups.) */
static void test_conv2d_groups(void)
{
    tfc_error err;
    tfc_model *m = one_layer("Conv2D: {filters: 6, kernel_size: [3, 2], groups: 2}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const tfc_layer *l = tfc_model_layer(m, 0);
    CU_ASSERT_EQUAL(l->params[0].shape.ndim, 4);
    CU_ASSERT_EQUAL(l->params[0].shape.dim[0], 3);
    CU_ASSERT_EQUAL(l->params[0].shape.dim[1], 2);
    CU_ASSERT_EQUAL(l->params[0].shape.dim[2], 2);
    CU_ASSERT_EQUAL(l->params[0].shape.dim[3], 6);
    tfc_model_free(m);
    expect_error("Conv2D: {filters: 5, kernel_size: 3, groups: 2}",
                 "filters (5) must be divisible by groups (2)", NULL);
    expect_error("Conv2D: {filters: 6, kernel_size: 3, groups: 3}",
                 "the input's 4 channels must be divisible by groups (3)", NULL);
    expect_error("Conv2D: {filters: 6, kernel_size: 3, groups: 0}", "groups", NULL);
}

TFC_TEST_MAIN("keras_args", {"signatures", test_signatures}, {"activations", test_activations},
              {"fixed_arguments", test_fixed_arguments}, {"initializers", test_initializers},
              {"batch_norm_center_scale", test_batch_norm_center_scale},
              {"metric_names", test_metric_names},
              {"conv2d_groups", test_conv2d_groups});
