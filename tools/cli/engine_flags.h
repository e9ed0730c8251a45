#pragma once
// The engine's options as command-line flags, for every flashmace command: --KEY VALUE for each
// pair_style keyword of engine_options.h (underscores spelled as dashes: --edge-chunk 4096), plus
// a bare --tf32 (= --tf32 yes) and the value-less --no-reassociate. Values and messages are the pair style's.
#include <string>

#include "engine/engine_options.h"

namespace flashmace {

// If argv[*i] is an engine flag, sets it (consuming its value: *i advances) and returns true.
// Throws Error for a missing or refused value ("--dtype float16: use float32 or float64").
bool set_cli_engine_option(EngineOptions& options, int argc, char** argv, int* i);

// The flags' usage lines.
extern const char* const kEngineFlagsUsage;

}  // namespace flashmace
