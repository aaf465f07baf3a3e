/* tfc-export: a model file and its weights as an ONNX file (SPEC §5d) that
 * onnxruntime, TensorRT or OpenVINO can run, with Keras's semantics kept. Exit 0 on success,
 * 1 on runtime failures, 2 on bad usage or a model ONNX cannot express. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *model_v[1], *set_v[256];
static struct {
    cli_list model, sets;
    const char *weights, *onnx, *batch;
    long opset;
} args = {.model = CLI_LIST_OF(model_v), .sets = CLI_LIST_OF(set_v), .opset = TFC_ONNX_OPSET_DEFAULT};

static const cli_option options[] = {
    {"weights", 0, CLI_STRING, &args.weights, "FILE", .flags = CLI_REQUIRED,
     .help = "the trained weights (a .safetensors file)"},
    {"onnx", 0, CLI_STRING, &args.onnx, "OUT.onnx", .flags = CLI_REQUIRED,
     .help = "the ONNX file to write"},
    {"opset", 0, CLI_INT, &args.opset, "N", .min = TFC_ONNX_OPSET_MIN,
     .max = TFC_ONNX_OPSET_MAX, .help = "the ONNX opset, 14 to 23 (default 17)"},
    {"batch", 0, CLI_STRING, &args.batch, "N|dynamic",
     .help = "the batch size in the graph's input and output shapes (default:\n"
             "dynamic, a symbolic dimension N)"},
    CLI_OPT_MODEL_SET(&args.sets),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-export",
    .operands = CLI_MODEL_OPERAND,
    .about = "Writes the model and its weights as an ONNX file: input \"input\" [N, input shape]\n"
             "(channels last, as the model file; float32 or int32 token ids; a model of\n"
             "several inputs has one graph input each, named as its InputLayers) and output\n"
             "\"output\" [N, output shape], the model in inference mode.",
    .options = options,
    .notes = CLI_MODEL_NOTE "\n\n"
             "Masks: an Embedding's (or TokenAndPositionEmbedding's) mask_zero reaches an\n"
             "LSTM or GRU (go_backwards too) as sequence_lens, which is exact for\n"
             "right-padded sequences (id 0 only after the last token); zeros between tokens\n"
             "are not skipped as tfc and Keras skip them. MultiHeadAttention and the masked\n"
             "GlobalAveragePooling1D take the ids != 0 as they are (SPEC §5d). A model of\n"
             "variable length is written at its max_length.",
    .exit_status = "0 success, 1 runtime failure (unreadable weights, the file cannot be\n"
                   "written), 2 bad usage or a model ONNX cannot express",
    .operand_list = &args.model,
};

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    tfc_onnx_options o = {.opset = (int)args.opset};
    if (args.batch && strcmp(args.batch, "dynamic")) {
        char *end;
        long b = strtol(args.batch, &end, 10);
        if (*end || b < 1 || b > (1l << 30))
            return cli_error(&tool, "--batch: expected a positive number or 'dynamic'");
        o.batch = b;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load_config(args.model.v[0], args.sets.v, args.sets.n, &err);
    tfc_backend *be = m ? tfc_backend_open("cpu", 1, &err) : NULL;
    tfc_status s = m && be ? TFC_OK : err.code;
    if (!s) s = tfc_model_bind(m, be, 1, &err);
    if (!s) s = tfc_model_load_weights(m, args.weights, NULL, &err);
    if (!s) s = tfc_onnx_export(m, &o, args.onnx, &err);
    if (s) fputs(err.text, stderr);
    tfc_model_free(m);
    if (be) tfc_backend_free(be);
    return tfc_exit_code(s);
}
