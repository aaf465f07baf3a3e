#!/usr/bin/env python3
# Prints the tables of tests/test_callbacks.c. Not run by `make test` (Keras is not a CI
# dependency). To regenerate:
#   pip download --no-deps keras==3.15.1 -d /tmp/k && cd /tmp/k && unzip -q keras-*.whl
#   python3 tests/ref/keras_callbacks.py /tmp/k/keras/src/callbacks/
# Runs Keras 3.15.1's own callback sources (early_stopping.py, reduce_lr_on_plateau.py,
# monitor_callback.py, unmodified from the wheel) with the few keras.src modules they import
# stubbed: ops.less/greater are numpy's, the optimizer's rate is a float32 as Keras's variable.
import sys, types
import numpy as np
SRC = sys.argv[1] if len(sys.argv) > 1 else "/tmp/k/keras/src/callbacks/"
def mod(name, **kw):
    m = types.ModuleType(name); m.__dict__.update(kw); sys.modules[name] = m; return m
class Callback:
    def set_model(self, model): self._model = model
    @property
    def model(self): return self._model
class MetricsList:
    def __init__(self, metrics): self.metrics = metrics
class CompileMetrics(MetricsList): pass
def keras_export(*a, **k): return lambda x: x
mod("keras"); mod("keras.src"); mod("keras.src.callbacks"); mod("keras.src.utils")
mod("keras.src.ops", less=np.less, greater=np.greater)
mod("keras.src.backend", convert_to_numpy=np.asarray)
mod("keras.src.api_export", keras_export=keras_export)
mod("keras.src.utils.io_utils", print_msg=print)
sys.modules["keras.src.utils"].io_utils = sys.modules["keras.src.utils.io_utils"]
mod("keras.src.callbacks.callback", Callback=Callback)
mod("keras.src.trainers"); mod("keras.src.trainers.compile_utils", MetricsList=MetricsList, CompileMetrics=CompileMetrics)
sys.modules["keras.src"].ops = sys.modules["keras.src.ops"]
sys.modules["keras.src"].backend = sys.modules["keras.src.backend"]
sys.modules["keras.src.trainers"].compile_utils = sys.modules["keras.src.trainers.compile_utils"]
def load(name, file):
    m = mod(name); exec(compile(open(SRC + file).read(), file, "exec"), m.__dict__); return m
load("keras.src.callbacks.monitor_callback", "monitor_callback.py")
ES = load("es", "early_stopping.py").EarlyStopping
RLR = load("rlr", "reduce_lr_on_plateau.py").ReduceLROnPlateau
class Acc:
    name = "accuracy"; _direction = "up"
class Opt:
    def __init__(self): self._lr = np.float32(0.1)
    @property
    def learning_rate(self): return self._lr
    @learning_rate.setter
    def learning_rate(self, v): self._lr = np.float32(v)
class keras:  # the names gen.py uses
    class callbacks:
        EarlyStopping = ES
        ReduceLROnPlateau = RLR

class FakeModel:
    def __init__(self):
        self.metrics = [MetricsList([Acc()])]
        self.optimizer = Opt()
        self.stop_training = False
        self.w = 0
    def get_weights(self): return [self.w]
    def set_weights(self, w): self.w = w[0]

streams = {
 "falling": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1],
 "rising":  [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4],
 "flat":    [0.5]*10,
 "noisy":   [0.9, 0.7, 0.75, 0.72, 0.69, 0.71, 0.70, 0.695, 0.68, 0.70, 0.71, 0.72],
 "slow":    [1.0, 0.99995, 0.9999, 0.99985, 0.9998, 0.5, 0.49995, 0.4999, 0.49985, 0.4998],
}
def es(monitor, mode, patience, min_delta, baseline, start, stream):
    m = FakeModel()
    cb = keras.callbacks.EarlyStopping(monitor=monitor, mode=mode, patience=patience,
        min_delta=min_delta, baseline=baseline, start_from_epoch=start, restore_best_weights=True)
    cb.set_model(m); cb.on_train_begin()
    stop = -1
    for e, v in enumerate(streams[stream]):
        m.w = e
        cb.on_epoch_end(e, {monitor: v})
        if m.stop_training: stop = e; break
    cb.on_train_end()
    return stop, (cb.best_epoch if cb.best is not None else -1), m.w

escases = [
 ("val_loss","auto",2,0,None,0,"falling"),
 ("val_loss","auto",2,0,None,0,"rising"),
 ("val_loss","auto",0,0,None,0,"rising"),
 ("val_loss","auto",3,0,None,0,"flat"),
 ("val_loss","min",2,0,None,0,"noisy"),
 ("val_loss","min",3,0,None,0,"noisy"),
 ("val_loss","min",2,0.02,None,0,"noisy"),
 ("val_loss","max",2,0,None,0,"falling"),
 ("val_accuracy","auto",2,0,None,0,"falling"),
 ("val_accuracy","auto",2,0,None,0,"rising"),
 ("val_loss","auto",3,0,0.65,0,"noisy"),
 ("val_loss","auto",3,0,0.85,0,"noisy"),
 ("val_loss","auto",2,0,None,4,"rising"),
 ("val_loss","auto",1,1e-4,None,0,"slow"),
 ("val_loss","auto",1,-0.01,None,0,"noisy"),
]
print("/* monitor-is-accuracy, mode, patience, min_delta, has_baseline, baseline, start_from, stream, stop_eval, best_eval */")
for c in escases:
    stop, best, w = es(*c)
    acc = 1 if c[0] == "val_accuracy" else 0
    print('    {%d, TFC_MODE_%s, %d, %g, %d, %g, %d, "%s", %d, %d},' % (acc, c[1].upper(), c[2], c[3], c[4] is not None, c[4] or 0, c[5], c[6], stop, best))

def pl(monitor, mode, factor, patience, min_delta, cooldown, min_lr, stream):
    m = FakeModel()
    cb = keras.callbacks.ReduceLROnPlateau(monitor=monitor, mode=mode, factor=factor, patience=patience,
        min_delta=min_delta, cooldown=cooldown, min_lr=min_lr)
    cb.set_model(m); cb.on_train_begin()
    out = []
    for e, v in enumerate(streams[stream]):
        cb.on_epoch_end(e, {monitor: v})
        out.append(float(np.asarray(m.optimizer.learning_rate)))
    return out
plcases = [
 ("val_loss","auto",0.5,2,1e-4,0,0.0,"falling"),
 ("val_loss","auto",0.5,2,1e-4,0,0.0,"rising"),
 ("val_loss","auto",0.5,1,1e-4,0,0.0,"flat"),
 ("val_loss","auto",0.5,1,1e-4,2,0.0,"flat"),
 ("val_loss","min",0.1,2,1e-4,1,0.0,"noisy"),
 ("val_loss","auto",0.5,1,1e-4,0,0.03,"rising"),
 ("val_loss","auto",0.5,1,1e-4,0,0.0,"slow"),
 ("val_loss","auto",0.5,1,0,0,0.0,"slow"),
 ("val_loss","max",0.5,2,1e-4,0,0.0,"falling"),
 ("val_accuracy","auto",0.5,2,1e-4,0,0.0,"falling"),
 ("val_loss","auto",0.2,3,0.02,1,0.0,"noisy"),
]
print("/* monitor-is-accuracy, mode, factor, patience, min_delta, cooldown, min_lr, stream, lr after each evaluation */")
for c in plcases:
    out = pl(*c)
    acc = 1 if c[0] == "val_accuracy" else 0
    print('    {%d, TFC_MODE_%s, %g, %d, %g, %d, %g, "%s", {%s}},' % (acc, c[1].upper(), c[2], c[3], c[4], c[5], c[6], c[7], ", ".join("%.9g" % x for x in out)))
