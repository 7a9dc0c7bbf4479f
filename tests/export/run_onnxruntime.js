// Runs an ONNX model with onnxruntime-node (an independent runtime) on inputs from a JSON file
// and writes its outputs as JSON: the export test's cross-check.
//
// Usage: node run_onnxruntime.js MODEL.onnx INPUTS.json OUTPUTS.json
//   INPUTS.json: {"name": {"dtype": "float32" | "int64" | "string" | ..., "dims": [...],
//                          "data": [...]}}
// Exit 3 when onnxruntime-node cannot be loaded (the test skips then).
const fs = require('fs');
let ort;
try {
  ort = require('onnxruntime-node');
} catch (error) {
  console.log(`onnxruntime-node cannot be loaded: ${error.message}`);
  process.exit(3);
}
const arrays = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, bool: Uint8Array,
};
async function main() {
  const [model, inputsPath, outputsPath] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model);
  const feeds = {};
  for (const [name, spec] of Object.entries(JSON.parse(fs.readFileSync(inputsPath, 'utf8')))) {
    const data = spec.dtype === 'int64' ? spec.data.map(BigInt) : spec.data;
    const values = spec.dtype === 'string' ? data : arrays[spec.dtype].from(data);
    feeds[name] = new ort.Tensor(spec.dtype, values, spec.dims);
  }
  const results = await session.run(feeds);
  const outputs = {};
  for (const [name, tensor] of Object.entries(results)) {
    outputs[name] = {dims: tensor.dims, dtype: tensor.type,
                     data: Array.from(tensor.data, (v) => (typeof v === 'string' ? v : Number(v)))};
  }
  fs.writeFileSync(outputsPath, JSON.stringify(outputs));
}
main().catch((error) => {
  console.log(`onnxruntime failed: ${error.message}`);
  process.exit(1);
});
