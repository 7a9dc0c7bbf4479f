// onnxruntime-node behind an HTTP server: the peer of est-serve's REST lines in serving_bench.
// It answers TF Serving's `POST /v1/models/NAME:predict` with a row-format body
// ({"instances": [...]}, one float input) as est-serve does ({"predictions": [{output: value}]}),
// running serving_bench's model.onnx. A Node deployment of this kind runs one process per core
// (Node's cluster module), each with a one-thread onnxruntime session (the model is small: a
// second intra-op thread only adds hand-offs at batch 1), so that is the default.
//
//   NODE_PATH=build/npm/node_modules node bench/serving_ort_http.js MODEL.onnx PORT [WORKERS]
// Prints `listening PORT` once every worker serves; exits when the parent (serving_bench) kills it.
const cluster = require('cluster');
const http = require('http');
const os = require('os');

const [model, portText, workersText] = process.argv.slice(2);
const port = Number(portText);
const workers = Number(workersText || os.cpus().length);

function flatten(value, out) {
  if (Array.isArray(value)) {
    for (const item of value) flatten(item, out);
  } else if (typeof value === 'number') {
    out.push(value);
  } else {
    throw new Error('instances must hold numbers only');
  }
}

function shapeOf(value) {
  const shape = [];
  for (let v = value; Array.isArray(v); v = v[0]) shape.push(v.length);
  return shape;
}

async function serve() {
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(
      model, {intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential'});
  const input = session.inputNames[0];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', async () => {
      try {
        if (request.method !== 'POST' || !request.url.endsWith(':predict'))
          throw new Error(`no route for ${request.method} ${request.url}`);
        const instances = JSON.parse(Buffer.concat(chunks).toString()).instances;
        const values = [];
        flatten(instances, values);
        const feeds = {[input]: new ort.Tensor('float32', Float32Array.from(values),
                                               shapeOf(instances))};
        const outputs = await session.run(feeds);
        const rows = instances.map((_, row) => {
          const prediction = {};
          for (const name of session.outputNames) {
            const tensor = outputs[name];
            const width = tensor.dims.slice(1).reduce((a, b) => a * b, 1);
            const slice = Array.from(tensor.data.slice(row * width, (row + 1) * width), Number);
            prediction[name] = tensor.dims.length === 1 ? slice[0] : slice;
          }
          return prediction;
        });
        const body = JSON.stringify({predictions: rows});
        response.writeHead(200, {'Content-Type': 'application/json'});
        response.end(body);
      } catch (error) {
        response.writeHead(400, {'Content-Type': 'application/json'});
        response.end(JSON.stringify({error: String(error.message)}));
      }
    });
  });
  server.keepAliveTimeout = 5000;
  server.listen(port, '127.0.0.1', () => process.send && process.send('ready'));
}

if (cluster.isPrimary || cluster.isMaster) {
  let ready = 0;
  for (let i = 0; i < workers; ++i) {
    cluster.fork().on('message', (message) => {
      if (message === 'ready' && ++ready === workers) console.log(`listening ${port}`);
    });
  }
  cluster.on('exit', (worker, code) => {
    console.log(`worker ${worker.process.pid} exited with ${code}`);
    process.exit(1);
  });
  process.on('SIGTERM', () => {
    for (const id in cluster.workers) cluster.workers[id].process.kill('SIGKILL');
    process.exit(0);
  });
} else {
  serve().catch((error) => {
    console.log(`onnxruntime failed: ${error.message}`);
    process.exit(1);
  });
}
