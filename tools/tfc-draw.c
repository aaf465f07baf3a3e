/* tfc-draw: a model file as a Graphviz DOT graph (layers with their types, arguments and
 * output shapes; edges from `inputs:` or the stack order). */
#include <stdio.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *model_v[1], *set_v[256];
static struct {
    cli_list model, sets;
    const char *output;
} args = {.model = CLI_LIST_OF(model_v), .sets = CLI_LIST_OF(set_v)};

static const cli_option options[] = {
    {"output", 0, CLI_STRING, &args.output, "FILE.dot",
     .help = "write the graph to this file (default: standard output)"},
    CLI_OPT_MODEL_SET(&args.sets),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-draw",
    .operands = CLI_MODEL_OPERAND,
    .notes = CLI_MODEL_NOTE,
    .about = "Writes the network as a Graphviz DOT graph: layers with their types, activations,\n"
             "output shapes and parameter counts (render it with: dot -Tpng -o net.png).",
    .options = options,
    .exit_status = "0 success, 1 the output file cannot be written, 2 bad usage or configuration",
    .operand_list = &args.model,
};

/* "input" for a model of one input; else each input's name */
static const char *input_label(const tfc_model *m, int k)
{
    return tfc_model_ninputs(m) > 1 ? tfc_model_input_name(m, k) : "input";
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const char *model_path = args.model.v[0], *out_path = args.output;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load_config(model_path, args.sets.v, args.sets.n, &err);
    if (!m) {
        fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
        perror(out_path);
        tfc_model_free(m);
        return 1;
    }
    char shape[96];
    fprintf(f, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=record, fontname=\"Helvetica\"];\n",
            tfc_model_name(m));
    for (int k = 0; k < tfc_model_ninputs(m); k++) /* a functional model's several */
        fprintf(f, "  \"%s\" [label=\"{%s|%s %s}\", style=filled, fillcolor=\"#e8e8e8\"];\n",
                input_label(m, k), input_label(m, k),
                tfc_shape_str(tfc_model_input_shape_at(m, k), shape, sizeof shape),
                tfc_model_input_dtype_at(m, k) == TFC_I32 ? "int32" : "float32");
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        int64_t params = 0;
        for (int p = 0; p < l->nparams; p++) params += l->params[p].shared ? 0 : l->params[p].numel;
        fprintf(f, "  \"%s\" [label=\"{%s|%s", l->name, l->name, l->ops->type);
        if (l->act != TFC_ACT_LINEAR) fprintf(f, " (%s)", tfc_act_names[l->act]);
        fprintf(f, "|%s", tfc_shape_str(&l->out_shape, shape, sizeof shape));
        if (params) fprintf(f, "|%lld params", (long long)params);
        fprintf(f, "}\"];\n");
        for (int j = 0; j < l->ninputs; j++) {
            int p = l->inputs[j];
            fprintf(f, "  \"%s\" -> \"%s\";\n",
                    p < 0 ? input_label(m, -1 - p) : tfc_model_layer(m, p)->name,
                    l->name);
        }
    }
    fprintf(f, "}\n");
    if (out_path) fclose(f);
    tfc_model_free(m);
    return 0;
}
