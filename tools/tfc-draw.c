/* tfc-draw: a model file as a Graphviz DOT graph (layers with their types, arguments and
 * output shapes; edges from `inputs:` or the stack order). */
#include <stdio.h>
#include <string.h>

#include "graph/model.h"

static const char *usage =
    "usage: tfc-draw MODEL.yaml [--output FILE.dot]\n"
    "Writes the network as a Graphviz DOT graph (render it with: dot -Tpng -o net.png).\n";

int main(int argc, char **argv)
{
    const char *model_path = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("tfc-draw (tfc) %s\n", TFC_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--output") && i + 1 < argc) {
            out_path = argv[++i];
        } else if (argv[i][0] == '-' || model_path) {
            fprintf(stderr, "tfc-draw: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        } else {
            model_path = argv[i];
        }
    }
    if (!model_path) {
        fputs(usage, stderr);
        return 2;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(model_path, &err);
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
    fprintf(f, "  input [label=\"{input|%s %s}\", style=filled, fillcolor=\"#e8e8e8\"];\n",
            tfc_shape_str(tfc_model_input_shape(m), shape, sizeof shape),
            tfc_model_input_dtype(m) == TFC_I32 ? "int32" : "float32");
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        int64_t params = 0;
        for (int p = 0; p < l->nparams; p++) params += l->params[p].numel;
        fprintf(f, "  \"%s\" [label=\"{%s|%s", l->name, l->name, l->ops->type);
        if (l->act != TFC_ACT_LINEAR) fprintf(f, " (%s)", tfc_act_names[l->act]);
        fprintf(f, "|%s", tfc_shape_str(&l->out_shape, shape, sizeof shape));
        if (params) fprintf(f, "|%lld params", (long long)params);
        fprintf(f, "}\"];\n");
        for (int j = 0; j < l->ninputs; j++) {
            int p = l->inputs[j];
            fprintf(f, "  \"%s\" -> \"%s\";\n", p < 0 ? "input" : tfc_model_layer(m, p)->name,
                    l->name);
        }
    }
    fprintf(f, "}\n");
    if (out_path) fclose(f);
    tfc_model_free(m);
    return 0;
}
