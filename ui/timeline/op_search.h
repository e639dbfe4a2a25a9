#pragma once
// Finding ops by what a user types (Perfetto's and Nsight's search boxes): words that must all
// match, each one of
//   an op's name as the timeline writes it ("F3", "B3@s1", "SEND_F2"), case-insensitive;
//   a kind alone ("F", "W", "send_b", "offload") or a kind with its micro-batch ("B3");
//   a micro-batch, stage or device: "mb3" / "m3", "s2" / "@s2" / "stage 2", "d1" / "device 1".
// Matches come in time order (then device), as stepping through them should go.
#include <QString>
#include <vector>

#include "pipestudio/core/model/schedule.h"
#include "pipestudio/core/model/timeline.h"

namespace ps::ui {

struct OpQuery {
  bool valid = true;  // false: a word that is none of the above
  QString problem;    // which word, when not valid
  // Each word's test.
  struct Term {
    std::optional<ps::core::OpKind> kind;
    std::optional<int> microbatch;
    std::optional<int> stage;
    std::optional<int> device;
  };
  std::vector<Term> terms;
};

OpQuery parseOpQuery(const QString& text, const ps::core::Schedule& s);
// The ops of `s` (first op of a pair, or its second when that one matches) that match every
// term, ordered by their start in `timeline` (ops it lacks last, in device order).
std::vector<ps::core::OpRef> findOps(const ps::core::Schedule& s, const ps::core::Timeline& timeline,
                                     const OpQuery& query);

}  // namespace ps::ui
