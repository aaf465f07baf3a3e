"""Keras 3 references for the counted metrics (tests/test_metrics.c, keras_values).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_metrics.py (any venv with Keras 3)
Writes tests/ref/metrics/cases.json: for each case, the metric as a model file's `metrics:`
item writes it (`spec`, JSON, which is YAML too), how the loss reads the labels (`labels`:
dense floats of the output's shape, or sparse class ids), the outputs per row (`classes`) and
rows an example (`steps`: 1, or a sequence's), three batches of outputs `pred`, labels `true`
and, where a mask is at work, per-row weights `weight` (0: a masked step, 1 else), and the
metric's value after Keras's update_state of every batch in turn (`value`) and after the
first one alone (`first`).
"""
import json
import os

import numpy as np
import keras

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics")


def batches(rng, classes, steps, labels, n=3, rows=12, kind="prob", weighted=False,
            soft=False):
    out = []
    for _ in range(n):
        shape = (rows, classes) if steps == 1 else (rows, steps, classes)
        if kind == "logits":
            pred = rng.normal(0, 2, shape)
        elif kind == "softmax":
            z = rng.normal(0, 1.5, shape)
            pred = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
        else:
            pred = rng.uniform(0, 1, shape)
        pred = pred.astype(np.float32)
        if labels == "sparse":
            true = rng.integers(0, classes, shape[:-1]).astype(np.int32)
        elif labels == "onehot":
            true = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, shape[:-1])]
        else:
            true = (rng.uniform(0, 1, shape) < 0.4).astype(np.float32)
            if soft:  # a soft label: any non-zero value is a positive
                true[true > 0] = rng.choice([0.3, 1.0], int(true.sum())).astype(np.float32)
        b = {"pred": pred, "true": true}
        if weighted:
            b["weight"] = (rng.uniform(0, 1, shape[:-1]) < 0.75).astype(np.float32)
        out.append(b)
    return out


def make(spec):
    if isinstance(spec, str):
        return keras.metrics.get(spec)
    (cls, args), = spec.items()
    return getattr(keras.metrics, cls)(**args)


def case(rng, spec, classes=1, steps=1, labels="binary", **kw):
    data = batches(rng, classes, steps, labels, **kw)
    metric = make(spec)
    first = None
    for b in data:
        metric.update_state(b["true"], b["pred"], sample_weight=b.get("weight"))
        if first is None:
            first = float(metric.result())
    value = float(metric.result())
    return {
        "spec": json.dumps(spec),
        "labels": "sparse" if labels == "sparse" else "dense",
        "classes": classes,
        "steps": steps,
        "batches": [{k: v.reshape(-1).tolist() for k, v in b.items()} for b in data],
        "value": value,
        "first": first,
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(11)
    cases = []

    def add(spec, **kw):
        c = case(rng, spec, **kw)
        print(f"{c['spec']:70s} {c['value']:.6f}")
        cases.append(c)

    # confusion counts at one threshold
    add("precision")
    add("Recall")
    add({"Precision": {"thresholds": 0.3}}, classes=4)
    add({"Precision": {"top_k": 2}}, classes=5)
    add({"Recall": {"class_id": 2}}, classes=5)
    add({"Precision": {"top_k": 1, "class_id": 1}}, classes=4, kind="softmax", labels="onehot")
    add({"Recall": {"thresholds": [0.6]}}, classes=3, soft=True)
    add("TruePositives", classes=3)
    add({"FalsePositives": {"thresholds": 0.7}}, classes=3)
    add("true_negatives", classes=2)
    add("FalseNegatives", classes=2)
    add("Precision", classes=3, steps=4, weighted=True)
    # AUC
    add("AUC")
    add("auc", classes=4, soft=True)
    add({"AUC": {"curve": "PR"}}, classes=3)
    add({"AUC": {"curve": "PR", "summation_method": "minoring"}}, classes=2)
    add({"AUC": {"summation_method": "majoring"}}, classes=2)
    add({"AUC": {"curve": "PRGAIN"}}, classes=2)
    add({"AUC": {"num_thresholds": 50}}, classes=3)
    add({"AUC": {"thresholds": [0.8, 0.2, 0.5, 0.35]}}, classes=2)
    add({"AUC": {"thresholds": [0.25, 0.5, 0.75]}}, classes=2)
    add({"AUC": {"multi_label": True}}, classes=4)
    add({"AUC": {"multi_label": True, "label_weights": [1.0, 0.0, 2.0], "curve": "PR"}},
        classes=3)
    add({"AUC": {"from_logits": True}}, classes=2, kind="logits")
    add("AUC", classes=2, steps=5, weighted=True)
    # constraints at thresholds
    add({"PrecisionAtRecall": {"recall": 0.7}}, classes=2)
    add({"RecallAtPrecision": {"precision": 0.5}}, classes=3)
    add({"SensitivityAtSpecificity": {"specificity": 0.6, "class_id": 1}}, classes=3)
    add({"SpecificityAtSensitivity": {"sensitivity": 0.5, "num_thresholds": 1}}, classes=2)
    add({"SpecificityAtSensitivity": {"sensitivity": 0.8, "num_thresholds": 37}}, classes=2)
    # F-scores
    add({"F1Score": {"average": "micro"}}, classes=4, kind="softmax", labels="onehot")
    add({"F1Score": {"average": "macro"}}, classes=4, kind="softmax", labels="onehot")
    add({"F1Score": {"average": "weighted", "threshold": 0.4}}, classes=4)
    add({"FBetaScore": {"average": "macro", "beta": 2.0}}, classes=3, kind="softmax",
        labels="onehot")
    add({"F1Score": {"average": "micro", "threshold": 0.5}}, classes=1)
    # IoU
    add({"MeanIoU": {"num_classes": 4, "sparse_y_pred": False}}, classes=4, labels="sparse",
        kind="softmax")
    add({"MeanIoU": {"num_classes": 4, "sparse_y_pred": False, "ignore_class": 0}}, classes=4,
        steps=6, labels="sparse", kind="softmax", weighted=True)
    add({"IoU": {"num_classes": 4, "target_class_ids": [0, 2], "sparse_y_pred": False}},
        classes=4, labels="sparse", kind="softmax")
    add({"OneHotMeanIoU": {"num_classes": 5}}, classes=5, labels="onehot", kind="softmax")
    add({"OneHotIoU": {"num_classes": 3, "target_class_ids": [1]}}, classes=4, labels="onehot",
        kind="softmax")
    add({"BinaryIoU": {}}, classes=1)
    add({"BinaryIoU": {"threshold": 0.3, "target_class_ids": [1]}}, classes=3)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"keras": keras.__version__, "backend": keras.backend.backend(),
                   "cases": cases}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
