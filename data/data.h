// The data/ folder's public headers: Dataset pipelines, readers and InputContext.
#pragma once

#include "data/auto_shard.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/element.h"
#include "data/example.h"
#include "data/file_stream.h"
#include "data/hdf5_reader.h"
#include "data/idx.h"
#include "data/input_context.h"
#include "data/options.h"
#include "data/sequence_example.h"
#include "data/tfrecord.h"
