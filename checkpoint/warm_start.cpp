// Warm start: select by regex, map names, check, then copy in place.
#include "checkpoint/warm_start.h"

#include <fmt/format.h>

#include <regex>
#include <set>

#include "checkpoint/log.h"
#include "checkpoint/reader.h"
#include "checkpoint/state_file.h"

namespace est::checkpoint {

std::optional<WarmStartResult> warm_start(const std::string& model_dir,
                                          const WarmStartSettings& settings, TensorBundle& into) {
  if (!model_dir.empty() && latest_checkpoint(model_dir)) return std::nullopt;
  if (settings.ckpt_to_initialize_from.empty())
    throw InvalidArgumentError(
        "WarmStartSettings: ckpt_to_initialize_from is empty; give a checkpoint file or "
        "directory");
  std::regex pattern;
  try {
    pattern = std::regex(settings.vars_to_warm_start);
  } catch (const std::regex_error& error) {
    throw InvalidArgumentError(fmt::format(
        "WarmStartSettings: vars_to_warm_start \"{}\" is not a valid regular expression ({})",
        settings.vars_to_warm_start, error.what()));
  }

  std::string path = resolve_checkpoint_path(settings.ckpt_to_initialize_from);
  TensorBundle old = load(path);
  WarmStartResult result;
  result.path = path;
  std::vector<std::pair<TensorEntry*, const TensorEntry*>> copies;
  std::vector<std::string> problems;
  std::set<std::string> mapped_used;
  for (TensorEntry& target : into.tensors) {
    if (target.kind != EntryKind::kVariable || !target.trainable) continue;
    if (!std::regex_search(target.name, pattern, std::regex_constants::match_continuous)) continue;
    std::string old_name = target.name;
    if (auto it = settings.var_name_to_prev_var_name.find(target.name);
        it != settings.var_name_to_prev_var_name.end()) {
      old_name = it->second;
      mapped_used.insert(target.name);
    }
    const TensorEntry* source = old.find(old_name);
    if (!source)
      throw NotFoundError(fmt::format(
          "Warm start from {}: variable \"{}\" (looked up as \"{}\") is not in the checkpoint; "
          "map it with var_name_to_prev_var_name or exclude it from vars_to_warm_start",
          path, target.name, old_name));
    if (source->value.shape() != target.value.shape() ||
        source->value.dtype() != target.value.dtype())
      problems.push_back(fmt::format(
          "\"{}\" is {} {} in the model but \"{}\" is {} {} in the checkpoint", target.name,
          ops::dtype_name(target.value.dtype()), ops::shape_str(target.value.shape()), old_name,
          ops::dtype_name(source->value.dtype()), ops::shape_str(source->value.shape())));
    copies.emplace_back(&target, source);
  }
  if (!problems.empty())
    throw InvalidArgumentError(fmt::format("Warm start from {}: {}. Nothing was warm-started", path,
                                           fmt::join(problems, "; ")));
  std::vector<std::string> unused;
  for (const auto& [name, old_name] : settings.var_name_to_prev_var_name)
    if (!mapped_used.count(name)) unused.push_back(name);
  if (!unused.empty())
    throw InvalidArgumentError(fmt::format(
        "Warm start from {}: var_name_to_prev_var_name names {} which no warm-started variable "
        "has (is it trainable, and matched by vars_to_warm_start \"{}\"?)",
        path, fmt::join(unused, ", "), settings.vars_to_warm_start));
  for (auto& [target, source] : copies) {
    target->value.copy_from(source->value);
    result.warm_started.push_back(target->name);
  }
  log_info(fmt::format("Warm-started {} variable(s) from {}", result.warm_started.size(), path));
  return result;
}

}  // namespace est::checkpoint
