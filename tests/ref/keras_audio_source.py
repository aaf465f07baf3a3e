#!/usr/bin/env python3
# Writes tests/ref/audio_source/ for tests/test_data_audio.c: a folder of 16-bit PCM WAV files
# in three class folders (`bird` mono, `cat` stereo, `dog` mono; lengths 37 to 80 frames,
# rates 8000 and 16000 Hz; a LIST chunk before the data of one file, a `junk` chunk before
# another's (even-sized: TensorFlow's decode_wav skips a chunk without RIFF's pad byte, so it
# finds no data after an odd one); an upper-case .WAV and a .txt file left out; files in
# nested folders of `dog`, a, a-b and a/c, which Keras reads folder by folder in the byte
# order of their paths: a, a-b, a/c), and what Keras 3's
# keras.utils.audio_dataset_from_directory (shuffle=False, batch_size=None) yields from it:
# full_K.npy each file at its own length, len50_K.npy with output_sequence_length=50 (cropped
# or zero-padded), labels.npy and class_names.txt. Not run by `make test`. To regenerate
# (Keras 3.15.1, TensorFlow CPU):
#   /tmp/kvenv/bin/python tests/ref/keras_audio_source.py
import io
import os
import shutil
import struct
import wave

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "audio_source")
rng = np.random.RandomState(7)


def wav16(frames, rate, extra_chunk=None):
    b = io.BytesIO()
    w = wave.open(b, "wb")
    w.setnchannels(frames.shape[1])
    w.setsampwidth(2)
    w.setframerate(rate)
    w.writeframes(frames.astype("<i2").tobytes())
    w.close()
    data = b.getvalue()
    if extra_chunk is None:
        return data
    # put a chunk between `fmt ` and `data` (RIFF size updated; odd sizes padded)
    at = data.index(b"data")
    pad = b"\0" if len(extra_chunk[1]) % 2 else b""
    chunk = extra_chunk[0] + struct.pack("<I", len(extra_chunk[1])) + extra_chunk[1] + pad
    body = data[12:at] + chunk + data[at:]
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WAVE" + body


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    wavs = os.path.join(OUT, "wavs")
    files = {
        "bird": [("a.wav", 1, 37, 8000, None), ("b.WAV", 1, 64, 8000, (b"LIST", b"INFOtest"))],
        "cat": [("c.wav", 2, 50, 16000, None), ("d.wav", 2, 80, 16000, (b"junk", b"even"))],
        "dog": [("e.wav", 1, 45, 8000, None), ("a/x.wav", 1, 20, 8000, None),
                ("a-b/y.wav", 1, 21, 8000, None), ("a/c/z.wav", 1, 22, 8000, None)],
    }
    for cls, items in files.items():
        for name, ch, n, rate, extra in items:
            os.makedirs(os.path.dirname(os.path.join(wavs, cls, name)), exist_ok=True)
            frames = rng.randint(-32768, 32768, size=(n, ch))
            frames[0] = 32767
            frames[1] = -32768
            with open(os.path.join(wavs, cls, name), "wb") as f:
                f.write(wav16(frames, rate, extra))
    with open(os.path.join(wavs, "dog", "notes.txt"), "w") as f:
        f.write("not audio\n")
    full = keras.utils.audio_dataset_from_directory(wavs, batch_size=None, shuffle=False)
    crop = keras.utils.audio_dataset_from_directory(wavs, batch_size=None, shuffle=False,
                                                    output_sequence_length=50)
    labels = []
    for k, (x, y) in enumerate(full):
        np.save(os.path.join(OUT, f"full_{k}.npy"), x.numpy().astype(np.float32))
        labels.append(int(y))
    for k, (x, _) in enumerate(crop):
        np.save(os.path.join(OUT, f"len50_{k}.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(OUT, "labels.npy"), np.array(labels, dtype=np.int32))
    with open(os.path.join(OUT, "class_names.txt"), "w") as f:
        f.write("\n".join(full.class_names) + "\n")
    print(len(labels), "files,", full.class_names)


if __name__ == "__main__":
    main()
