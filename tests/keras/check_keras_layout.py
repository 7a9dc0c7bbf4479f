#!/usr/bin/python3
"""Checks that est::keras writes its files as Keras does, read with h5py, zipfile and json.

What is expected comes from Keras's sources, not from est's:
- `.keras` (keras/src/saving/saving_lib.py, _save_model_to_fileobj): a zip written by
  zipfile.ZipFile(f, "w") (ZIP_STORED) with metadata.json ({"keras_version", "date_saved"
  as "%Y-%m-%d@%H:%M:%S"}), config.json (serialization_lib.serialize_keras_object: "module",
  "class_name", "config", "registered_name", "build_config", "compile_config" with the keys of
  trainer.compile's SerializableDict) and model.weights.h5 (H5IOStore/H5Entry: "vars" for the
  model, "layers/<snake case class>[_n]/vars/<i>" per layer of model.layers, and
  "optimizer/vars/<i>": iterations, learning_rate, then the slots).
- `.h5` (Keras 2.x keras/saving/legacy/hdf5_format.py save_model_to_hdf5): root attributes
  model_config, training_config, keras_version, backend; group model_weights with attributes
  layer_names, backend, keras_version and per layer weight_names, each a dataset at
  "<layer>/<weight name>"; group optimizer_weights with weight_names.
- `.weights.h5` (saving_lib.save_weights_only): the layout of model.weights.h5.

The structure is also compared with a `.keras` file that Keras 3.11.3 wrote
(testdata/ann_keras3113.keras): entries, compression, JSON keys and HDF5 groups.

Usage: check_keras_layout.py WRITER KERAS_FILE (the write_saved_models program, the fixture).
"""

import datetime
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import h5py
import numpy as np

COMPILE_KEYS = ["optimizer", "loss", "loss_weights", "metrics", "weighted_metrics",
                "run_eagerly", "steps_per_execution", "jit_compile"]
OBJECT_KEYS = ["module", "class_name", "config", "registered_name"]


def names(value):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in value]


def check_weights_layout(f, layers, optimizer_count):
    """model.weights.h5 / .weights.h5: {layer key: [shapes]}."""
    assert "vars" in f and len(f["vars"]) == 0, list(f.keys())
    assert sorted(f["layers"].keys()) == sorted(layers), (list(f["layers"].keys()), layers)
    for key, shapes in layers.items():
        group = f["layers"][key]["vars"]
        assert sorted(group.keys()) == [str(i) for i in range(len(shapes))], (key, list(group))
        for i, shape in enumerate(shapes):
            assert group[str(i)].shape == shape, (key, i, group[str(i)].shape, shape)
    if optimizer_count is None:
        assert "optimizer" not in f
        return
    opt = f["optimizer"]["vars"]
    assert sorted(opt.keys(), key=int) == [str(i) for i in range(optimizer_count)], list(opt)
    assert opt["0"].shape == () and opt["0"].dtype == np.int64  # iterations
    assert opt["1"].shape == () and opt["1"].dtype == np.float32  # learning_rate


def check_keras(path, layers, optimizer_count, functional):
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["metadata.json", "config.json",
                                               "model.weights.h5"], [i.filename for i in infos]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
        # Written as json.dumps writes (separators ", " and ": ").
        for name in ["metadata.json", "config.json"]:
            text = zf.read(name).decode()
            assert text == json.dumps(json.loads(text)), (name, text[:200])
        metadata = json.loads(zf.read("metadata.json"))
        assert sorted(metadata) == ["date_saved", "keras_version"], metadata
        datetime.datetime.strptime(metadata["date_saved"], "%Y-%m-%d@%H:%M:%S")
        config = json.loads(zf.read("config.json"))
        weights = h5py.File(io.BytesIO(zf.read("model.weights.h5")), "r")
    assert list(config)[:4] == OBJECT_KEYS, list(config)
    assert "build_config" in config and "compile_config" in config, list(config)
    assert list(config["compile_config"]) == COMPILE_KEYS, list(config["compile_config"])
    optimizer = config["compile_config"]["optimizer"]
    assert list(optimizer) == OBJECT_KEYS and optimizer["module"] == "keras.optimizers"
    for key in ["name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm",
                "clipvalue", "use_ema", "ema_momentum", "ema_overwrite_frequency"]:
        assert key in optimizer["config"], (key, optimizer["config"])
    for layer in config["config"]["layers"]:
        assert list(layer)[:4] == OBJECT_KEYS, list(layer)
        assert layer["module"] == "keras.layers"
        assert "name" in layer["config"]
        if layer["class_name"] == "InputLayer":
            assert layer["config"]["batch_shape"][0] is None
        else:
            assert layer["config"]["dtype"]["class_name"] == "DTypePolicy"
        if functional:
            assert "inbound_nodes" in layer and "name" in layer
            for node in layer["inbound_nodes"]:
                assert list(node) == ["args", "kwargs"], node
                tensors = node["args"][0] if isinstance(node["args"][0], list) else node["args"]
                for tensor in tensors:
                    assert tensor["class_name"] == "__keras_tensor__"
                    assert len(tensor["config"]["keras_history"]) == 3
    if functional:
        assert config["class_name"] == "Functional" and config["registered_name"] == "Functional"
        assert "input_layers" in config["config"] and "output_layers" in config["config"]
    else:
        assert config["class_name"] == "Sequential" and config["module"] == "keras"
        assert config["config"]["layers"][0]["class_name"] == "InputLayer"
    check_weights_layout(weights, layers, optimizer_count)
    return weights


def check_h5(path, layer_weights, optimizer_names):
    f = h5py.File(path, "r")
    for key in ["model_config", "training_config", "keras_version", "backend"]:
        assert key in f.attrs, (key, list(f.attrs))
    for key in ["model_config", "training_config"]:
        text = f.attrs[key].decode() if isinstance(f.attrs[key], bytes) else f.attrs[key]
        assert text == json.dumps(json.loads(text)), (key, text[:200])
    model_config = json.loads(f.attrs["model_config"])
    assert set(model_config) == {"class_name", "config"}, list(model_config)
    training = json.loads(f.attrs["training_config"])
    for key in ["loss", "metrics", "weighted_metrics", "loss_weights", "optimizer_config"]:
        assert key in training, (key, list(training))
    assert set(training["optimizer_config"]) == {"class_name", "config"}
    group = f["model_weights"]
    for key in ["layer_names", "backend", "keras_version"]:
        assert key in group.attrs, (key, list(group.attrs))
    assert names(group.attrs["layer_names"]) == list(layer_weights), names(group.attrs["layer_names"])
    for layer, weight_names in layer_weights.items():
        assert names(group[layer].attrs["weight_names"]) == weight_names, (
            layer, names(group[layer].attrs["weight_names"]))
        for name in weight_names:
            assert isinstance(group[layer][name], h5py.Dataset), (layer, name)
    stored = names(f["optimizer_weights"].attrs["weight_names"])
    assert stored == optimizer_names, stored
    for name in stored:
        assert isinstance(f["optimizer_weights"][name], h5py.Dataset), name
    assert f["optimizer_weights"][stored[0]].dtype == np.int64
    return f


def keys_without_ids(value):
    return [k for k in value if k != "shared_object_id"]


def compare_with_keras_file(ours, theirs):
    """The same structure as a Keras-written Sequential archive of Dense layers and Adam."""
    with zipfile.ZipFile(ours) as a, zipfile.ZipFile(theirs) as b:
        assert [(i.filename, i.compress_type) for i in a.infolist()] == \
            [(i.filename, i.compress_type) for i in b.infolist()]
        assert list(json.loads(a.read("metadata.json"))) == \
            list(json.loads(b.read("metadata.json")))
        ca, cb = json.loads(a.read("config.json")), json.loads(b.read("config.json"))
        wa = h5py.File(io.BytesIO(a.read("model.weights.h5")), "r")
        wb = h5py.File(io.BytesIO(b.read("model.weights.h5")), "r")
    assert list(ca) == list(cb), (list(ca), list(cb))
    assert keys_without_ids(ca["config"]) == keys_without_ids(cb["config"])
    assert list(ca["compile_config"]) == list(cb["compile_config"])
    oa, ob = ca["compile_config"]["optimizer"], cb["compile_config"]["optimizer"]
    assert list(oa) == list(ob) and list(oa["config"]) == list(ob["config"]), (oa, ob)
    for la, lb in [(ca["config"]["layers"][0], cb["config"]["layers"][0]),
                   (ca["config"]["layers"][1], cb["config"]["layers"][1])]:
        assert la["class_name"] == lb["class_name"]
        assert list(la) == list(lb), (list(la), list(lb))
        assert keys_without_ids(la["config"]) == keys_without_ids(lb["config"]), (
            list(la["config"]), list(lb["config"]))
    assert sorted(wa.keys()) == sorted(wb.keys()) == ["layers", "optimizer", "vars"]
    assert list(wa["layers"]["dense"]["vars"]) == list(wb["layers"]["dense"]["vars"])
    for i in range(2):
        assert wa["optimizer/vars"][str(i)].dtype == wb["optimizer/vars"][str(i)].dtype
    # Adam's slots: per variable, its momentum then its velocity (shapes pairwise equal).
    for store in (wa, wb):
        slots = [store["optimizer/vars"][str(i)].shape for i in range(2, len(store["optimizer/vars"]))]
        assert slots[0::2] == slots[1::2], slots


def main():
    writer = sys.argv[1]
    keras_written = sys.argv[2]
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([writer, out], check=True)
        seq_layers = {"dense": [(6, 8), (8,)], "dense_1": [(8, 3), (3,)]}
        keras_file = check_keras(os.path.join(out, "sequential.keras"), seq_layers, 2 + 2 * 4,
                                 functional=False)
        h5 = check_h5(os.path.join(out, "sequential.h5"),
                      {"dense": ["dense/kernel:0", "dense/bias:0"],
                       "dense_1": ["dense_1/kernel:0", "dense_1/bias:0"]},
                      ["Adam/iter:0"] + [f"Adam/{w}/{s}:0" for s in ["m", "v"]
                                         for w in ["dense/kernel", "dense/bias",
                                                   "dense_1/kernel", "dense_1/bias"]])
        # The same values in both files, and the trained step count.
        assert np.array_equal(keras_file["layers/dense/vars/0"][()],
                              h5["model_weights/dense/dense/kernel:0"][()])
        assert keras_file["optimizer/vars/0"][()] == h5["optimizer_weights/Adam/iter:0"][()] == 4
        check_weights_layout(h5py.File(os.path.join(out, "sequential.weights.h5"), "r"),
                             seq_layers, None)
        compare_with_keras_file(os.path.join(out, "sequential.keras"), keras_written)

        fun_layers = {"input_layer": [], "input_layer_1": [], "concatenate": [],
                      "dense": [(10, 5), (5,)], "dense_1": [(5, 2), (2,)]}
        check_keras(os.path.join(out, "functional.keras"), fun_layers, 2 + 4, functional=True)
        check_h5(os.path.join(out, "functional.h5"),
                 {"a": [], "b": [], "concatenate": [],
                  "dense_2": ["dense_2/kernel:0", "dense_2/bias:0"],
                  "dense_3": ["dense_3/kernel:0", "dense_3/bias:0"]},
                 ["SGD/iter:0"] + [f"SGD/{w}/momentum:0"
                                   for w in ["dense_2/kernel", "dense_2/bias",
                                             "dense_3/kernel", "dense_3/bias"]])
    print("keras layout: OK")


if __name__ == "__main__":
    main()
