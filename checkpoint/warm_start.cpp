// Warm start: select (one regex over trainable variables, a list over all, or none), map
// names, remap vocabularies, check everything, then copy in place; TF's log lines.
#include "checkpoint/warm_start.h"

#include <fmt/format.h>

#include <regex>
#include <set>

#include "checkpoint/log.h"
#include "checkpoint/source.h"
#include "checkpoint/state_file.h"

namespace est::checkpoint {
namespace {

std::regex compile(const std::string& pattern) {
  try {
    return std::regex(pattern);
  } catch (const std::regex_error& error) {
    throw InvalidArgumentError(fmt::format(
        "WarmStartSettings: vars_to_warm_start \"{}\" is not a valid regular expression ({})",
        pattern, error.what()));
  }
}

// re.match: the pattern matched at the start of the name.
bool matches_start(const std::string& name, const std::regex& pattern) {
  return std::regex_search(name, pattern, std::regex_constants::match_continuous);
}

std::string names_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kShown));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (names.size() > kShown) text += fmt::format(", ... ({} more)", names.size() - kShown);
  return text;
}

// The variables the settings select: which entries of `into`, and whether a name the model
// lacks would be selected (list form only).
class Selection {
 public:
  explicit Selection(const VarsToWarmStart& vars) : vars_(vars) {
    if (vars.regex()) patterns_.push_back(compile(*vars.regex()));
    if (vars.list())
      for (const std::string& pattern : *vars.list()) patterns_.push_back(compile(pattern));
  }
  // TF's grouped variables: the regex and none forms look at trainable variables only (none
  // selects them all for var_name_to_vocab_info), the list form at every variable.
  bool selects(const TensorEntry& entry) const {
    if (!vars_.list() && (entry.kind != EntryKind::kVariable || !entry.trainable)) return false;
    return vars_.is_none() || matches(entry.name);
  }
  bool stages(const std::string& name) const { return vars_.list() && matches(name); }

 private:
  bool matches(const std::string& name) const {
    for (const std::regex& pattern : patterns_)
      if (matches_start(name, pattern)) return true;
    return false;
  }
  const VarsToWarmStart& vars_;
  std::vector<std::regex> patterns_;
};

}  // namespace

std::string VarsToWarmStart::str() const {
  if (regex_) return fmt::format("\"{}\"", *regex_);
  if (list_) {
    std::vector<std::string> quoted;
    for (const std::string& pattern : *list_) quoted.push_back(fmt::format("\"{}\"", pattern));
    return fmt::format("[{}]", fmt::join(quoted, ", "));
  }
  return "None";
}

std::optional<WarmStartResult> warm_start(const std::string& model_dir,
                                          const WarmStartSettings& settings, TensorBundle& into,
                                          bool log) {
  if (!model_dir.empty() && latest_checkpoint(model_dir)) return std::nullopt;
  if (settings.ckpt_to_initialize_from.empty())
    throw InvalidArgumentError(
        "WarmStartSettings: ckpt_to_initialize_from is empty; give a checkpoint file or "
        "directory");
  Selection selection(settings.vars_to_warm_start);
  // est's checkpoint or TensorFlow's (source.h), tensors read as they are needed.
  std::unique_ptr<CheckpointSource> old = open_checkpoint(settings.ckpt_to_initialize_from);
  const std::string& path = old->path();
  if (log) {
    log_info(fmt::format("Warm-starting from: {}", settings.ckpt_to_initialize_from));
    if (!settings.vars_to_warm_start.list())
      log_info("Warm-starting variables only in TRAINABLE_VARIABLES.");
  }

  WarmStartResult result;
  result.path = path;
  std::vector<std::pair<TensorEntry*, Tensor>> copies;  // by name, then remapped ones
  std::vector<std::string> by_name, problems, vocab_lines;
  std::set<std::string> prev_used, vocab_used;
  auto old_name_of = [&](const std::string& name) {
    auto it = settings.var_name_to_prev_var_name.find(name);
    if (it == settings.var_name_to_prev_var_name.end()) return name;
    prev_used.insert(name);
    return it->second;
  };
  auto source_of = [&](const std::string& name, const std::string& old_name) {
    if (!old->contains(old_name))
      throw NotFoundError(fmt::format(
          "Warm start from {}: variable \"{}\" (looked up as \"{}\") is not in the checkpoint; "
          "map it with var_name_to_prev_var_name or exclude it from vars_to_warm_start",
          path, name, old_name));
    return old->read(old_name);
  };
  for (TensorEntry& target : into.tensors) {
    if (!selection.selects(target)) continue;
    auto vocab = settings.var_name_to_vocab_info.find(target.name);
    if (vocab == settings.var_name_to_vocab_info.end() && settings.vars_to_warm_start.is_none())
      continue;  // none: only the variables with a vocabulary
    std::string old_name = old_name_of(target.name);
    const Tensor source = source_of(target.name, old_name);
    if (vocab != settings.var_name_to_vocab_info.end()) {
      vocab_used.insert(target.name);
      const VocabInfo& info = vocab->second;
      VocabRemap remap = remap_with_vocab(target.name, target.value, source, info);
      vocab_lines.push_back(fmt::format(
          "Warm-started \"{}\" from \"{}\" remapping vocabulary {} to {}: {} of {} entries found, "
          "{} OOV bucket(s); the others from {}",
          target.name, old_name, info.old_vocab, info.new_vocab, remap.copied, info.new_vocab_size,
          info.num_oov_buckets, info.backup_initializer ? "backup_initializer" : "zeros"));
      copies.emplace_back(&target, remap.value);
      continue;
    }
    if (source.shape() != target.value.shape() || source.dtype() != target.value.dtype())
      problems.push_back(fmt::format(
          "\"{}\" is {} {} in the model but \"{}\" is {} {} in the checkpoint", target.name,
          ops::dtype_name(target.value.dtype()), ops::shape_str(target.value.shape()), old_name,
          ops::dtype_name(source.dtype()), ops::shape_str(source.shape())));
    copies.emplace_back(&target, source);
    by_name.push_back(target.name);
  }
  // The list form: what the patterns select that the model has not created yet (slots).
  if (settings.vars_to_warm_start.list()) {
    for (const std::string& name : old->names())
      if (!into.find(name) && !settings.var_name_to_prev_var_name.count(name) &&
          selection.stages(name))
        result.staged.emplace_back(name, old->read(name));
    for (const auto& [name, old_name] : settings.var_name_to_prev_var_name)
      if (!into.find(name) && selection.stages(name))
        result.staged.emplace_back(name, source_of(name, old_name_of(name)));
  }
  if (!problems.empty())
    throw InvalidArgumentError(fmt::format("Warm start from {}: {}. Nothing was warm-started", path,
                                           fmt::join(problems, "; ")));
  auto check_used = [&](const auto& map, const std::set<std::string>& used, const char* field) {
    std::vector<std::string> unused;
    for (const auto& [name, value] : map)
      if (!used.count(name)) unused.push_back(name);
    if (!unused.empty())
      throw InvalidArgumentError(
          fmt::format("Warm start from {}: {} names {}, which no warm-started variable has (is it "
                      "trainable, and selected by vars_to_warm_start {}?)",
                      path, field, fmt::join(unused, ", "), settings.vars_to_warm_start.str()));
  };
  check_used(settings.var_name_to_prev_var_name, prev_used, "var_name_to_prev_var_name");
  check_used(settings.var_name_to_vocab_info, vocab_used, "var_name_to_vocab_info");

  for (auto& [target, value] : copies) {
    target->value.copy_from(value);
    result.warm_started.push_back(target->name);
  }
  if (log) {
    if (!by_name.empty())
      log_info(fmt::format("Warm-started {} variable(s) by name: {}", by_name.size(),
                           names_list(by_name)));
    for (const std::string& line : vocab_lines) log_info(line);
    if (!result.staged.empty()) {
      std::vector<std::string> staged;
      for (const auto& [name, value] : result.staged) staged.push_back(name);
      log_info(fmt::format(
          "Staged {} checkpoint value(s) for variables the model creates later (optimizer "
          "slots): {}",
          staged.size(), names_list(staged)));
    }
    log_info(fmt::format("Warm-started {} variables.", result.warm_started.size()));
  }
  return result;
}

}  // namespace est::checkpoint
