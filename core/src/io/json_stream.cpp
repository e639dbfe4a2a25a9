#include "io/json_stream.h"

#include <iterator>
#include <vector>

namespace ps::core::detail {

SourceLocation StreamMarks::at(std::string_view key) const {
  for (auto it = keys.rbegin(); it != keys.rend(); ++it)
    if (it->first == key) return it->second;
  return start;
}

namespace {

using nlohmann::json;

constexpr size_t kChunk = size_t{1} << 18;

// The decompressed text, a chunk at a time, with the line and column of what was read.
class Cursor {
 public:
  Cursor(InputSource& in, TraceStreamSink& sink) : in_(in), sink_(sink), buf_(kChunk) {
    p_ = e_ = buf_.data();
    fill();
  }

  bool atEnd() const { return p_ == e_; }
  char peek() const { return *p_; }
  void advance() {
    if (*p_ == '\n') {
      prevLineStart_ = lineStart_;
      lineStart_ = offset() + 1;
      ++line_;
    }
    ++p_;
    if (p_ == e_) fill();
  }
  // Characters handed to the parser so far.
  std::uint64_t offset() const { return base_ + static_cast<std::uint64_t>(p_ - buf_.data()); }
  bool cancelled() const { return cancelled_; }

  // Where the character `back` positions before the read point is (1 = the last one read).
  SourceLocation location(std::uint64_t back, const std::string& file) const {
    const std::uint64_t o = offset() >= back ? offset() - back : 0;
    if (o >= lineStart_) return SourceLocation{file, line_, static_cast<int>(o - lineStart_ + 1)};
    if (o >= prevLineStart_ && line_ > 1)
      return SourceLocation{file, line_ - 1, static_cast<int>(o - prevLineStart_ + 1)};
    return SourceLocation{file, line_ > 1 ? line_ - 1 : 1, 0};
  }

 private:
  void fill() {
    base_ += static_cast<std::uint64_t>(e_ - buf_.data());
    size_t got = cancelled_ ? 0 : in_.read(buf_.data(), buf_.size());
    p_ = buf_.data();
    e_ = p_ + got;
    // The parser then sees the end of the text; the caller knows why.
    if (!cancelled_ && !sink_.progress(in_.consumed(), in_.size())) {
      cancelled_ = true;
      e_ = p_;
    }
  }

  InputSource& in_;
  TraceStreamSink& sink_;
  std::vector<char> buf_;
  const char* p_ = nullptr;
  const char* e_ = nullptr;
  std::uint64_t base_ = 0;
  std::uint64_t lineStart_ = 0;
  std::uint64_t prevLineStart_ = 0;
  int line_ = 1;
  bool cancelled_ = false;
};

// nlohmann::json reads any input iterator; this one walks the cursor.
class CursorIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  CursorIterator() = default;
  explicit CursorIterator(Cursor* c) : c_(c) {}
  char operator*() const { return c_->peek(); }
  CursorIterator& operator++() {
    c_->advance();
    return *this;
  }
  CursorIterator operator++(int) {
    CursorIterator before = *this;
    c_->advance();
    return before;
  }
  bool operator==(const CursorIterator& o) const { return done() == o.done(); }
  bool operator!=(const CursorIterator& o) const { return done() != o.done(); }

 private:
  bool done() const { return c_ == nullptr || c_->atEnd(); }
  Cursor* c_ = nullptr;
};

// Digits (and sign) of an integer as JSON writes it.
std::uint64_t integerLength(long long v) {
  std::uint64_t n = v < 0 ? 2 : 1;
  unsigned long long u =
      v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  while (u >= 10) {
    u /= 10;
    ++n;
  }
  return n;
}
std::uint64_t unsignedLength(unsigned long long u) {
  std::uint64_t n = 1;
  while (u >= 10) {
    u /= 10;
    ++n;
  }
  return n;
}

bool markedKey(const std::string& key) {
  return key == "name" || key == "rank" || key == "device" || key == "baseTimeNanoseconds";
}

class Handler {
 public:
  Handler(Cursor& cursor, TraceStreamSink& sink, const std::string& file)
      : cursor_(cursor), sink_(sink), file_(file) {}

  // --- nlohmann's SAX interface ------------------------------------------------------------
  bool null() { return scalar(json(nullptr), 0); }
  bool boolean(bool v) { return scalar(json(v), 0); }
  bool number_integer(json::number_integer_t v) { return scalar(json(v), integerLength(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(json(v), unsignedLength(v)); }
  bool number_float(json::number_float_t v, const json::string_t& text) {
    return scalar(json(v), text.size());
  }
  bool string(json::string_t& v) {
    // The closing quote is the last character read.
    const std::uint64_t back = v.size() + 1;
    return scalar(json(std::move(v)), back, true);
  }
  bool binary(json::binary_t&) { return scalar(json(nullptr), 0); }
  bool key(json::string_t& k) {
    if (stopped()) return false;
    Frame& f = frames_.back();
    f.key = std::move(k);
    return true;
  }
  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    // `position` counts the characters the lexer read, the offending one last.
    const std::uint64_t at = position > 0 ? position - 1 : 0;
    const std::uint64_t back = cursor_.offset() > at ? cursor_.offset() - at : 1;
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 2, column 3: syntax error ..."
    auto colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    error_ = makeError("trace.json", file_ + ": not valid JSON (byte " + std::to_string(at) + "): " + detail,
                       cursor_.location(back, file_));
    return false;
  }

  // --- results -------------------------------------------------------------------------------
  const std::optional<Diagnostic>& error() const { return error_; }
  bool rootSeen() const { return rootKind_ != Root::None; }
  bool eventsSeen() const { return eventsSeen_; }

 private:
  enum class Root : std::uint8_t { None, Object, Array, Other };
  enum class Kind : std::uint8_t {
    RootObject,  // keys are top-level members
    Events,      // the traceEvents array (or a top-level array): its objects are events
    Event,       // one event's members
    Build,       // a container inside an event or a wanted member
    Skip,        // a container nobody reads
  };
  struct Frame {
    Kind kind;
    json* target = nullptr;  // Event, Build: the container being filled
    std::string key;         // objects: the key of the value that comes next
  };

  bool stopped() const { return error_.has_value() || cursor_.cancelled(); }

  void formatError(const std::string& why) {
    if (!error_)
      error_ = makeError("trace.format", file_ + ": not a Chrome trace: " + why, SourceLocation{file_, 0, 0});
  }

  // Where the value just read begins (`back` characters before the read point).
  SourceLocation valueLocation(std::uint64_t back) const { return cursor_.location(back, file_); }

  void mark(const std::string& key, std::uint64_t back, bool isString) {
    if (!markedKey(key)) return;
    // A number's lexer has also read the character after it.
    marks_.keys.emplace_back(key, valueLocation(isString ? back : back + 1));
  }

  // The event's decision so far: nullopt while ph, cat, name leave it open.
  void decide() {
    if (decision_) return;
    decision_ = sink_.want(ph_ ? &*ph_ : nullptr, cat_ ? &*cat_ : nullptr, name_ ? &*name_ : nullptr);
  }
  bool skipValue(const std::string& key) const {
    if (!decision_) return false;
    if (*decision_ == EventWant::Skip) return true;
    return *decision_ == EventWant::NoArgs && key == "args";
  }

  void insert(Frame& f, json v) {
    if (f.target->is_object())
      (*f.target)[f.key] = std::move(v);
    else
      f.target->push_back(std::move(v));
  }

  bool scalar(json v, std::uint64_t back, bool isString = false) {
    if (stopped()) return false;
    if (frames_.empty()) {
      rootKind_ = Root::Other;
      formatError("expected an object or an array of events");
      return false;
    }
    Frame& f = frames_.back();
    switch (f.kind) {
      case Kind::RootObject:
        if (f.key == "traceEvents") {
          formatError("\"traceEvents\" is not an array");
          return false;
        }
        if (sink_.wantMember(f.key)) {
          marks_ = StreamMarks{};
          mark(f.key, back, isString);
          sink_.member(f.key, std::move(v), marks_);
        }
        return true;
      case Kind::Events:
        sink_.skipped();
        return true;
      case Kind::Event: {
        if (skipValue(f.key)) return true;
        if (isString && (f.key == "ph" || f.key == "cat" || f.key == "name")) {
          const std::string& s = v.get_ref<const std::string&>();
          (f.key == "ph" ? ph_ : f.key == "cat" ? cat_ : name_) = s;
          decide();
        }
        mark(f.key, back, isString);
        insert(f, std::move(v));
        return true;
      }
      case Kind::Build:
        mark(f.key, back, isString);
        insert(f, std::move(v));
        return true;
      case Kind::Skip:
        return true;
    }
    return true;
  }

  bool open(bool object) {
    if (stopped()) return false;
    if (frames_.empty()) {
      rootKind_ = object ? Root::Object : Root::Array;
      if (object) {
        frames_.push_back(Frame{Kind::RootObject});
      } else {
        eventsSeen_ = true;
        frames_.push_back(Frame{Kind::Events});
      }
      return true;
    }
    Frame& f = frames_.back();
    switch (f.kind) {
      case Kind::RootObject:
        if (f.key == "traceEvents") {
          if (object) {
            formatError("\"traceEvents\" is not an array");
            return false;
          }
          eventsSeen_ = true;
          frames_.push_back(Frame{Kind::Events});
        } else if (sink_.wantMember(f.key)) {
          member_ = object ? json::object() : json::array();
          memberKey_ = f.key;
          marks_ = StreamMarks{};
          marks_.start = valueLocation(1);
          frames_.push_back(Frame{Kind::Build, &member_});
        } else {
          frames_.push_back(Frame{Kind::Skip});
        }
        return true;
      case Kind::Events:
        if (!object) {
          sink_.skipped();
          frames_.push_back(Frame{Kind::Skip});
          return true;
        }
        event_ = json::object();
        marks_ = StreamMarks{};
        marks_.start = valueLocation(1);
        ph_.reset();
        cat_.reset();
        name_.reset();
        decision_.reset();
        frames_.push_back(Frame{Kind::Event, &event_});
        return true;
      case Kind::Event: {
        if (skipValue(f.key)) {
          frames_.push_back(Frame{Kind::Skip});
          return true;
        }
        json& slot = (*f.target)[f.key];
        slot = object ? json::object() : json::array();
        frames_.push_back(Frame{Kind::Build, &slot});
        return true;
      }
      case Kind::Build: {
        json* slot = nullptr;
        if (f.target->is_object()) {
          slot = &(*f.target)[f.key];
        } else {
          f.target->push_back(json());
          slot = &f.target->back();
        }
        *slot = object ? json::object() : json::array();
        frames_.push_back(Frame{Kind::Build, slot});
        return true;
      }
      case Kind::Skip:
        frames_.push_back(Frame{Kind::Skip});
        return true;
    }
    return true;
  }

  bool close() {
    if (stopped()) return false;
    Kind kind = frames_.back().kind;
    frames_.pop_back();
    if (kind == Kind::Event) {
      if (decision_ && *decision_ == EventWant::Skip)
        sink_.skipped();
      else
        sink_.event(event_, marks_);
      return !stopped();
    }
    // A wanted member is complete when its own frame closes under the root object.
    if (kind == Kind::Build && frames_.size() == 1 && frames_.back().kind == Kind::RootObject) {
      sink_.member(memberKey_, std::move(member_), marks_);
      member_ = json();
    }
    return true;
  }

  Cursor& cursor_;
  TraceStreamSink& sink_;
  const std::string& file_;
  std::vector<Frame> frames_;
  Root rootKind_ = Root::None;
  bool eventsSeen_ = false;
  json event_;
  json member_;
  std::string memberKey_;
  StreamMarks marks_;
  std::optional<std::string> ph_, cat_, name_;
  std::optional<EventWant> decision_;
  std::optional<Diagnostic> error_;
};

}  // namespace

Result<StreamOutcome> streamChromeTrace(InputSource& in, const std::string& name, TraceStreamSink& sink) {
  if (in.error()) return *in.error();
  Cursor cursor(in, sink);
  Handler handler(cursor, sink, name);
  bool parsed = false;
  try {
    parsed = json::sax_parse(CursorIterator(&cursor), CursorIterator(), &handler);
  } catch (const std::exception& e) {
    if (in.error()) return *in.error();
    return makeError("trace.json", name + ": cannot read JSON: " + e.what(), SourceLocation{name, 0, 0});
  }
  // A failed read (bad or truncated gzip) explains whatever the parser made of the text.
  if (in.error()) return *in.error();
  StreamOutcome out;
  out.bytes = cursor.offset();
  if (cursor.cancelled()) {
    out.cancelled = true;
    return out;
  }
  if (handler.error()) return *handler.error();
  if (!parsed) return makeError("trace.json", name + ": not valid JSON", SourceLocation{name, 0, 0});
  if (!handler.eventsSeen())
    return makeError("trace.format", name + ": not a Chrome trace: no \"traceEvents\" array",
                     SourceLocation{name, 0, 0});
  return out;
}

}  // namespace ps::core::detail
