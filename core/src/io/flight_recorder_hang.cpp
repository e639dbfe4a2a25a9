// Flight-recorder dumps read against the plan (flight_recorder_hang.h).
#include "pipestudio/core/io/flight_recorder_hang.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "pipestudio/core/analysis/comm_semantics.h"
#include "pipestudio/core/analysis/dependency_graph.h"
#include "pipestudio/core/io/pytorch_csv.h"

namespace ps::core {

namespace {

Diagnostic frError(const char* code, std::string message) {
  return makeError(code, std::move(message));
}

std::string quoted(const FlightRecorderEntry& e) {
  return "'" + e.profilingName.substr(0, 80) + "'";
}

// The plan's point-to-point ops across ranks as each rank issues them (comm_semantics.h: one entry
// per op, unbatched), and per kind and peer.
using OpKindAndPeer = std::pair<bool, int>;  // (send?, peer rank)
struct RankStream {
  std::vector<int> ops;                              // op ids in issue order
  std::vector<OpKindAndPeer> kinds;                  // of each of `ops`
  std::map<OpKindAndPeer, std::vector<int>> byKind;  // op ids of each kind and peer
};

// One op a rank issued: consecutive entries of one batch, kind and peer (a stage's several
// tensors to one peer).
struct Issued {
  bool send = false;
  int peer = -1;
  const FlightRecorderEntry* first = nullptr;
  bool completed = true;
  std::string state;
};

std::vector<Issued> issuedOps(const std::vector<const FlightRecorderEntry*>& p2p,
                              const std::map<std::int64_t, const FlightRecorderEntry*>& batches) {
  std::vector<Issued> out;
  for (const FlightRecorderEntry* e : p2p) {
    if (!out.empty() && out.back().first->p2pSeq == e->p2pSeq && out.back().send == e->isSend() &&
        out.back().peer == e->peer) {
      if (!batches.count(e->p2pSeq)) out.back().completed = out.back().completed && e->completed();
      continue;
    }
    Issued i;
    i.send = e->isSend();
    i.peer = e->peer;
    i.first = e;
    auto b = batches.find(e->p2pSeq);
    const FlightRecorderEntry& stateOf = b != batches.end() ? *b->second : *e;
    i.completed = stateOf.completed();
    i.state = stateOf.retired && stateOf.state != "completed" ? "retired" : stateOf.state;
    out.push_back(std::move(i));
  }
  return out;
}

std::string describeKind(bool send, int peer) {
  return send ? "a send to rank " + std::to_string(peer) : "a receive from rank " + std::to_string(peer);
}

// "name (description), ..." of process groups.
std::string groupList(const std::map<std::string, std::string>& groups) {
  std::string out;
  for (const auto& [name, desc] : groups) {
    if (!out.empty()) out += ", ";
    out += name;
    out += " (";
    out += desc;
    out += ")";
  }
  return out;
}

// The process group to read: the one named, else the only one with sends and receives.
Result<std::pair<std::string, std::string>> pickGroup(const std::vector<FlightRecorderDump>& dumps,
                                                      const FlightRecorderOptions& options) {
  std::map<std::string, std::string> withP2p;  // name -> description
  std::set<std::string> backends;
  size_t entries = 0;
  for (const FlightRecorderDump& d : dumps)
    for (const FlightRecorderEntry& e : d.entries) {
      ++entries;
      backends.insert(e.backend);
      if (e.isSend() || e.isRecv()) withP2p.emplace(e.pgName, e.pgDesc);
    }
  if (!options.group.empty()) {
    for (const auto& [name, desc] : withP2p)
      if (name == options.group || desc == options.group) return std::make_pair(name, desc);
    const std::string names = groupList(withP2p);
    return frError("flight-recorder.group",
                   "no process group '" + options.group + "' with sends or receives in the dumps" +
                       (names.empty() ? std::string() : "; those with some: " + names));
  }
  if (withP2p.empty()) {
    std::string kinds;
    for (const std::string& b : backends) {
      if (!kinds.empty()) kinds += ", ";
      kinds += b;
    }
    return frError(
        "flight-recorder.no-p2p",
        "no point-to-point entry in the " + std::to_string(dumps.size()) + " dump(s) (" +
            std::to_string(entries) + " entries" + (kinds.empty() ? "" : ", backend " + kinds) +
            "): PyTorch's flight recorder records sends and receives for NCCL process groups, while "
            "its Gloo backend records collectives only (checked on PyTorch 2.11), so these dumps "
            "cannot say where the pipeline stopped; run on NCCL, or use the engine's --timeout "
            "post-mortem");
  }
  if (withP2p.size() > 1) {
    return frError("flight-recorder.group", "sends and receives in more than one process group (" +
                                                groupList(withP2p) + "): name the pipeline's");
  }
  return std::make_pair(withP2p.begin()->first, withP2p.begin()->second);
}

}  // namespace

Result<FlightRecorderReading> readHangFromFlightRecorder(const Schedule& plan,
                                                         const std::vector<FlightRecorderDump>& dumps,
                                                         const FlightRecorderOptions& options) {
  PS_ASSIGN_OR_RETURN(const auto group, pickGroup(dumps, options));
  const DependencyGraph g(plan);
  if (!g.problems().empty())
    return frError("flight-recorder.plan", "the plan has errors (validate shows them): it cannot be mapped");
  const int D = plan.pipeline.devices;
  CommOptions nccl;
  nccl.semantics = CommSemantics::Nccl;
  const CommPlan comm = makeCommPlan(plan, g, nccl);
  std::vector<RankStream> streams(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d)
    for (int e = comm.entryBegin[static_cast<size_t>(d)]; e < comm.entryBegin[static_cast<size_t>(d) + 1];
         ++e)
      for (int k = comm.entryOpBegin[static_cast<size_t>(e)];
           k < comm.entryOpBegin[static_cast<size_t>(e) + 1]; ++k) {
        const int id = comm.entryOps[static_cast<size_t>(k)];
        const Op& op = g.op(id);
        const OpKindAndPeer kind{op.kind == OpKind::SendF || op.kind == OpKind::SendB,
                                 plan.pipeline.deviceOf(pointToPointPeerStage(g.routes(), op))};
        RankStream& stream = streams[static_cast<size_t>(d)];
        stream.ops.push_back(id);
        stream.kinds.push_back(kind);
        stream.byKind[kind].push_back(id);
      }

  FlightRecorderReading out;
  out.group = group.first + " (" + group.second + ")";
  out.ranks.resize(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) {
    out.ranks[static_cast<size_t>(d)].device = d;
    out.ranks[static_cast<size_t>(d)].note = "no flight-recorder dump";
  }
  std::vector<int> dumpOf(static_cast<size_t>(D), -1);
  int from = -1;
  std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
  for (size_t di = 0; di < dumps.size(); ++di) {
    const FlightRecorderDump& dump = dumps[di];
    std::vector<const FlightRecorderEntry*> p2p;
    std::map<std::int64_t, const FlightRecorderEntry*> batches;
    std::int64_t firstRecord = std::numeric_limits<std::int64_t>::max();
    for (const FlightRecorderEntry& e : dump.entries) {
      firstRecord = std::min(firstRecord, e.recordId);
      if (e.pgName != group.first) continue;
      if (e.isSend() || e.isRecv()) p2p.push_back(&e);
      if (e.op == "coalesced" && e.isP2p) batches[e.p2pSeq] = &e;
    }
    // The pipeline rank: the group rank its sends and receives name, else its place in the group.
    int self = -1;
    if (!p2p.empty()) {
      self = p2p.front()->self;
      for (const FlightRecorderEntry* e : p2p)
        if (e->self != self)
          return frError("flight-recorder.invalid",
                         dump.source + ": record_id " + std::to_string(e->recordId) + " " + quoted(*e) +
                             " names rank " + std::to_string(e->self) +
                             " where the dump's first op names rank " + std::to_string(self));
    } else if (const FlightRecorderGroup* cfg = dump.group(group.first)) {
      auto it = std::find(cfg->ranks.begin(), cfg->ranks.end(), dump.rank);
      if (it != cfg->ranks.end()) self = static_cast<int>(it - cfg->ranks.begin());
    }
    if (self < 0) continue;  // not a member of the pipeline's group
    if (self >= D)
      return frError("flight-recorder.rank", dump.source + ": pipeline rank " + std::to_string(self) +
                                                 ", and the plan has " + std::to_string(D) + " ranks");
    if (dumpOf[static_cast<size_t>(self)] >= 0)
      return frError("flight-recorder.rank",
                     dump.source + " and " +
                         dumps[static_cast<size_t>(dumpOf[static_cast<size_t>(self)])].source +
                         " are both pipeline rank " + std::to_string(self));
    dumpOf[static_cast<size_t>(self)] = static_cast<int>(di);
    StuckDevice& st = out.ranks[static_cast<size_t>(self)];
    st.state = StuckDevice::State::Running;
    st.note = "issued no send or receive";
    const RankStream& stream = streams[static_cast<size_t>(self)];
    // Older entries overwritten: the ring buffer no longer holds the run's first op.
    const bool overwritten = firstRecord > 0 && firstRecord != std::numeric_limits<std::int64_t>::max();
    std::map<OpKindAndPeer, size_t> seen;
    const std::vector<Issued> issued = issuedOps(p2p, batches);
    int lastDone = -1;
    for (const Issued& i : issued) {
      const FlightRecorderEntry& e = *i.first;
      int id = -1;
      size_t iteration = 0;
      if (!overwritten) {
        auto k = stream.byKind.find({i.send, i.peer});
        if (k == stream.byKind.end())
          return frError("flight-recorder.mismatch",
                         dump.source + ": record_id " + std::to_string(e.recordId) + " " + quoted(e) +
                             " is " + describeKind(i.send, i.peer) + ", and rank " + std::to_string(self) +
                             " of the plan has none: these dumps are not of this plan's run");
        const size_t n = seen[{i.send, i.peer}]++;
        id = k->second[n % k->second.size()];
        iteration = n / k->second.size();
      } else {
        if (stream.ops.empty() || e.p2pSeq < 1)
          return frError("flight-recorder.mismatch",
                         dump.source + ": record_id " + std::to_string(e.recordId) + " " + quoted(e) +
                             ": rank " + std::to_string(self) + " of the plan sends and receives nothing");
        const auto pos = static_cast<size_t>(e.p2pSeq - 1);
        id = stream.ops[pos % stream.ops.size()];
        iteration = pos / stream.ops.size();
        const Op& op = g.op(id);
        if (stream.kinds[pos % stream.ops.size()] != OpKindAndPeer{i.send, i.peer})
          return frError(
              "flight-recorder.mismatch",
              dump.source + ": the ring buffer kept entries from record_id " + std::to_string(firstRecord) +
                  " on, so ops are placed by p2p_seq_id: " + quoted(e) + " (p2p_seq_id " +
                  std::to_string(e.p2pSeq) + ") falls on " + pytorchActionText(plan, op) + ", which is not " +
                  describeKind(i.send, i.peer) +
                  "; raise TORCH_FR_BUFFER_SIZE so the dump keeps the run's first send and receive");
      }
      ++out.opsMapped;
      if (i.completed) {
        lastDone = id;
        continue;
      }
      if (st.state == StuckDevice::State::Waiting) continue;  // queued behind the stuck op
      // The first op not completed: where the rank's communication stream stands.
      st.state = StuckDevice::State::Waiting;
      st.step = g.ref(id).step;
      st.action = pytorchActionText(plan, g.op(id));
      st.waitsOnDevice = i.peer;
      st.seconds = -1;
      const int match = comm.matchOf[static_cast<size_t>(id)];
      if (match >= 0) {
        st.waitsFor = pytorchActionText(plan, g.op(match));
        st.waitsForStep = g.ref(match).step;
      }
      st.note =
          quoted(e) + " " + i.state + ", p2p_seq_id " + std::to_string(e.p2pSeq) +
          (iteration > 0 ? ", in step " + std::to_string(iteration) + " of the run (from 0)" : std::string());
      if (e.createdNs < oldest || from < 0) {
        oldest = e.createdNs;
        from = self;
        out.iteration = static_cast<int>(iteration);
      }
    }
    if (st.state == StuckDevice::State::Running && lastDone >= 0) {
      st.note =
          "every send and receive it issued completed, the last " + pytorchActionText(plan, g.op(lastDone));
    }
    out.backend = p2p.empty() ? out.backend : p2p.front()->backend;
  }
  if (from >= 0) out.hang = describeHang(out.ranks, from, "rank");
  return out;
}

}  // namespace ps::core
