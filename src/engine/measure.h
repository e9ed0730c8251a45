#pragma once
// What front ends (the pair styles, the command-line tools) use to place and measure evaluations,
// through the engine's public face: device facts (model/device.h: device names, GPU count,
// synchronisation, peak memory) and the per-stage timer (model/stage_timer.h). Torch-free.
#include "model/device.h"
#include "model/stage_timer.h"
