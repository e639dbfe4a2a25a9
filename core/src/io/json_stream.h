#pragma once
// A streaming reader of Chrome trace JSON: the events of `traceEvents` (or of a top-level array)
// are handed over one at a time, each as a small nlohmann::json, and forgotten; an event the sink
// does not want is skipped as soon as its `ph`, `cat` and `name` say so, without building its
// `args` (record_shapes traces carry most of their bytes there). Memory is bounded by the
// largest single event, whatever the file's size. Positions (line:column) are tracked as the
// text goes by, so errors still name the place.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/input_source.h"
#include "pipestudio/core/model/result.h"

namespace ps::core::detail {

// Where an event (or top-level member) and some of its values are in the text.
struct StreamMarks {
  SourceLocation start;
  // The last value read under each of the keys errors point at ("name", "rank", "device",
  // "baseTimeNanoseconds"), at the value's first character.
  std::vector<std::pair<std::string, SourceLocation>> keys;
  SourceLocation at(std::string_view key) const;
};

enum class EventWant : std::uint8_t {
  Skip,    // not wanted: counted, not built
  Whole,   // built whole
  NoArgs,  // built without its "args"
};

class TraceStreamSink {
 public:
  virtual ~TraceStreamSink() = default;
  // Top-level members other than traceEvents the sink reads (built whole, so small ones).
  virtual bool wantMember(std::string_view key) const = 0;
  virtual void member(const std::string& key, nlohmann::json value, const StreamMarks& marks) = 0;
  // Asked as an event's "ph", "cat" and "name" arrive (the ones not seen yet are null); nullopt
  // means "cannot tell yet". An event never decided is built whole.
  virtual std::optional<EventWant> want(const std::string* ph, const std::string* cat,
                                        const std::string* name) const = 0;
  virtual void event(nlohmann::json& event, const StreamMarks& marks) = 0;
  virtual void skipped() = 0;
  // After each chunk of input; false stops the reading (the import was cancelled).
  virtual bool progress(std::uint64_t consumed, std::uint64_t size) = 0;
};

struct StreamOutcome {
  bool cancelled = false;
  std::uint64_t bytes = 0;  // content bytes read (decompressed)
};

// Reads the whole input. Errors: `trace.open` (unreadable), `trace.gzip` (bad or truncated
// gzip), `trace.json`
// (not JSON: line:column and byte offset), `trace.format` (JSON but no trace).
Result<StreamOutcome> streamChromeTrace(InputSource& in, const std::string& name, TraceStreamSink& sink);

}  // namespace ps::core::detail
