// One SummaryWriter per log directory per process, as TF's FileWriterCache: event file names
// carry the second they were created, so two writers opened on one directory in the same
// second would collide; the Estimator, its hooks and successive train/evaluate calls share the
// cached writer instead.
#pragma once

#include <memory>
#include <string>

#include "estimator/summary_writer.h"

namespace est {

std::shared_ptr<SummaryWriter> summary_writer_for(const std::string& logdir);
// Flushes every cached writer (end of train/evaluate).
void flush_summary_writers();

}  // namespace est
