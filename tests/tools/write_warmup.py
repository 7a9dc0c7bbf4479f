#!/usr/bin/python3
"""Writes a TF Serving warmup file (assets.extra/tf_serving_warmup_requests: a TFRecord file of
PredictionLog records, as TF Serving's example/resnet_warmup.py writes one) for
serve_ops_test.cpp, with classes grpc_tools.protoc generates from est-serve's .proto files
(export/grpc/proto, TF Serving's).

  write_warmup.py PROTO_DIR STUB_DIR OUT RECORD...

Each RECORD is JSON: {"predict": <PredictRequest in protobuf's JSON mapping>}, {"classify":
<ClassificationRequest>}, {"regress": <RegressionRequest>}, or {"bytes_hex": "..."} (a record
whose bytes are these, framed as TFRecord); {"raw_hex": "..."} appends bytes outside any frame.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_serving_client import generate  # noqa: E402


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record):
    length = struct.pack('<Q', len(record))
    return (length + struct.pack('<I', masked(length)) + record +
            struct.pack('<I', masked(record)))


def main():
    proto_dir, stub_dir, out = sys.argv[1], sys.argv[2], sys.argv[3]
    generate(proto_dir, stub_dir)
    from google.protobuf import json_format
    from tensorflow_serving.apis import prediction_log_pb2

    data = b''
    for text in sys.argv[4:]:
        spec = json.loads(text)
        if 'raw_hex' in spec:
            data += bytes.fromhex(spec['raw_hex'])
            continue
        if 'bytes_hex' in spec:
            data += frame(bytes.fromhex(spec['bytes_hex']))
            continue
        log = prediction_log_pb2.PredictionLog()
        if 'predict' in spec:
            json_format.ParseDict(spec['predict'], log.predict_log.request)
        elif 'classify' in spec:
            json_format.ParseDict(spec['classify'], log.classify_log.request)
        elif 'regress' in spec:
            json_format.ParseDict(spec['regress'], log.regress_log.request)
        data += frame(log.SerializeToString())
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, 'wb') as f:
        f.write(data)


if __name__ == '__main__':
    main()
