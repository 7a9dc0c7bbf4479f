// IDX files and (Fashion-)MNIST: synthetic files for headers, types and every corruption case;
// one case reads the installed Fashion-MNIST and checks facts computed independently with
// Python (numpy + gzip) from the same files.
#include <doctest/doctest.h>
#include <zlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "data/background_read.h"
#include "data/file_stream.h"
#include "data/idx.h"
#include "data/input_context.h"
#include "tests/data/test_util.h"
#include "tests/skip.h"

using namespace est;
using namespace est::data;
using est::testing::contains;
using est::testing::drain;
using est::testing::error_message;
using est::testing::scratch_file;

namespace {

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

void write(const std::string& path, const std::string& bytes, bool gzip) {
  if (gzip) {
    gzFile out = gzopen(path.c_str(), "wb");
    gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(out);
  } else {
    std::ofstream(path, std::ios::binary) << bytes;
  }
}

std::string images_bytes(uint32_t count) {
  std::string bytes = be32(0x803) + be32(count) + be32(2) + be32(2);
  for (uint32_t i = 0; i < count * 4; ++i) bytes.push_back(static_cast<char>(i * 10));
  return bytes;
}

std::string labels_bytes(uint32_t count) {
  std::string bytes = be32(0x801) + be32(count);
  for (uint32_t i = 0; i < count; ++i) bytes.push_back(static_cast<char>(i % 10));
  return bytes;
}

// A directory holding train-images/labels (gzipped) with the given bytes.
std::string make_dir(const std::string& name, const std::string& images,
                     const std::string& labels) {
  std::string dir = scratch_file(name);
  std::filesystem::create_directories(dir);
  write(dir + "/train-images-idx3-ubyte.gz", images, true);
  write(dir + "/train-labels-idx1-ubyte.gz", labels, true);
  return dir;
}

}  // namespace

TEST_CASE("mnist reads gzipped IDX images and labels into image/label elements") {
  std::string dir = make_dir("mnist_ok", images_bytes(3), labels_bytes(3));
  auto rows = drain(mnist(dir, "train"));
  REQUIRE(rows.size() == 3);
  CHECK(rows[1].features.at("image").shape() == Shape{2, 2, 1});
  CHECK(rows[1].features.at("image").dtype() == DType::kU8);
  CHECK(rows[1].features.at("image").to_vector<int64_t>() == std::vector<int64_t>{40, 50, 60, 70});
  CHECK(rows[2].labels.dtype() == DType::kI64);
  CHECK(rows[2].labels.item() == 2);
  auto scaled = scale(rows[1]);
  CHECK(scaled.features.at("image").dtype() == DType::kF32);
  CHECK(scaled.features.at("image").to_vector<float>() ==
        std::vector<float>{40 / 255.0f, 50 / 255.0f, 60 / 255.0f, 70 / 255.0f});
  CHECK(scaled.labels.dtype() == DType::kI64);

  // Plain (not gzipped) files and other element types: int16 and float32, big-endian.
  std::string plain = scratch_file("plain.idx");
  write(plain, be32(0x0B01) + be32(2) + std::string("\xff\xfe\x01\x00", 4), false);
  CHECK(read_idx(plain).to_vector<int64_t>() == std::vector<int64_t>{-2, 256});
  write(plain, be32(0x0D01) + be32(1) + std::string("\x3f\xc0\x00\x00", 4), false);
  CHECK(read_idx(plain).item() == 1.5);
}

TEST_CASE("scale divides every byte value by 255 in float32, as tf.cast(image) / 255.0") {
  Tensor bytes = Tensor::empty({16, 16}, DType::kU8);
  for (int v = 0; v < 256; ++v) bytes.data<uint8_t>()[v] = static_cast<uint8_t>(255 - v);
  Element scaled = scale(Element(Features{{"image", bytes}}, Tensor::scalar(3, DType::kI64)));
  const Tensor& image = scaled.features.at("image");
  REQUIRE(image.dtype() == DType::kF32);
  CHECK(image.shape() == Shape{16, 16});
  int differ = 0;  // bytes whose quotient a multiplication by 1/255 would round differently
  for (int v = 0; v < 256; ++v) {
    const float expected = static_cast<float>(255 - v) / 255.0f;
    const float got = image.data<float>()[v];
    CHECK(std::memcmp(&got, &expected, sizeof got) == 0);
    differ += static_cast<float>(255 - v) * (1.0f / 255.0f) != expected;
  }
  CHECK(differ > 0);  // so the comparison above tells a division from a multiplication
  CHECK(scaled.labels.item() == 3);
}

TEST_CASE("bad IDX magic, truncation, trailing bytes and mismatched counts are DataLossErrors") {
  std::string dir = make_dir("mnist_magic", labels_bytes(3), labels_bytes(3));
  std::string message = error_message<DataLossError>([&] { drain(mnist(dir, "train")); });
  CHECK(contains(message, "bad IDX magic number"));
  CHECK(contains(message, "train-images-idx3-ubyte.gz"));
  CHECK(contains(message, "expected 0x00000803"));
  CHECK(contains(message, "found 0x00000801"));

  std::string images = images_bytes(3);
  dir = make_dir("mnist_short", images.substr(0, images.size() - 5), labels_bytes(3));
  message = error_message<DataLossError>([&] { drain(mnist(dir, "train")); });
  CHECK(contains(message, "truncated IDX file"));
  CHECK(contains(message, "needs 12 bytes after the header, found 7"));

  dir = make_dir("mnist_extra", images + "xx", labels_bytes(3));
  CHECK(contains(error_message<DataLossError>([&] { drain(mnist(dir, "train")); }),
                 "has bytes after"));

  dir = make_dir("mnist_count", images, labels_bytes(4));
  CHECK(contains(error_message<DataLossError>([&] { drain(mnist(dir, "train")); }),
                 "holds 3 images but"));

  dir = make_dir("mnist_header", images.substr(0, 6), labels_bytes(3));
  CHECK(contains(error_message<DataLossError>([&] { drain(mnist(dir, "train")); }),
                 "dimensions but ends"));

  // A gzip stream cut short.
  std::string gz_dir = make_dir("mnist_gz", images, labels_bytes(3));
  std::string gz = gz_dir + "/train-images-idx3-ubyte.gz";
  std::ifstream in(gz, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(gz, std::ios::binary) << compressed.substr(0, compressed.size() - 6);
  CHECK(
      contains(error_message<DataLossError>([&] { drain(mnist(gz_dir, "train")); }), "truncated"));

  message = error_message<NotFoundError>([] { mnist("/nonexistent/mnist", "train"); });
  CHECK(contains(message, "/nonexistent/mnist/train-images-idx3-ubyte.gz"));
  CHECK(contains(error_message<InvalidArgumentError>([&] { mnist(dir, "validation"); }),
                 "validation"));
}

namespace {

// 28x28 images whose pixels differ from row to row, with labels, in gzipped files.
std::string make_big_dir(const std::string& name, uint32_t count) {
  std::string images = be32(0x803) + be32(count) + be32(28) + be32(28);
  for (uint32_t i = 0; i < count * 784; ++i)
    images.push_back(static_cast<char>((i * 7 + i / 784) % 253));
  return make_dir(name, images, labels_bytes(count));
}

// The values of every tensor of `elements`, flattened in order.
std::vector<int64_t> all_values(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& element : elements) {
    for (int64_t v : element.features.at("image").to_vector<int64_t>()) out.push_back(v);
    for (int64_t v : element.labels.to_vector<int64_t>()) out.push_back(v);
  }
  return out;
}

std::vector<Element> take_from(Iterator& it, int count) {
  std::vector<Element> out;
  for (int i = 0; i < count; ++i) out.push_back(*it.next());
  return out;
}

}  // namespace

TEST_CASE("mnist's images arrive in the background: the same rows, shuffles and positions") {
  constexpr uint32_t kCount = 5000;  // 3.9 MB of pixels: many of the reader's pieces
  const std::string dir = make_big_dir("mnist_background", kCount);
  // The reference: the same files read whole, as tensor slices.
  Tensor images = read_idx(dir + "/train-images-idx3-ubyte.gz");
  Tensor labels = read_idx(dir + "/train-labels-idx1-ubyte.gz");
  Tensor labels64 = Tensor::from_vector(labels.to_vector<int64_t>());
  Dataset whole = Dataset::from_tensor_slices(
      Features{{"image", images.reshape({kCount, 28, 28, 1})}}, labels64);
  CHECK(all_values(drain(mnist(dir, "train"))) == all_values(drain(whole)));

  // A shuffle buffer of row numbers and batches copied from the columns, saved mid-way and
  // restored in a new iterator: the rows and the order of the slices read whole.
  auto pipeline = [](const Dataset& source) { return source.shuffle(700, 5).batch(32); };
  Iterator streamed = pipeline(mnist(dir, "train")).iterator();
  Iterator reference = pipeline(whole).iterator();
  CHECK(all_values(take_from(streamed, 20)) == all_values(take_from(reference, 20)));
  std::string position = streamed.save_state();
  std::vector<Element> rest = take_from(streamed, 100);
  CHECK(all_values(rest) == all_values(take_from(reference, 100)));
  Iterator resumed = pipeline(mnist(dir, "train")).iterator();
  resumed.restore_state(position);
  CHECK(all_values(take_from(resumed, 100)) == all_values(rest));

  // An iterator dropped after its first row stops the reader mid-file (no hang, no leak).
  {
    Dataset dropped = mnist(dir, "train");
    Iterator it = dropped.iterator();
    CHECK(it.next()->labels.item() == 0);
  }
}

TEST_CASE("the background reader stays within a piece and its read-ahead of the rows asked for") {
  constexpr uint32_t kCount = 8000;  // 6.3 MB of pixels, several times the read-ahead
  const std::string dir = make_big_dir("mnist_ahead", kCount);
  const std::string path = dir + "/train-images-idx3-ubyte.gz";
  auto stream = std::make_unique<InputStream>(path, Compression::kGzip);
  char header[16];  // the source opens the file past its header, as here
  REQUIRE(stream->read(header, sizeof(header)) == sizeof(header));
  Tensor rows = Tensor::empty({kCount, 28, 28}, DType::kU8);
  BackgroundRead reader(std::move(stream), rows, [](InputStream&, size_t) {});
  const int64_t piece_rows = BackgroundRead::kPieceBytes / 784;
  const int64_t ahead_rows = BackgroundRead::kAheadBytes / 784 + 1;
  // A first training step must not share its cores with inflating megabytes it does not need.
  CHECK(BackgroundRead::kPieceBytes + BackgroundRead::kAheadBytes <= (size_t{3} << 19));
  CHECK(reader.wait_for(1) >= 1);
  // Time to run ahead as far as it will (the bound below holds at any moment; the pause only
  // makes a reader that ignores it likely to be caught).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(reader.wait_for(1) <= ahead_rows + piece_rows);
  CHECK(reader.wait_for(3000) <= 3000 + ahead_rows + piece_rows);
  CHECK(reader.wait_for(kCount) == kCount);
  Tensor whole = read_idx(path);
  CHECK(std::memcmp(rows.raw_data(), whole.raw_data(), whole.nbytes()) == 0);
}

TEST_CASE("a gzipped images file cut short yields the rows before the cut, then DataLossError") {
  const std::string dir = make_big_dir("mnist_cut", 5000);
  const std::string gz = dir + "/train-images-idx3-ubyte.gz";
  std::ifstream in(gz, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(gz, std::ios::binary) << compressed.substr(0, compressed.size() * 3 / 4);
  Iterator it = mnist(dir, "train").iterator();
  int64_t rows = 0;
  std::string message = error_message<DataLossError>([&] {
    while (it.next()) ++rows;
  });
  CHECK(contains(message, "truncated"));
  CHECK(contains(message, "train-images-idx3-ubyte.gz"));
  // Streamed: the pieces before the cut (1337 images: several of them) came before the error;
  // read whole, the file gave none.
  CHECK(rows >= 1337);
  CHECK(rows < 5000);
}

TEST_CASE("Fashion-MNIST from the Debian package: sizes, labels and pixels") {
  if (!std::filesystem::exists(std::string(kFashionMnistDirectory) + "/t10k-images-idx3-ubyte.gz"))
    return est::testing::skip(std::string("dataset-fashion-mnist is not installed (no ") +
                              kFashionMnistDirectory + "/t10k-images-idx3-ubyte.gz)");
  auto test = drain(fashion_mnist("test"));
  REQUIRE(test.size() == 10000);
  std::vector<int64_t> first_labels;
  for (int i = 0; i < 10; ++i)
    first_labels.push_back(static_cast<int64_t>(test[static_cast<size_t>(i)].labels.item()));
  CHECK(first_labels == std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7});
  std::vector<int64_t> counts(10, 0);
  for (const auto& e : test) ++counts[static_cast<size_t>(e.labels.item())];
  CHECK(counts == std::vector<int64_t>(10, 1000));
  const Tensor& image = test[0].features.at("image");
  CHECK(image.shape() == Shape{28, 28, 1});
  int64_t sum = 0;
  for (int64_t v : image.to_vector<int64_t>()) sum += v;
  CHECK(sum == 33456);
  CHECK(image.at({14, 12, 0}) == 98);
  CHECK(image.at({14, 19, 0}) == 144);

  // The training split through the DESIGN pipeline: scale, batch; shard 2 of 3.
  auto batches = drain(fashion_mnist("train").map(scale).batch(64).take(2));
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].features.at("image").shape() == Shape{64, 28, 28, 1});
  CHECK(batches[0].features.at("image").dtype() == DType::kF32);
  CHECK(batches[0].labels.to_vector<int64_t>()[0] == 9);
  CHECK(batches[0].labels.to_vector<int64_t>()[3] == 3);
  InputContext context{.num_input_pipelines = 3, .input_pipeline_id = 2, .num_replicas_in_sync = 3};
  CHECK(drain(fashion_mnist("train").shard(context.num_input_pipelines, context.input_pipeline_id))
            .size() == 20000);
}

TEST_CASE("InputContext splits the global batch and rejects inconsistent values") {
  InputContext context{.num_input_pipelines = 2, .input_pipeline_id = 1, .num_replicas_in_sync = 4};
  CHECK(context.get_per_replica_batch_size(64) == 16);
  std::string message =
      error_message<InvalidArgumentError>([&] { context.get_per_replica_batch_size(66); });
  CHECK(contains(message, "66 is not divisible by num_replicas_in_sync 4"));
  CHECK(
      contains(error_message<InvalidArgumentError>([&] { context.get_per_replica_batch_size(0); }),
               "positive"));
  InputContext bad{.num_input_pipelines = 2, .input_pipeline_id = 2};
  CHECK(contains(error_message<InvalidArgumentError>([&] { bad.get_per_replica_batch_size(8); }),
                 "input_pipeline_id 2 is outside [0, 2)"));
  est::InputContext alias;  // aliased into est
  CHECK(alias.get_per_replica_batch_size(8) == 8);
}
