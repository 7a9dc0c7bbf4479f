"""The independent TensorFlow checkpoint reader (tf_bundle_read.py) against files TensorFlow wrote:
TF Serving's half_plus_three variables (a = 0.5, b = 3.0, c = 3.0) read exactly; its checks are
live: a flipped byte in a data shard or an index block, a bad magic number and a snappy block
each stop it with a message naming what is wrong. (That it reads what est's writer writes is
tests/checkpoint/tf_bundle_python_test.cpp.)

    /usr/bin/python3 tf_bundle_read_test.py SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
READER = os.path.join(ROOT, 'tests', 'scripts', 'tf_bundle_read.py')
FIXTURES = os.path.join(ROOT, 'tests', 'checkpoint', 'testdata', 'tf')
sys.path.insert(0, os.path.dirname(READER))
import tf_bundle_read  # noqa: E402

failures = []


def check(condition, what):
    print(('ok     ' if condition else 'FAILED ') + what)
    if not condition:
        failures.append(what)


def run(prefix):
    result = subprocess.run(['/usr/bin/python3', READER, prefix, '--json'], capture_output=True,
                            text=True, timeout=120)
    return result.returncode, result.stdout, result.stderr


# CRC-32C itself: the standard check value, and masking round-trips.
check(tf_bundle_read.crc32c(b'123456789') == 0xE3069283, 'crc32c("123456789") == 0xE3069283')
check(tf_bundle_read.unmask(tf_bundle_read.mask(0x12345678)) == 0x12345678, 'mask/unmask')

# TensorFlow's own file, every value checked.
import json  # noqa: E402

code, out, err = run(os.path.join(FIXTURES, 'half_plus_three', 'variables', 'variables'))
check(code == 0, 'half_plus_three reads (%s)' % err.strip())
tensors = json.loads(out) if code == 0 else {}
check(sorted(tensors) == ['a', 'b', 'c'], 'half_plus_three holds a, b, c: %s' % sorted(tensors))
for name, want in (('a', 0.5), ('b', 3.0), ('c', 3.0)):
    got = tensors.get(name, {})
    check(got == {'dtype': 'float32', 'shape': [], 'values': [want]},
          'half_plus_three %s == float32 scalar %r: %r' % (name, want, got))

# Damage a copy: each check fires with its message.
scratch = tempfile.mkdtemp(prefix='tf_bundle_read_test_')
try:
    source = os.path.join(FIXTURES, 'half_plus_three', 'variables')
    prefix = os.path.join(scratch, 'variables')

    def fresh_copy():
        for name in os.listdir(source):
            shutil.copy(os.path.join(source, name), os.path.join(scratch, name))

    def flip(path, offset):
        with open(path, 'r+b') as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0x01]))

    fresh_copy()
    flip(prefix + '.data-00000-of-00001', 5)  # inside b
    code, _, err = run(prefix)
    check(code == 1 and "tensor 'b' fails its CRC32C check" in err, 'a flipped data byte: ' + err)

    fresh_copy()
    flip(prefix + '.index', 2)  # inside the first data block's entries
    code, _, err = run(prefix)
    check(code == 1 and 'data block at offset 0 fails its CRC32C check' in err,
          'a flipped index byte: ' + err)

    fresh_copy()
    flip(prefix + '.index', os.path.getsize(prefix + '.index') - 1)
    code, _, err = run(prefix)
    check(code == 1 and 'not the table magic number' in err, 'a bad magic number: ' + err)

    code, _, err = run(os.path.join(FIXTURES, 'half_plus_two_cpu', 'variables', 'variables'))
    check(code == 1 and 'snappy-compressed' in err, 'a snappy block is refused: ' + err)

    code, _, err = run(os.path.join(scratch, 'missing'))
    check(code == 1 and 'cannot open' in err, 'a missing index: ' + err)
finally:
    shutil.rmtree(scratch, ignore_errors=True)

print('%d failure(s)' % len(failures))
sys.exit(1 if failures else 0)
