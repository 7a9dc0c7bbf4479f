#!/usr/bin/python3
"""An independent reader of TensorFlow V2 checkpoints (tensor bundles), for tests.

Written from the format's description (TensorFlow's tsl/lib/io/table_format.txt and
tensor_bundle.cc), not from est's C++ reader, so that it checks est's writer from the outside:

  PREFIX.index                 a LevelDB-style table: data blocks of prefix-compressed keys with
                               restart points, a metaindex and an index block, each followed by a
                               type byte and a masked CRC32C, and a 48-byte footer ending in the
                               magic number 0xdb4775248b80fb57. The empty key holds a
                               BundleHeaderProto, every other key a BundleEntryProto.
  PREFIX.data-00000-of-0000N   each tensor's bytes at the entry's offset and size, checked
                               against its masked CRC32C; string tensors as varint64 lengths, the
                               masked CRC32C of the lengths, then the bytes.

The message classes are generated at run time with `protoc --python_out` from
checkpoint/proto/tf_tensor_bundle.proto into a temporary directory. Snappy-compressed blocks
(which TensorFlow's BundleWriter has not written since 1.2) are refused with a message saying so.
A model directory is read at its latest checkpoint as tf.train.latest_checkpoint finds it: the
`checkpoint` state file parsed with protobuf's text_format into a CheckpointState generated from
checkpoint/proto/checkpoint_state.proto, and the prefix it names, when PREFIX.index exists.

  /usr/bin/python3 tf_bundle_read.py PREFIX|DIR       one line per tensor: name dtype shape values
  /usr/bin/python3 tf_bundle_read.py PREFIX --json    {name: {"dtype", "shape", "values"}}, floats
                                                      exactly (float32 widened to float64), strings
                                                      as latin-1 text

Exit status 1 with a message on stderr for anything damaged or unsupported.
"""
import atexit
import importlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
TRAILER_SIZE = 5
MASK_DELTA = 0xA282EAD8


class BundleError(Exception):
    """A damaged, unsupported or missing checkpoint."""


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), continuing from `crc`: crc32c(b'123456789') == 0xE3069283."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def unmask(masked):
    rotated = (masked - MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def mask(crc):
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def varint(data, pos):
    """(value, next position) of the varint at data[pos]."""
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise BundleError('a varint runs past its data')
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def read_block(index, offset, size, what):
    """The contents of the block at [offset, offset + size), its trailer's CRC checked."""
    if offset + size + TRAILER_SIZE > len(index):
        raise BundleError('the %s block (offset %d, size %d) runs past the %d-byte index'
                          % (what, offset, size, len(index)))
    block_type = index[offset + size]
    stored = struct.unpack_from('<I', index, offset + size + 1)[0]
    actual = crc32c(index[offset:offset + size + 1])
    if unmask(stored) != actual:
        raise BundleError('the %s block at offset %d fails its CRC32C check (stored %08x, '
                          'computed %08x)' % (what, offset, unmask(stored), actual))
    if block_type == 1:
        raise BundleError('the %s block at offset %d is snappy-compressed, which this reader '
                          'does not uncompress (TensorFlow since 1.2 and est write raw blocks)'
                          % (what, offset))
    if block_type != 0:
        raise BundleError('the %s block at offset %d has unknown type %d' % (what, offset,
                                                                              block_type))
    return index[offset:offset + size]


def block_entries(block, what):
    """[(key, value)] of a block: entries (shared, non_shared, value_size, key delta, value), then
    the restart offsets, each of which must start an entry that stores its key whole."""
    if len(block) < 4:
        raise BundleError('the %s block is shorter than its restart count' % what)
    num_restarts = struct.unpack_from('<I', block, len(block) - 4)[0]
    limit = len(block) - 4 * (num_restarts + 1)
    if num_restarts < 1 or limit < 0:
        raise BundleError('the %s block has %d restart points' % (what, num_restarts))
    restarts = set(struct.unpack_from('<%dI' % num_restarts, block, limit))
    entries, key, pos, starts = [], b'', 0, set()
    while pos < limit:
        entry_start = pos
        shared, pos = varint(block, pos)
        non_shared, pos = varint(block, pos)
        value_size, pos = varint(block, pos)
        if entry_start in restarts and shared != 0:
            raise BundleError('a restart point of the %s block shares key bytes' % what)
        if shared > len(key) or pos + non_shared + value_size > limit:
            raise BundleError('an entry of the %s block runs past it' % what)
        key = key[:shared] + block[pos:pos + non_shared]
        pos += non_shared
        entries.append((key, block[pos:pos + value_size]))
        pos += value_size
        starts.add(entry_start)
    if not restarts <= starts | ({0} if not entries else set()):
        raise BundleError('a restart point of the %s block is not at an entry' % what)
    return entries


def read_table(index):
    """Every (key, value) of the index table, keys checked to increase."""
    if len(index) < FOOTER_SIZE:
        raise BundleError('the index has %d bytes, fewer than its footer' % len(index))
    footer = index[-FOOTER_SIZE:]
    magic = struct.unpack_from('<Q', footer, FOOTER_SIZE - 8)[0]
    if magic != MAGIC:
        raise BundleError('the index ends in %#x, not the table magic number' % magic)
    _, pos = varint(footer, 0)  # the metaindex handle: no meta blocks are needed
    _, pos = varint(footer, pos)
    index_offset, pos = varint(footer, pos)
    index_size, pos = varint(footer, pos)
    entries = []
    index_entries = block_entries(read_block(index, index_offset, index_size, 'index'), 'index')
    for separator, handle in index_entries:
        offset, handle_pos = varint(handle, 0)
        size, _ = varint(handle, handle_pos)
        for key, value in block_entries(read_block(index, offset, size, 'data'), 'data'):
            if entries and key <= entries[-1][0]:
                raise BundleError('index keys out of order at %r' % key)
            if key > separator:
                raise BundleError('key %r sorts after its block\'s index key %r' % (key, separator))
            entries.append((key, value))
    return entries


def proto_module(proto_path):
    """The _pb2 module of proto_path, generated now by protoc into a temporary directory."""
    out = tempfile.mkdtemp(prefix='tf_bundle_read_')
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(['protoc', '--proto_path=' + os.path.dirname(proto_path),
                    '--python_out=' + out, proto_path], check=True)
    sys.path.insert(0, out)
    return importlib.import_module(os.path.splitext(os.path.basename(proto_path))[0] + '_pb2')


# DataType value -> numpy dtype (little-endian); bfloat16 read as its uint16 bits.
NUMPY_DTYPES = {1: '<f4', 2: '<f8', 3: '<i4', 4: 'u1', 5: '<i2', 6: 'i1', 8: '<c8', 9: '<i8',
                10: '?', 14: '<u2', 17: '<u2', 18: '<c16', 19: '<f2', 22: '<u4', 23: '<u8'}


def string_tensor(data, count, where):
    """The elements of a string tensor's bytes; the CRC over lengths (as uint32, or uint64 above
    2^32-1), their masked checksum and the bytes."""
    if not data:
        return [], 0
    lengths, pos, crc = [], 0, 0
    for _ in range(count):
        length, pos = varint(data, pos)
        lengths.append(length)
        crc = crc32c(struct.pack('<I' if length <= 0xFFFFFFFF else '<Q', length), crc)
    stored = struct.unpack_from('<I', data, pos)[0]
    if unmask(stored) != crc:
        raise BundleError('%s: the string lengths fail their checksum' % where)
    crc = crc32c(data[pos:pos + 4], crc)
    pos += 4
    values = []
    for length in lengths:
        values.append(bytes(data[pos:pos + length]))
        crc = crc32c(data[pos:pos + length], crc)
        pos += length
    if pos != len(data):
        raise BundleError('%s: the string lengths do not add up to the entry size' % where)
    return values, crc


def read_bundle(prefix, proto_path):
    """{name: numpy array (strings: a numpy object array of bytes)} of the bundle at prefix."""
    pb = proto_module(proto_path)
    try:
        with open(prefix + '.index', 'rb') as f:
            index = f.read()
    except OSError as error:
        raise BundleError('cannot open %s.index: %s' % (prefix, error.strerror))
    table = read_table(index)
    if not table or table[0][0] != b'':
        raise BundleError('the index has no header entry')
    header = pb.BundleHeaderProto.FromString(table[0][1])
    if header.endianness != pb.BundleHeaderProto.LITTLE:
        raise BundleError('a big-endian bundle')
    shards = {}
    tensors = {}
    for key, value in table[1:]:
        name = key.decode('utf-8')
        entry = pb.BundleEntryProto.FromString(value)
        where = 'tensor %r' % name
        if entry.slices:
            raise BundleError('%s is partitioned; this reader reads whole tensors only' % where)
        shape = tuple(dim.size for dim in entry.shape.dim)
        shard_path = '%s.data-%05d-of-%05d' % (prefix, entry.shard_id, header.num_shards)
        if shard_path not in shards:
            with open(shard_path, 'rb') as f:
                shards[shard_path] = f.read()
        data = shards[shard_path][entry.offset:entry.offset + entry.size]
        if len(data) != entry.size:
            raise BundleError('%s runs past the end of %s' % (where, shard_path))
        count = int(np.prod(shape, dtype=np.int64))
        if entry.dtype == 7:
            values, crc = string_tensor(data, count, where)
            array = np.empty(count, dtype=object)
            array[:] = values if values else [b''] * count
            array = array.reshape(shape)
        elif entry.dtype in NUMPY_DTYPES:
            crc = crc32c(data)
            array = np.frombuffer(data, dtype=NUMPY_DTYPES[entry.dtype]).reshape(shape)
            if entry.dtype == 14:  # bfloat16: the high half of a float32
                array = (array.astype('<u4') << 16).view('<f4')
        else:
            raise BundleError('%s has DataType %d, which this reader does not decode'
                              % (where, entry.dtype))
        if unmask(entry.crc32c) != crc:
            raise BundleError('%s fails its CRC32C check (stored %08x, computed %08x)'
                              % (where, unmask(entry.crc32c), crc))
        tensors[name] = (entry.dtype, array)
    return tensors


def latest_checkpoint(directory, state_proto_path):
    """What tf.train.latest_checkpoint(directory) returns (checkpoint_management.py): the
    `checkpoint` state file parsed as a CheckpointState text proto, its model_checkpoint_path
    joined to the directory when relative, returned when its V2 index (PATH.index) exists."""
    from google.protobuf import text_format
    pb = proto_module(state_proto_path)
    try:
        with open(os.path.join(directory, 'checkpoint')) as f:
            state = text_format.Parse(f.read(), pb.CheckpointState())
    except OSError as error:
        raise BundleError('no state file in %s: %s' % (directory, error.strerror))
    path = state.model_checkpoint_path
    if not os.path.isabs(path):
        path = os.path.join(directory, path)
    if not os.path.exists(path + '.index'):
        raise BundleError('the state file names %s, which has no %s.index' % (path, path))
    return path


DTYPE_NAMES = {1: 'float32', 2: 'float64', 3: 'int32', 4: 'uint8', 5: 'int16', 6: 'int8',
               7: 'string', 8: 'complex64', 9: 'int64', 10: 'bool', 14: 'bfloat16', 17: 'uint16',
               18: 'complex128', 19: 'float16', 22: 'uint32', 23: 'uint64'}


def as_json(tensors):
    out = {}
    for name, (dtype, array) in tensors.items():
        if dtype == 7:
            values = [v.decode('latin-1') for v in array.reshape(-1)]
        elif array.dtype.kind == 'f':
            values = [float(v) for v in array.reshape(-1)]
        else:
            values = [v.item() for v in array.reshape(-1)]
        out[name] = {'dtype': DTYPE_NAMES.get(dtype, str(dtype)), 'shape': list(array.shape),
                     'values': values}
    return out


def main(argv):
    protos = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                                           '..', 'checkpoint', 'proto'))
    args = [a for a in argv[1:] if not a.startswith('--')]
    if len(args) != 1:
        print('usage: tf_bundle_read.py PREFIX [--json]', file=sys.stderr)
        return 2
    try:
        prefix = args[0]
        if os.path.isdir(prefix):  # a model directory: its latest checkpoint, as TF finds it
            prefix = latest_checkpoint(prefix, os.path.join(protos, 'checkpoint_state.proto'))
            print('latest checkpoint: %s' % prefix, file=sys.stderr)
        tensors = read_bundle(prefix, os.path.join(protos, 'tf_tensor_bundle.proto'))
    except (BundleError, OSError) as error:
        print('tf_bundle_read: %s: %s' % (args[0], error), file=sys.stderr)
        return 1
    if '--json' in argv:
        json.dump(as_json(tensors), sys.stdout)
        print()
    else:
        for name, value in as_json(tensors).items():
            print(name, value['dtype'], value['shape'], value['values'][:10])
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
