// est::checkpoint: everything a training program needs to save and restore its state.
#pragma once

#include "checkpoint/backup_and_restore.h"
#include "checkpoint/bundle.h"
#include "checkpoint/init_from_checkpoint.h"
#include "checkpoint/keras_import.h"
#include "checkpoint/log.h"
#include "checkpoint/manager.h"
#include "checkpoint/model_dir.h"
#include "checkpoint/reader.h"
#include "checkpoint/restore.h"
#include "checkpoint/rng_state.h"
#include "checkpoint/source.h"
#include "checkpoint/state_file.h"
#include "checkpoint/variable_store_io.h"
#include "checkpoint/warm_start.h"
#include "checkpoint/writer.h"
