// replicas_home(): the VariableHome of the strategies whose replicas' stores are the variables.
#include "distribute/variable_home.h"

#include "distribute/strategy.h"

namespace est::distribute {
namespace {

class ReplicasHome final : public VariableHome {
 public:
  void initialize_variable(ReplicaContext& replica, const std::string& name,
                           Tensor& value) override {
    replica.broadcast_initial_value(name, value);
  }
};

}  // namespace

std::shared_ptr<VariableHome> replicas_home() { return std::make_shared<ReplicasHome>(); }

}  // namespace est::distribute
