"""Keras 3 references for the counted metrics (tests/test_metrics.c, keras_values).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_metrics.py (any venv with Keras 3)
Writes tests/ref/metrics/cases.json: for each case, the metric as a model file's `metrics:`
item writes it (`spec`, JSON, which is YAML too), how the loss reads the labels (`labels`:
dense floats of the output's shape, or sparse class ids), the outputs per row (`classes`) and
rows an example (`steps`: 1, or a sequence's), three batches of outputs `pred`, labels `true`
and, where a mask is at work, per-row weights `weight` (0: a masked step, 1 else), and the
metric's value after Keras's update_state of every batch in turn (`value`) and after the
first one alone (`first`); then tests/ref/metrics/loss_functions.json (loss_functions()).
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
        elif labels == "real":
            true = rng.normal(0.5, 1.5, shape).astype(np.float32)
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
        m = keras.metrics.get(spec)
        # a function (pearson_correlation): compile wraps it so
        return m if isinstance(m, keras.metrics.Metric) else \
            keras.metrics.MeanMetricWrapper(m, name=spec)
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
    add({"AUC": {"label_weights": [1.0, 0.5, 2.0]}}, classes=3)
    add({"AUC": {"label_weights": [0.0, 3.0], "thresholds": [0.3, 0.6]}}, classes=2)
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
    # binary accuracy over every output
    add("binary_accuracy", classes=3)
    add({"BinaryAccuracy": {"threshold": 0.3}}, classes=2, steps=3, weighted=True)
    # R2
    add("R2Score", classes=3, kind="logits", labels="real")
    add({"R2Score": {"class_aggregation": "variance_weighted_average"}}, classes=3,
        kind="logits", labels="real")
    add({"R2Score": {"num_regressors": 2}}, classes=1, kind="logits", labels="real")
    # correlations of each row's outputs with its targets, averaged over the rows
    add("pearson_correlation", classes=4, kind="logits", labels="real")
    add({"PearsonCorrelation": {"name": "pcc"}}, classes=3, steps=4, kind="logits",
        labels="real", weighted=True)
    add("ConcordanceCorrelation", classes=5, kind="logits", labels="real")
    add("concordance_correlation", classes=3, steps=3, kind="logits", labels="real",
        weighted=True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"keras": keras.__version__, "backend": keras.backend.backend(),
                   "cases": cases}, f)
        f.write("\n")
    loss_functions(np.random.default_rng(12))


def loss_functions(rng):
    """tests/ref/metrics/loss_functions.json: Keras's metrics that are a loss function's
    mean (MeanMetricWrapper), each model one Activation layer over `classes` inputs (its
    output `act(x)`, which Keras's metric reads), with the loss whose labels it reads; for
    each the metric's value after update_state on the 12 rows."""
    models = [
        ("linear", "mse", "real", 4,
         ["msle", "mape", "log_cosh_error", "poisson", "mae", "MeanSquaredError",
          "cosine_similarity", {"CosineSimilarity": {"name": "cos"}}]),
        ("softmax", "categorical_crossentropy", "onehot", 5,
         ["kl_divergence", "categorical_hinge", "cosine_similarity", "categorical_crossentropy",
          {"CategoricalCrossentropy": {"name": "cce"}}, "mse", "mae"]),
        ("sigmoid", "binary_crossentropy", "binary", 3,
         ["binary_crossentropy", "bce", "hinge", "squared_hinge", "mae", "poisson"]),
        ("linear", "{type: binary_crossentropy, from_logits: true}", "binary", 2,
         [{"BinaryCrossentropy": {"from_logits": True}}, "hinge", "squared_hinge"]),
        ("softmax", "sparse_categorical_crossentropy", "sparse", 4,
         ["sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"]),
        ("linear", "{type: sparse_categorical_crossentropy, from_logits: true}", "sparse", 4,
         [{"SparseCategoricalCrossentropy": {"from_logits": True, "name": "scce"}}]),
        ("linear", "{type: categorical_crossentropy, from_logits: true}", "onehot", 3,
         [{"CategoricalCrossentropy": {"from_logits": True}}, "categorical_hinge",
          "kl_divergence"]),
    ]
    out = []
    for act, loss, labels, classes, metrics in models:
        rows = 12
        lo = 0.1 if act == "linear" and loss == "mse" else -3
        x = rng.uniform(lo, 3, (rows, classes)).astype(np.float32)
        if labels == "real":
            t = rng.uniform(0, 2, (rows, classes)).astype(np.float32)
            t[0, 0] = 0.0  # MAPE's and MSLE's epsilons
        elif labels == "onehot":
            t = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, rows)]
        elif labels == "sparse":
            t = rng.integers(0, classes, rows).astype(np.int32)
        else:
            t = (rng.uniform(0, 1, (rows, classes)) < 0.5).astype(np.float32)
        y = np.asarray(keras.activations.get(act)(x), np.float32)
        values, names = [], []
        for spec in metrics:
            m = make(spec)
            m.update_state(t, y)
            values.append(float(m.result()))
            names.append(m.name if not isinstance(spec, str) else spec)
        yaml = (f"input: {{shape: [{classes}]}}\nlayers:\n  - Activation: {{activation: {act}}}"
                f"\nloss: {loss}\nmetrics: [{', '.join(json.dumps(sp) for sp in metrics)}]\n")
        print(act, loss, dict(zip(names, values)))
        out.append({"model": yaml, "labels": "sparse" if labels == "sparse" else "dense",
                    "classes": classes, "x": x.reshape(-1).tolist(),
                    "true": t.reshape(-1).tolist(), "names": names, "values": values})
    with open(os.path.join(OUT, "loss_functions.json"), "w") as f:
        json.dump({"keras": keras.__version__, "backend": keras.backend.backend(),
                   "models": out}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
