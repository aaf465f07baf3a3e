/* tfc-import: a Keras model as a tfc model file and weights (SPEC §3). Exit 0 on success,
 * 1 on runtime failures (unreadable or damaged files), 2 on bad usage or a model tfc cannot
 * express. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tfc.h"

static const char *input_v[1];
static struct {
    cli_list input;
    const char *weights, *model, *out;
    int overwrite;
} args = {.input = CLI_LIST_OF(input_v)};

static const cli_option options[] = {
    {"weights", 0, CLI_STRING, &args.weights, "FILE.weights.h5",
     .help = "the weights of model.save_weights (for a model given as JSON;\n"
             "replaces a .keras file's own)"},
    {"model", 0, CLI_STRING, &args.model, "MODEL.yaml",
     .help = "build the model from this tfc model file (the one an import wrote,\n"
             "edited) and write only the weights"},
    {"out", 'o', CLI_STRING, &args.out, "DIR",
     .help = "where model.yaml and weights.safetensors go (default: the file's\n"
             "name without its extension)"},
    {"overwrite", 0, CLI_FLAG, &args.overwrite, NULL,
     .help = "replace model.yaml and weights.safetensors in DIR"},
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-import",
    .operands = "MODEL.keras|MODEL.json|MODEL.h5",
    .about = "Writes a Keras model as tfc's model file DIR/model.yaml and its weights as\n"
             "DIR/weights.safetensors: a .keras archive (model.save), the JSON of\n"
             "model.to_json() or an archive's config.json (with --weights, or the model\n"
             "alone), or a Keras 2 full-model .h5 file. Each layer's YAML is its Keras\n"
             "configuration; the weights take tfc's names (SPEC §5).",
    .options = options,
    .notes = "Sequential and functional models of tfc's layers import (several inputs and\n"
             "outputs, a layer called again, a compiled model's losses and metrics); a\n"
             "custom layer, a keras.ops operation no layer of tfc's computes and a\n"
             "functional model called twice are errors naming them at the\n"
             "JSON's FILE:LINE:COL. tfc builds the model from the YAML it wrote: what tfc\n"
             "cannot express is its error at model.yaml's line (the file stays, to edit;\n"
             "then --model DIR/model.yaml imports the weights into the edited file).\n"
             "Then: tfc-predict DIR/model.yaml --weights DIR/weights.safetensors ...,\n"
             "or a solver's model: DIR/model.yaml with --weights to fine-tune.",
    .exit_status = "0 success, 1 runtime failure (unreadable or damaged file), 2 bad usage\n"
                   "or a model tfc cannot express",
    .operand_list = &args.input,
};

/* DIR from the input's name: models/net.keras -> net */
static void default_dir(const char *path, char *dir, size_t size)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(dir, size, "%s", base);
    char *dot = strrchr(dir, '.');
    if (dot && dot != dir) *dot = 0;
    if (!strcmp(dir, base)) snprintf(dir, size, "%s.tfc", base);
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const char *in = args.input.v[0];
    char dir[1024], model[1200], weights[1200];
    if (args.out) snprintf(dir, sizeof dir, "%s", args.out);
    else default_dir(in, dir, sizeof dir);
    snprintf(model, sizeof model, "%s/model.yaml", dir);
    snprintf(weights, sizeof weights, "%s/weights.safetensors", dir);
    struct stat st;
    if (!args.overwrite && ((!args.model && !stat(model, &st)) || !stat(weights, &st)))
        return cli_error(&tool, "%s already holds %s (give --overwrite or another --out)",
                         dir, args.model || stat(model, &st) ? "weights.safetensors"
                                                              : "model.yaml");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_import_report rep;
    tfc_status s = tfc_mkdir_p(dir, &err);
    if (!s) s = tfc_keras_import(in, args.weights, args.model, model, weights, &rep, &err);
    if (s) {
        fputs(err.text, stderr);
        if (!args.model && !stat(model, &st) && s == TFC_ERR_CONFIG)
            fprintf(stderr, "tfc-import: %s is written: edit it, then import the weights "
                    "into it with\n  tfc-import %s%s%s --model %s --out %s\n", model, in,
                    args.weights ? " --weights " : "", args.weights ? args.weights : "",
                    model, dir);
        return tfc_exit_code(s);
    }
    printf("%s: %s \"%s\", %d layers", in, rep.source[0] ? rep.source : "Keras model",
           rep.model, rep.layers);
    if (rep.tensors)
        printf(", %d weight tensors (%lld parameters)", rep.tensors, (long long)rep.params);
    printf("\n  %s%s\n", args.model ? args.model : model, args.model ? " (given)" : "");
    if (rep.tensors) printf("  %s\n", weights);
    else printf("  (no weights: tfc-train initializes them)\n");
    for (char *line = rep.notes; *line;) {
        char *nl = strchr(line, '\n');
        printf("note: %.*s\n", (int)(nl ? nl - line : (long)strlen(line)), line);
        line = nl ? nl + 1 : line + strlen(line);
    }
    return 0;
}
