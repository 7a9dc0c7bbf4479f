"""Checks an ONNX file with onnx.checker (full check, shape inference included).

Usage: /usr/bin/python3 onnx_check.py MODEL.onnx
Exit 0 when valid, 1 with the checker's message when not, 3 when python3-onnx is missing
(the test skips then).
"""
import sys

try:
    import onnx
except ImportError as error:
    print(f"python3-onnx is not installed ({error}); scripts/setup.sh installs it")
    sys.exit(3)

try:
    model = onnx.load(sys.argv[1])
    onnx.checker.check_model(model, full_check=True)
except Exception as error:  # the checker's own exception types vary between versions
    print(f"onnx.checker rejected {sys.argv[1]}: {error}")
    sys.exit(1)
print(f"onnx.checker: {sys.argv[1]} is valid (opset {model.opset_import[0].version})")
