// onnxruntime-node on serving_bench's model.onnx (the tutorial CNN), one 28x28x1 image per run:
// p50/p99 latency and runs per second with 1, 8 and 64 runs in flight (session.run is
// asynchronous; the runtime's own thread pool does the work), the peer of serving_bench's
// in-process lines.
//
//   NODE_PATH=build/npm/node_modules node bench/serving_ort.js MODEL.onnx [RUNS]
const ort = require('onnxruntime-node');

async function main() {
  const [model, runsText] = process.argv.slice(2);
  const runs = Number(runsText || 256);
  const session = await ort.InferenceSession.create(model);
  const image = new ort.Tensor('float32', Float32Array.from({length: 784}, () => Math.random()),
                               [1, 28, 28, 1]);
  await session.run({image});  // warm-up
  for (const clients of [1, 8, 64]) {
    const latencies = [];
    let next = 0;
    const start = process.hrtime.bigint();
    const client = async () => {
      while (next < runs) {
        next += 1;
        const sent = process.hrtime.bigint();
        await session.run({image});
        latencies.push(Number(process.hrtime.bigint() - sent) / 1e6);
      }
    };
    await Promise.all(Array.from({length: clients}, client));
    const wall = Number(process.hrtime.bigint() - start) / 1e9;
    latencies.sort((a, b) => a - b);
    const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
    console.log(`onnxruntime_node clients=${clients} p50_ms=${at(0.5).toFixed(2)} ` +
                `p99_ms=${at(0.99).toFixed(2)} requests_per_sec=${(latencies.length / wall).toFixed(1)}`);
  }
}
main().catch((error) => {
  console.log(`onnxruntime failed: ${error.message}`);
  process.exit(1);
});
