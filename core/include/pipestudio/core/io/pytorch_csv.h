#pragma once
// torch.distributed.pipelining schedule CSV: one row per rank, one action per cell,
// empty cell = idle step.
#include <string>
#include <string_view>
#include <vector>

#include "pipestudio/core/analysis/pytorch_lowering.h"
#include "pipestudio/core/model/schedule.h"

namespace ps::core {

enum class CsvFormat : std::uint8_t { ComputeOnly, ComputeComms };

struct CsvReadOptions {
  std::string filename = "<input>";
  int microbatches = 0;  // 0 = inferred (max micro-batch + 1)
  int maxErrors = 50;
};

// Stage -> rank inferred from the rows; diagnostics point at row and cell (line:col).
Result<Schedule> readPytorchCsv(std::string_view text, const CsvReadOptions& options = {});

// Where each step of the returned schedule came from: [device][step] -> file:line:col of its
// cell, so that validator diagnostics (which name OpRefs) can point at cells.
using CsvStepLocations = std::vector<std::vector<SourceLocation>>;
Result<Schedule> readPytorchCsv(std::string_view text, const CsvReadOptions& options,
                                CsvStepLocations* locations);
// compute_only: the compute actions only (what PyTorch's _load_csv(format="compute_only")
// accepts, in every version); compute_comms: the target PyTorch's lowering of them
// (pytorch_lowering.h), or, for a schedule with explicit SEND/RECV, its own order plus any
// missing REDUCE_GRAD (and, for 2.15, WAIT_* actions). An error only when a compute_comms
// lowering stalls (an order that deadlocks).
Result<std::string> writePytorchCsv(const Schedule& s, CsvFormat format = CsvFormat::ComputeOnly,
                                    const PytorchTarget& target = {});

// What writing `s` as a PyTorch CSV of `format` leaves out, one phrase each (empty when
// nothing): the partition, the cost profile, ops without a PyTorch action, and for
// compute_only the SEND/RECV, UNSHARD/RESHARD and REDUCE_GRAD actions, and for a target before
// 2.15 the WAIT_* actions. Exports say so.
std::vector<std::string> csvExportLosses(const Schedule& s, CsvFormat format,
                                         const PytorchTarget& target = {});

}  // namespace ps::core
