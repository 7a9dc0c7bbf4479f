// Names of the groups and attributes of a checkpoint file (see FORMAT.md), shared by the
// writer and the reader so the two cannot drift apart.
#pragma once

#include <cstdint>

namespace est::checkpoint::layout {

inline constexpr int64_t kFormatVersion = 1;

inline constexpr const char* kVariablesGroup = "/variables";
inline constexpr const char* kSlotsGroup = "/slots";
inline constexpr const char* kStateGroup = "/state";

// Root attributes.
inline constexpr const char* kFormatVersionAttribute = "format_version";
inline constexpr const char* kFrameworkAttribute = "framework";
inline constexpr const char* kFrameworkVersionAttribute = "framework_version";
inline constexpr const char* kCreationTimeAttribute = "creation_time";            // ISO 8601, UTC
inline constexpr const char* kCreationTimestampAttribute = "creation_timestamp";  // seconds
inline constexpr const char* kGlobalStepAttribute = "global_step";

// Dataset attributes.
inline constexpr const char* kChecksumAttribute = "crc32";
inline constexpr const char* kTrainableAttribute = "trainable";

inline constexpr const char* kFrameworkName = "est";

}  // namespace est::checkpoint::layout
