#!/usr/bin/env python3
# Reads a tfc-train run directory with TensorBoard's own readers (tests/test_solver.c runs it
# on a run it made): EventAccumulator for scalars, histograms, the text tensor and the graph;
# the hparams plugin's plugin_data_pb2 for the session start and end; the images. Prints one line per
# fact for the C test to compare; exits 1 when a reader fails.
import sys
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.hparams import plugin_data_pb2, api_pb2

acc = ea.EventAccumulator(sys.argv[1], size_guidance={ea.TENSORS: 0, ea.HISTOGRAMS: 0})
acc.Reload()
tags = acc.Tags()
print("scalars", " ".join(sorted(tags["scalars"])))
print("histograms", " ".join(sorted(tags["histograms"])))
for tag in sorted(tags["histograms"]):
    for h in acc.Histograms(tag):
        v = h.histogram_value
        print("histo %s %d num=%g min=%.6g max=%.6g sum=%.6g buckets=%g" % (
            tag, h.step, v.num, v.min, v.max, v.sum, sum(v.bucket)))
for tag in sorted(tags["images"]):
    for im in acc.Images(tag):
        png = im.encoded_image_string
        print("image %s %d %dx%d png=%s" % (tag, im.step, im.height, im.width,
                                             png[:8] == b"\x89PNG\r\n\x1a\n"))
text = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
print("text", text.splitlines()[1], "...", text.splitlines()[-1])
g = acc.Graph()
for n in g.node:
    dims = [d.size for d in n.attr["_output_shapes"].list.shape[0].dim]
    print("node %s %s [%s] %s params=%d" % (n.name, n.op, ",".join(n.input), dims,
                                             n.attr["parameters"].i))
start = plugin_data_pb2.HParamsPluginData.FromString(
    acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content)
for k in sorted(start.session_start_info.hparams):
    v = start.session_start_info.hparams[k]
    print("hparam %s %s %r" % (k, v.WhichOneof("kind"), getattr(v, v.WhichOneof("kind"))))
end = plugin_data_pb2.HParamsPluginData.FromString(
    acc.SummaryMetadata("_hparams_/session_end_info").plugin_data.content)
print("end", api_pb2.Status.Name(end.session_end_info.status))
