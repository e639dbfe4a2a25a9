// A validating JSON reader made for Chrome traces of gigabytes: it walks the decompressed text
// a chunk at a time, hands the handler only what it wants (an event's members until the event is
// known to be unwanted, the top-level members it reads), and validates everything else without
// building it: no allocation for a skipped string, number or container. The grammar is RFC
// 8259's, as strict as nlohmann::json's parser (which reads each event's value types the same).
#include "io/json_stream.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
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

// The decompressed text, a chunk at a time, and the line the reader is on.
class Cursor {
 public:
  Cursor(InputSource& in, TraceStreamSink& sink) : in_(in), sink_(sink), buf_(kChunk) {
    p = e = buf_.data();
    fill();
  }

  // The window the reader walks: [p, e).
  const char* p;
  const char* e;

  // Refills an exhausted window; false at the end of the text (or when cancelled).
  bool fill() {
    base_ += static_cast<std::uint64_t>(e - buf_.data());
    size_t got = cancelled_ ? 0 : in_.read(buf_.data(), buf_.size());
    p = buf_.data();
    e = p + got;
    if (!cancelled_ && !sink_.progress(in_.consumed(), in_.size())) {
      cancelled_ = true;
      e = p;
    }
    return p != e;
  }
  bool more() { return p != e || fill(); }

  std::uint64_t offset(const char* at) const { return base_ + static_cast<std::uint64_t>(at - buf_.data()); }
  std::uint64_t offset() const { return offset(p); }
  void newline(const char* at) {
    ++line_;
    lineStart_ = offset(at) + 1;
  }
  // Line and column of a character of the current line at byte offset `o`.
  SourceLocation location(std::uint64_t o, const std::string& file) const {
    return SourceLocation{file, line_, o >= lineStart_ ? static_cast<int>(o - lineStart_ + 1) : 0};
  }
  bool cancelled() const { return cancelled_; }

 private:
  InputSource& in_;
  TraceStreamSink& sink_;
  std::vector<char> buf_;
  std::uint64_t base_ = 0;
  std::uint64_t lineStart_ = 0;
  int line_ = 1;
  bool cancelled_ = false;
};

bool markedKey(std::string_view key) {
  return key == "name" || key == "rank" || key == "device" || key == "baseTimeNanoseconds";
}

// What the reader hands values to: the frames of the trace's structure (top-level object, the
// events array, one event, containers being built, containers nobody reads).
class Handler {
 public:
  Handler(TraceStreamSink& sink, const std::string& file) : sink_(sink), file_(file) {}

  // Whether the value that comes next (its first character) is read; when not, the reader
  // validates it silently.
  bool wants(char first) {
    if (frames_.empty()) return true;
    Frame& f = frames_.back();
    switch (f.kind) {
      case Kind::RootObject:
        return f.key == "traceEvents" || sink_.wantMember(f.key);
      case Kind::Events:
        if (first == '{') return true;
        sink_.skipped();  // not an event object
        return false;
      case Kind::Event:
        return !skipValue(f.key);
      case Kind::Build:
        return true;
    }
    return true;
  }

  bool key(std::string_view k) {
    frames_.back().key.assign(k.data(), k.size());
    return true;
  }

  bool scalar(json v, const SourceLocation& at, bool isString) {
    if (frames_.empty()) return formatError("expected an object or an array of events");
    Frame& f = frames_.back();
    switch (f.kind) {
      case Kind::RootObject:
        if (f.key == "traceEvents") return formatError("\"traceEvents\" is not an array");
        marks_ = StreamMarks{};
        mark(f.key, at);
        sink_.member(f.key, std::move(v), marks_);
        return true;
      case Kind::Events:
        return true;
      case Kind::Event:
        if (isString && (f.key == "ph" || f.key == "cat" || f.key == "name")) {
          const std::string& s = v.get_ref<const std::string&>();
          (f.key == "ph" ? ph_ : f.key == "cat" ? cat_ : name_) = s;
          decide();
        }
        mark(f.key, at);
        insert(f, std::move(v));
        return true;
      case Kind::Build:
        mark(f.key, at);
        insert(f, std::move(v));
        return true;
    }
    return true;
  }

  bool open(bool object, const SourceLocation& at) {
    if (frames_.empty()) {
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
          if (object) return formatError("\"traceEvents\" is not an array");
          eventsSeen_ = true;
          frames_.push_back(Frame{Kind::Events});
        } else {
          member_ = object ? json::object() : json::array();
          memberKey_ = f.key;
          marks_ = StreamMarks{};
          marks_.start = at;
          frames_.push_back(Frame{Kind::Build, &member_});
        }
        return true;
      case Kind::Events:
        event_ = json::object();
        marks_ = StreamMarks{};
        marks_.start = at;
        ph_.reset();
        cat_.reset();
        name_.reset();
        decision_.reset();
        frames_.push_back(Frame{Kind::Event, &event_});
        return true;
      case Kind::Event:
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
    }
    return true;
  }

  void close() {
    Kind kind = frames_.back().kind;
    frames_.pop_back();
    if (kind == Kind::Event) {
      if (decision_ && *decision_ == EventWant::Skip)
        sink_.skipped();
      else
        sink_.event(event_, marks_);
      return;
    }
    // A wanted member is complete when its own frame closes under the root object.
    if (kind == Kind::Build && frames_.size() == 1 && frames_.back().kind == Kind::RootObject) {
      sink_.member(memberKey_, std::move(member_), marks_);
      member_ = json();
    }
  }

  const std::optional<Diagnostic>& error() const { return error_; }
  bool eventsSeen() const { return eventsSeen_; }

 private:
  enum class Kind : std::uint8_t {
    RootObject,  // keys are top-level members
    Events,      // the traceEvents array (or a top-level array): its objects are events
    Event,       // one event's members
    Build,       // a container inside an event or a wanted member
  };
  struct Frame {
    Kind kind;
    json* target = nullptr;  // Event, Build: the container being filled
    std::string key;         // objects: the key of the value that comes next
  };

  bool formatError(const std::string& why) {
    if (!error_)
      error_ = makeError("trace.format", file_ + ": not a Chrome trace: " + why, SourceLocation{file_, 0, 0});
    return false;
  }

  void mark(const std::string& key, const SourceLocation& at) {
    if (markedKey(key)) marks_.keys.emplace_back(key, at);
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

  static void insert(Frame& f, json v) {
    if (f.target->is_object())
      (*f.target)[f.key] = std::move(v);
    else
      f.target->push_back(std::move(v));
  }

  TraceStreamSink& sink_;
  const std::string& file_;
  std::vector<Frame> frames_;
  bool eventsSeen_ = false;
  json event_;
  json member_;
  std::string memberKey_;
  StreamMarks marks_;
  std::optional<std::string> ph_, cat_, name_;
  std::optional<EventWant> decision_;
  std::optional<Diagnostic> error_;
};

// The reader: RFC 8259 over the cursor, values to the handler unless it does not want them.
class Reader {
 public:
  Reader(Cursor& c, Handler& h, const std::string& file) : c_(c), h_(h), file_(file) {}

  bool run() {
    if (!value()) return false;
    while (!stack_.empty()) {
      if (!ws()) return fail("unexpected end of input", c_.offset());
      const char ch = *c_.p;
      Level& top = stack_.back();
      const char closer = top.object ? '}' : ']';
      const bool object = top.object;
      if (!top.fresh && !top.needMore) {
        // After a member or element: ',' or the end of the container.
        if (ch == ',') {
          ++c_.p;
          top.needMore = true;
          continue;
        }
        if (ch != closer)
          return fail(std::string("unexpected '") + printable(ch) + "'; expected ',' or '" + closer + "'",
                      c_.offset());
      }
      if (ch == closer && !top.needMore) {
        ++c_.p;
        const bool quiet = top.quiet;
        stack_.pop_back();
        if (!quiet) h_.close();
        continue;
      }
      // A member or element follows (the flags are set first: reading it may open a level).
      top.fresh = false;
      top.needMore = false;
      if (object ? !member() : !value()) return false;
    }
    if (ws())
      return fail(std::string("unexpected '") + printable(*c_.p) + "' after the end of the document",
                  c_.offset());
    return true;
  }

  const std::optional<Diagnostic>& error() const { return error_; }

 private:
  struct Level {
    bool object;
    bool quiet;             // a value nobody reads: validated, not handed over
    bool fresh = true;      // nothing read since the opening bracket
    bool needMore = false;  // after a ',': a member or element must follow
  };

  static std::string printable(char ch) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(ch));
      return buf;
    }
    return std::string(1, ch);
  }

  bool fail(const std::string& what, std::uint64_t at) {
    if (!error_)
      error_ = makeError("trace.json",
                         file_ + ": not valid JSON (byte " + std::to_string(at) + "): syntax error: " + what,
                         c_.location(at, file_));
    return false;
  }

  bool quiet() const { return !stack_.empty() && stack_.back().quiet; }

  // Skips whitespace; false at the end of the text.
  bool ws() {
    for (;;) {
      while (c_.p != c_.e) {
        const char ch = *c_.p;
        if (ch == ' ' || ch == '\t' || ch == '\r') {
          ++c_.p;
        } else if (ch == '\n') {
          c_.newline(c_.p);
          ++c_.p;
        } else {
          return true;
        }
      }
      if (!c_.fill()) return false;
    }
  }

  bool member() {
    if (!ws()) return fail("unexpected end of input", c_.offset());
    if (*c_.p != '"')
      return fail(std::string("unexpected '") + printable(*c_.p) + "'; expected a string (an object key)",
                  c_.offset());
    std::string_view k;
    if (!string(!quiet(), k)) return false;
    if (!quiet()) h_.key(k);
    if (!ws()) return fail("unexpected end of input", c_.offset());
    if (*c_.p != ':')
      return fail(std::string("unexpected '") + printable(*c_.p) + "'; expected ':'", c_.offset());
    ++c_.p;
    return value();
  }

  bool value() {
    if (!ws()) return fail("unexpected end of input", c_.offset());
    const char ch = *c_.p;
    const std::uint64_t at = c_.offset();
    const bool read = !quiet() && h_.wants(ch);
    const SourceLocation where = read ? c_.location(at, file_) : SourceLocation{};
    switch (ch) {
      case '{':
      case '[': {
        ++c_.p;
        if (read && !h_.open(ch == '{', where)) return false;
        stack_.push_back(Level{ch == '{', !read});
        return true;
      }
      case '"': {
        std::string_view s;
        if (!string(read, s)) return false;
        if (read) {
          // Marks point at the first character inside the quotes, where an editor's search lands.
          SourceLocation inside = where;
          if (inside.column > 0) ++inside.column;
          return h_.scalar(json(std::string(s)), inside, true);
        }
        return true;
      }
      case 't':
        return literal("true", json(true), read, where);
      case 'f':
        return literal("false", json(false), read, where);
      case 'n':
        return literal("null", json(nullptr), read, where);
      default:
        if (ch == '-' || (ch >= '0' && ch <= '9')) return number(read, where);
        return fail(std::string("unexpected '") + printable(ch) + "'; expected a value", at);
    }
  }

  bool literal(std::string_view word, json v, bool read, const SourceLocation& where) {
    const std::uint64_t at = c_.offset();
    for (char w : word) {
      if (!c_.more()) return fail("unexpected end of input", c_.offset());
      if (*c_.p != w) return fail("invalid literal; expected '" + std::string(word) + "'", at);
      ++c_.p;
    }
    if (read) return h_.scalar(std::move(v), where, false);
    return true;
  }

  bool number(bool read, const SourceLocation& where) {
    const std::uint64_t at = c_.offset();
    scratch_.clear();
    for (bool more = true; more;) {
      while (c_.p != c_.e) {
        const char ch = *c_.p;
        if (!((ch >= '0' && ch <= '9') || ch == '-' || ch == '+' || ch == '.' || ch == 'e' || ch == 'E'))
          break;
        if (scratch_.size() > 4096) return fail("number too long", at);
        scratch_.push_back(ch);
        ++c_.p;
      }
      more = c_.p == c_.e && c_.fill();
    }
    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    const std::string& s = scratch_;
    size_t i = 0;
    if (i < s.size() && s[i] == '-') ++i;
    auto digits = [&] {
      size_t from = i;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
      return i - from;
    };
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return fail("invalid number '" + s + "'", at);
    if (s[i] == '0') {
      ++i;
    } else {
      digits();
    }
    bool integral = true;
    if (i < s.size() && s[i] == '.') {
      ++i;
      integral = false;
      if (digits() == 0) return fail("invalid number '" + s + "'", at);
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      integral = false;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      if (digits() == 0) return fail("invalid number '" + s + "'", at);
    }
    if (i != s.size()) return fail("invalid number '" + s + "'", at);
    // A value nobody reads is only checked for overflow, and only when it may (above 1e308).
    if (!read && decimalMagnitude(s) <= 308) return true;
    const char* b = s.data();
    const char* end = s.data() + s.size();
    if (integral && read) {
      if (s[0] == '-') {
        std::int64_t v = 0;
        if (std::from_chars(b, end, v).ec == std::errc()) return h_.scalar(json(v), where, false);
      } else {
        std::uint64_t v = 0;
        if (std::from_chars(b, end, v).ec == std::errc()) return h_.scalar(json(v), where, false);
      }
      // Beyond 64 bits: a double, as nlohmann::json reads it.
    }
    double d = 0;
    auto r = std::from_chars(b, end, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow is an error (as nlohmann's); an underflow reads as 0.
      if (decimalMagnitude(s) > 0) return fail("number overflow: '" + s + "'", at);
      d = 0;
    } else if (r.ec != std::errc()) {
      return fail("invalid number '" + s + "'", at);
    }
    if (!read) return true;
    return h_.scalar(json(d), where, false);
  }

  // Where a valid JSON number's first significant digit is: its power of ten plus one (1 for
  // "5", 3 for "123.4", -1 for "0.005", 0 for zero), saturated. Only its sign is used: a number
  // out of a double's range overflowed when positive, underflowed when not.
  static std::int64_t decimalMagnitude(const std::string& s) {
    size_t i = s[0] == '-' ? 1 : 0;
    std::int64_t mag = 0;
    bool significant = false;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (s[i] != '0') significant = true;
      if (significant) ++mag;
    }
    if (i < s.size() && s[i] == '.') {
      for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
        if (significant) continue;
        if (s[i] != '0')
          significant = true;
        else
          --mag;
      }
    }
    if (!significant) return 0;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      const bool negative = i < s.size() && s[i] == '-';
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      std::int64_t e = 0;
      for (; i < s.size(); ++i) e = std::min<std::int64_t>(e * 10 + (s[i] - '0'), std::int64_t{1} << 40);
      mag += negative ? -e : e;
    }
    return mag;
  }

  // A string at the cursor (its opening quote). With `keep`, `out` is its decoded text (valid
  // until the next read); else it is only validated.
  bool string(bool keep, std::string_view& out) {
    ++c_.p;
    bool copied = false;  // out lives in scratch_ (an escape, or a chunk boundary)
    const char* start = c_.p;
    scratch_.clear();
    for (;;) {
      // The common run: plain ASCII up to the closing quote.
      const char* q = c_.p;
      while (q != c_.e) {
        const unsigned char u = static_cast<unsigned char>(*q);
        if (u == '"' || u == '\\' || u < 0x20 || u >= 0x80) break;
        ++q;
      }
      if (q == c_.e) {
        if (keep) scratch_.append(copied ? c_.p : start, q);
        copied = true;
        c_.p = q;
        if (!c_.fill()) return fail("unexpected end of input in a string", c_.offset());
        start = c_.p;
        continue;
      }
      const unsigned char u = static_cast<unsigned char>(*q);
      if (u == '"') {
        if (keep) {
          if (copied) {
            scratch_.append(c_.p, q);
            out = scratch_;
          } else {
            out = std::string_view(start, static_cast<size_t>(q - start));
          }
        }
        c_.p = q + 1;
        return true;
      }
      // Anything else leaves the fast path: copy what came before.
      if (keep) scratch_.append(copied ? c_.p : start, q);
      copied = true;
      c_.p = q;
      if (u < 0x20)
        return fail("control character " + printable(static_cast<char>(u)) + " in a string", c_.offset());
      if (u == '\\') {
        if (!escape(keep)) return false;
      } else if (!utf8(keep)) {
        return false;
      }
      start = c_.p;
    }
  }

  // One byte of the text (refilling as needed); false at the end.
  bool take(char& ch) {
    if (!c_.more()) return false;
    ch = *c_.p++;
    return true;
  }

  static void appendUtf8(std::string& s, std::uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool hex4(std::uint32_t& v) {
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char ch = 0;
      const std::uint64_t at = c_.offset();
      if (!take(ch)) return fail("unexpected end of input in a \\u escape", c_.offset());
      int d = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (d < 0) return fail("invalid \\u escape", at);
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  }

  // A backslash escape at the cursor.
  bool escape(bool keep) {
    const std::uint64_t at = c_.offset();
    ++c_.p;
    char ch = 0;
    if (!take(ch)) return fail("unexpected end of input in a string", c_.offset());
    char plain = 0;
    switch (ch) {
      case '"':
      case '\\':
      case '/':
        plain = ch;
        break;
      case 'b':
        plain = '\b';
        break;
      case 'f':
        plain = '\f';
        break;
      case 'n':
        plain = '\n';
        break;
      case 'r':
        plain = '\r';
        break;
      case 't':
        plain = '\t';
        break;
      case 'u': {
        std::uint32_t cp = 0;
        if (!hex4(cp)) return false;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("a low surrogate without its high one", at);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          char a = 0, b = 0;
          if (!take(a) || !take(b) || a != '\\' || b != 'u')
            return fail("a high surrogate without its low one", at);
          std::uint32_t lo = 0;
          if (!hex4(lo)) return false;
          if (lo < 0xDC00 || lo > 0xDFFF) return fail("a high surrogate without its low one", at);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (keep) appendUtf8(scratch_, cp);
        return true;
      }
      default:
        return fail(std::string("invalid escape '\\") + printable(ch) + "'", at);
    }
    if (keep) scratch_.push_back(plain);
    return true;
  }

  // A multi-byte UTF-8 sequence at the cursor (RFC 3629: no overlongs, no surrogates).
  bool utf8(bool keep) {
    const std::uint64_t at = c_.offset();
    const unsigned char lead = static_cast<unsigned char>(*c_.p);
    int n = lead >= 0xF0 && lead <= 0xF4 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC2 && lead <= 0xDF ? 1 : -1;
    if (lead >= 0xF5 || n < 0) return fail("invalid UTF-8 byte " + printable(static_cast<char>(lead)), at);
    char seq[4];
    seq[0] = *c_.p++;
    for (int k = 1; k <= n; ++k) {
      if (!take(seq[k])) return fail("unexpected end of input in a string", c_.offset());
      const unsigned char u = static_cast<unsigned char>(seq[k]);
      if ((u & 0xC0) != 0x80) return fail("invalid UTF-8 sequence", at);
    }
    const unsigned char second = static_cast<unsigned char>(seq[1]);
    if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
        (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F))
      return fail("invalid UTF-8 sequence", at);
    if (keep) scratch_.append(seq, static_cast<size_t>(n) + 1);
    return true;
  }

  Cursor& c_;
  Handler& h_;
  const std::string& file_;
  std::vector<Level> stack_;
  std::string scratch_;
  std::optional<Diagnostic> error_;
};

}  // namespace

Result<StreamOutcome> streamChromeTrace(InputSource& in, const std::string& name, TraceStreamSink& sink) {
  if (in.error()) return *in.error();
  Cursor cursor(in, sink);
  Handler handler(sink, name);
  Reader reader(cursor, handler, name);
  bool parsed = false;
  try {
    parsed = reader.run();
  } catch (const std::exception& e) {
    if (in.error()) return *in.error();
    return makeError("trace.json", name + ": cannot read JSON: " + e.what(), SourceLocation{name, 0, 0});
  }
  // A failed read (bad or truncated gzip) explains whatever the reader made of the text.
  if (in.error()) return *in.error();
  StreamOutcome out;
  out.bytes = cursor.offset();
  if (cursor.cancelled()) {
    out.cancelled = true;
    return out;
  }
  if (handler.error()) return *handler.error();
  if (reader.error()) return *reader.error();
  if (!parsed) return makeError("trace.json", name + ": not valid JSON", SourceLocation{name, 0, 0});
  if (!handler.eventsSeen())
    return makeError("trace.format", name + ": not a Chrome trace: no \"traceEvents\" array",
                     SourceLocation{name, 0, 0});
  return out;
}

}  // namespace ps::core::detail
