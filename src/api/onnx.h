/* ONNX export (SPEC §5d): a bound model with its weights written as an ONNX
 * ModelProto (opset 14 to 23) that onnxruntime and other runtimes read, Keras semantics kept:
 * the NHWC input stays the graph input (convolutions run in NCHW behind a Transpose),
 * TensorFlow SAME padding as explicit pads, BatchNormalization in inference form, Dropout
 * removed, LSTM gates reordered with right-padded masks as sequence_lens, Embedding as Gather,
 * LayerNormalization as its operator (opset 17+), RMSNormalization and GroupNormalization
 * composed;
 * MultiHeadAttention as MatMul/Softmax with its causal and padding masks. */
#ifndef TFC_API_ONNX_H
#define TFC_API_ONNX_H

#include <stdint.h>

#include "core/error.h"
#include "graph/model.h"

typedef struct tfc_onnx_options {
    int opset;     /* 14..23; 0: 17 */
    int64_t batch; /* > 0: a fixed batch size in the graph's shapes; 0: dynamic ("N") */
} tfc_onnx_options;

#define TFC_ONNX_OPSET_MIN 14
#define TFC_ONNX_OPSET_MAX 23
#define TFC_ONNX_OPSET_DEFAULT 17

/* Writes `m` (bound, weights loaded: parameters are read from the device) to `path`
 * atomically. The graph has one input "input" [batch, input shape] (float32, or int32 token
 * ids) and one output "output" [batch, output shape] (float32), the model's outputs in
 * inference mode. A layer or option ONNX cannot express is TFC_ERR_USAGE naming the layer
 * (nothing is written). */
tfc_status tfc_onnx_export(tfc_model *m, const tfc_onnx_options *o, const char *path,
                           tfc_error *err);

#endif
