// Search candidates as data: a recipe names the family and knobs that built a candidate, and
// rebuildCandidate runs the same builder again, so the schedule comes back identical.
#include <algorithm>
#include <string>

#include "pipestudio/core/model/enum_names.h"
#include "pipestudio/core/planning/generators.h"
#include "pipestudio/core/planning/list_scheduler.h"
#include "pipestudio/core/planning/partition_search.h"
#include "pipestudio/core/planning/search.h"
#include "pipestudio/core/planning/zb_greedy.h"

namespace ps::core {

constexpr EnumName<CandidateSource> kCandidateSourceNames[] = {{CandidateSource::Builtin, "builtin"},
                                                               {CandidateSource::ListScheduler, "list"},
                                                               {CandidateSource::ZbGreedy, "zb-greedy"},
                                                               {CandidateSource::ZbvGreedy, "zbv-greedy"}};

PS_ENUM_NAME_FUNCTION(CandidateSource, kCandidateSourceNames, candidateSourceName);

std::string recipeKnobsText(const CandidateRecipe& r) {
  std::string out;
  switch (r.source) {
    case CandidateSource::Builtin:
      break;
    case CandidateSource::ListScheduler: {
      const ListSchedulerOptions& k = r.list;
      out = k.splitBackward ? "I/W" : "B";
      if (k.splitBackward)
        out += ", pending W " + (k.maxPendingW < 0 ? std::string("any") : std::to_string(k.maxPendingW));
      if (k.warmupDepth.empty()) {
        out += ", warm-up " + std::string(k.warmupOffset >= 0 ? "+" : "") + std::to_string(k.warmupOffset);
      } else {
        out += ", warm-up";
        for (int w : k.warmupDepth) out += " " + std::to_string(w);
      }
      out += ", group " + std::to_string(k.microbatchGroup > 0 ? k.microbatchGroup : r.devices);
      break;
    }
    case CandidateSource::ZbGreedy:
      out = std::string(r.zbAllowBubbleBeforeFirstB ? "early F" : "no early F") +
            (r.zbPrioritizeB ? ", backward first" : "") + (r.zbNoBubbleGreedy ? ", W into gaps" : "");
      break;
    case CandidateSource::ZbvGreedy:
      out = std::string(r.zbvFillF ? "W before F" : "no W before F") + (r.zbvFillB ? ", W before B" : "");
      break;
  }
  return out;
}

namespace {

Result<Schedule> buildBase(const CostProfile& profile, const CandidateRecipe& r) {
  if (r.source == CandidateSource::Builtin) {
    GeneratorOptions g;
    g.devices = r.devices;
    g.microbatches = r.microbatches;
    PS_ASSIGN_OR_RETURN(Schedule s, generateSchedule(r.builtin, g));
    if (std::any_of(r.policies.begin(), r.policies.end(),
                    [](ActivationPolicy p) { return p != ActivationPolicy::Keep; }))
      return applyActivationPolicies(s, r.policies);
    return s;
  }
  PS_ASSIGN_OR_RETURN(Pipeline pl,
                      Pipeline::make(r.devices, r.devices * r.chunks, r.microbatches, r.placement));
  PS_ASSIGN_OR_RETURN(std::vector<StageCost> costs, stageCosts(profile, pl.stages, r.partition));
  std::optional<Schedule> out;
  switch (r.source) {
    case CandidateSource::ListScheduler: {
      PS_ASSIGN_OR_RETURN(Schedule s, listSchedule(pl, costs, profile, r.list));
      out = std::move(s);
      break;
    }
    case CandidateSource::ZbGreedy: {
      if (r.chunks != 1 || r.placement != PlacementKind::Linear)
        return makeError("search.recipe", "zb-greedy builds linear pipelines with one stage per device only");
      detail::ZbGreedyFlags fl;
      fl.allowBubbleBeforeFirstB = r.zbAllowBubbleBeforeFirstB;
      fl.prioritizeB = r.zbPrioritizeB;
      fl.noBubbleGreedy = r.zbNoBubbleGreedy;
      out = detail::zbGreedySchedule(detail::zbGreedyInput(costs, profile, r.memoryLimitBytes),
                                     r.microbatches, fl);
      break;
    }
    case CandidateSource::ZbvGreedy:
      if (r.chunks != 2 || r.placement != PlacementKind::VShape)
        return makeError("search.recipe",
                         "zbv-greedy builds V-shape pipelines with two stages per device only");
      out = detail::zbvGreedySchedule(costs, profile, r.memoryLimitBytes, r.microbatches, r.zbvFillF,
                                      r.zbvFillB);
      break;
    case CandidateSource::Builtin:
      break;
  }
  if (!out)
    return makeError("search.recipe", std::string(candidateSourceName(r.source)) + " found no order within " +
                                          std::to_string(r.memoryLimitBytes) + " bytes for this recipe");
  out->name = "search";
  return std::move(*out);
}

}  // namespace

Result<Schedule> rebuildCandidate(const CostProfile& profile, const CandidateRecipe& r) {
  PS_ASSIGN_OR_RETURN(Schedule s, buildBase(profile, r));
  s.partition = r.partition;
  for (const OrderMove& m : r.moves) {
    if (m.device < 0 || m.device >= static_cast<int>(s.devices.size()))
      return makeError("search.recipe",
                       "move on device " + std::to_string(m.device) + ", which the schedule does not have");
    auto& ord = s.devices[static_cast<size_t>(m.device)];
    if (m.from >= ord.size() || m.to >= ord.size())
      return makeError("search.recipe", "move " + std::to_string(m.from) + " -> " + std::to_string(m.to) +
                                            " on device " + std::to_string(m.device) + " is outside its " +
                                            std::to_string(ord.size()) + " steps");
    Step moved = ord[m.from];
    ord.erase(ord.begin() + static_cast<long>(m.from));
    ord.insert(ord.begin() + static_cast<long>(m.to), moved);
  }
  return s;
}

}  // namespace ps::core
