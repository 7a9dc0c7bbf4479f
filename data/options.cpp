// Options: merging, the policies' names, and the with_options stage.
#include "data/options.h"

#include "data/stages.h"

namespace est::data {

namespace {

// Transparent: its iterator is its input's, so adding options changes no iterator state.
class OptionsNode final : public OptionsStage {
 public:
  OptionsNode(NodePtr input, Options options)
      : input_(std::move(input)), options_(std::move(options)) {}
  std::unique_ptr<IteratorBase> make_iterator(const IteratorContext& context) const override {
    return input_->make_iterator(context);
  }
  std::string name() const override { return "with_options"; }
  NodePtr input() const override { return input_; }
  int64_t cardinality() const override { return input_->cardinality(); }
  NodePtr with_input(NodePtr input) const override {
    return std::make_shared<OptionsNode>(std::move(input), options_);
  }
  const Options& options() const override { return options_; }

 private:
  NodePtr input_;
  Options options_;
};

}  // namespace

NodePtr make_options_node(NodePtr input, Options options) {
  return std::make_shared<OptionsNode>(std::move(input), std::move(options));
}

std::string_view auto_shard_policy_name(AutoShardPolicy policy) {
  switch (policy) {
    case AutoShardPolicy::kOff:
      return "OFF";
    case AutoShardPolicy::kAuto:
      return "AUTO";
    case AutoShardPolicy::kFile:
      return "FILE";
    case AutoShardPolicy::kData:
      return "DATA";
    case AutoShardPolicy::kHint:
      return "HINT";
  }
  return "UNKNOWN";
}

Options Options::merge(const Options& later) const {
  Options out = *this;
  if (later.experimental_distribute.auto_shard_policy)
    out.experimental_distribute.auto_shard_policy = later.experimental_distribute.auto_shard_policy;
  return out;
}

}  // namespace est::data
