// Model warmup (tensorflow_model_server's --enable_model_warmup), as TF Serving's
// servables/tensorflow/saved_model_warmup_util.cc and saved_model_warmup.cc do it: the
// requests of <version>/assets.extra/tf_serving_warmup_requests, a TFRecord file of
// PredictionLog records (at most 1000), are run on a version once it loaded and before it is
// served, each `iterations` times. Predict, Classify, Regress and MultiInference logs are run;
// a record of no log type is skipped. No file: nothing to do. Otherwise the version's load
// fails with TF Serving's error: a frame that is not TFRecord (DataLossError "... Please verify
// your warmup data is in TFRecord format."), a record that is not a PredictionLog
// (InvalidArgumentError "Failed to parse warmup record ..."), more than 1000 records, a
// PredictStreamedLog or SessionRunLog (UnimplementedError "Unsupported log_type for warmup"),
// or the request's own error. Counted in serving_metrics.h's model_warmup metrics.
#pragma once

#include "export/batcher.h"
#include "export/servable.h"

namespace est::serving {

// Throws the errors above (their messages name the file).
void run_warmup(const Servable& servable, Batcher* batcher, int iterations = 1);

}  // namespace est::serving
