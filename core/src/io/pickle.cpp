// Python pickles of plain data, read into JSON values (pickle.h). The opcodes are those of
// CPython's Lib/pickletools.py; only the ones that build plain data are taken.
#include "pipestudio/core/io/pickle.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ps::core {

namespace {

using nlohmann::json;

// A value being built. Containers hold their items by node index, so a container stored in the
// memo and filled afterwards (EMPTY_DICT, BINPUT, ..., SETITEMS) is the same container when the
// memo hands it out again.
struct Node {
  enum class Kind : std::uint8_t { Scalar, List, Dict, Mark, Global };
  Kind kind = Kind::Scalar;
  int scalar = -1;                           // Scalar: its value's index; Global: its name's
  std::vector<int> items;                    // List
  std::vector<std::pair<int, int>> entries;  // Dict: key node, value node
};

// Values a pickle may stand for, counted as they are written out: every value without sharing
// takes at least one byte of opcode, so four per byte leaves room for what a pickler shares
// (strings, by memo) and none for references that multiply.
std::size_t valueBudget(std::size_t bytes) {
  return 4 * bytes + 10'000;
}
constexpr int kMaxDepth = 64;

class Reader {
 public:
  Reader(std::string_view bytes, std::string_view name) : in_(bytes), name_(name) {}

  Result<json> run() {
    while (true) {
      if (pos_ >= in_.size()) {
        bad(pos_, "the pickle ends without its STOP opcode");
        return error_;
      }
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(in_[pos_++]);
      if (op == '.') break;
      if (!step(op, at)) return error_;
    }
    if (stack_.size() != 1) {
      bad(pos_ - 1, "STOP with " + std::to_string(stack_.size()) + " values on the stack");
      return error_;
    }
    std::size_t budget = valueBudget(in_.size());
    json out;
    if (!toJson(stack_.back(), 0, budget, out)) return error_;
    return out;
  }

 private:
  // Records the error (the first one stands) and returns false.
  bool bad(std::size_t at, const std::string& what) {
    if (error_.empty())
      error_.push_back(
          makeError("pickle.invalid", std::string(name_) + ": byte " + std::to_string(at) + ": " + what));
    return false;
  }

  bool need(std::size_t n, std::size_t at) {
    if (in_.size() - pos_ >= n) return true;
    return bad(at, "the pickle ends inside an opcode's argument");
  }
  std::uint64_t little(std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }

  int push(Node n) {
    nodes_.push_back(std::move(n));
    stack_.push_back(static_cast<int>(nodes_.size() - 1));
    return stack_.back();
  }
  int pushScalar(json v) {
    scalars_.push_back(std::move(v));
    Node n;
    n.scalar = static_cast<int>(scalars_.size() - 1);
    return push(std::move(n));
  }
  bool pop(int& out, std::size_t at) {
    if (stack_.empty() || nodes_[static_cast<std::size_t>(stack_.back())].kind == Node::Kind::Mark) {
      return bad(at, "an opcode takes a value from an empty stack");
    }
    out = stack_.back();
    stack_.pop_back();
    return true;
  }
  // The values above the topmost MARK, which is removed.
  bool popToMark(std::vector<int>& out, std::size_t at) {
    std::size_t m = stack_.size();
    while (m > 0 && nodes_[static_cast<std::size_t>(stack_[m - 1])].kind != Node::Kind::Mark) --m;
    if (m == 0) {
      return bad(at, "an opcode needs a MARK and there is none");
    }
    out.assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m - 1);
    return true;
  }
  Node* top(Node::Kind kind, std::size_t at, const char* what) {
    if (stack_.empty() || nodes_[static_cast<std::size_t>(stack_.back())].kind != kind) {
      bad(at, std::string(what) + " without the container it fills");
      return nullptr;
    }
    return &nodes_[static_cast<std::size_t>(stack_.back())];
  }
  bool string(std::size_t n, std::size_t at) {
    if (!need(n, at)) return false;
    pushScalar(json(std::string(in_.substr(pos_, n))));
    pos_ += n;
    return true;
  }
  bool sized(std::size_t lenBytes, std::size_t at) {
    if (!need(lenBytes, at)) return false;
    const std::uint64_t n = little(lenBytes);
    if (n > in_.size()) return bad(at, "a string longer than the pickle");
    return string(static_cast<std::size_t>(n), at);
  }
  bool memoPut(std::uint64_t key, std::size_t at) {
    if (stack_.empty()) return bad(at, "a memo put with an empty stack");
    memo_[key] = stack_.back();
    return true;
  }
  bool memoGet(std::uint64_t key, std::size_t at) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return bad(at, "memo entry " + std::to_string(key) + " was never stored");
    stack_.push_back(it->second);
    return true;
  }
  bool tuple(std::size_t n, std::size_t at) {
    if (stack_.size() < n) return bad(at, "a tuple of more values than the stack holds");
    Node t;
    t.kind = Node::Kind::List;
    t.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    push(std::move(t));
    return true;
  }
  bool signedLong(std::size_t n, std::size_t at) {
    if (!need(n, at)) return false;
    if (n > 8) return bad(at, "an integer wider than 64 bits");
    std::uint64_t v = little(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1U) v |= ~std::uint64_t{0} << (8 * n);
    pushScalar(json(static_cast<std::int64_t>(v)));
    return true;
  }

  bool step(unsigned char op, std::size_t at) {
    switch (op) {
      case 0x80:  // PROTO
        if (!need(1, at)) return false;
        ++pos_;
        return true;
      case 0x95:  // FRAME: a length the reader does not need
        if (!need(8, at)) return false;
        pos_ += 8;
        return true;
      case '}':  // EMPTY_DICT
        push(Node{Node::Kind::Dict, -1, {}, {}});
        return true;
      case ']':   // EMPTY_LIST
      case ')':   // EMPTY_TUPLE
      case 0x8f:  // EMPTY_SET
        push(Node{Node::Kind::List, -1, {}, {}});
        return true;
      case '(':  // MARK
        push(Node{Node::Kind::Mark, -1, {}, {}});
        return true;
      case 't':     // TUPLE
      case 0x91: {  // FROZENSET
        std::vector<int> items;
        if (!popToMark(items, at)) return false;
        push(Node{Node::Kind::List, -1, std::move(items), {}});
        return true;
      }
      case 0x85:
        return tuple(1, at);  // TUPLE1
      case 0x86:
        return tuple(2, at);  // TUPLE2
      case 0x87:
        return tuple(3, at);  // TUPLE3
      case 'a': {             // APPEND
        int v = -1;
        if (!pop(v, at)) return false;
        Node* list = top(Node::Kind::List, at, "APPEND");
        if (!list) return false;
        list->items.push_back(v);
        return true;
      }
      case 'e':     // APPENDS
      case 0x90: {  // ADDITEMS
        std::vector<int> items;
        if (!popToMark(items, at)) return false;
        Node* list = top(Node::Kind::List, at, op == 'e' ? "APPENDS" : "ADDITEMS");
        if (!list) return false;
        list->items.insert(list->items.end(), items.begin(), items.end());
        return true;
      }
      case 's': {  // SETITEM
        int v = -1, k = -1;
        if (!pop(v, at) || !pop(k, at)) return false;
        Node* dict = top(Node::Kind::Dict, at, "SETITEM");
        if (!dict) return false;
        dict->entries.emplace_back(k, v);
        return true;
      }
      case 'u': {  // SETITEMS
        std::vector<int> items;
        if (!popToMark(items, at)) return false;
        if (items.size() % 2 != 0) return bad(at, "SETITEMS with a key and no value");
        Node* dict = top(Node::Kind::Dict, at, "SETITEMS");
        if (!dict) return false;
        for (std::size_t i = 0; i < items.size(); i += 2) dict->entries.emplace_back(items[i], items[i + 1]);
        return true;
      }
      // Strings and bytes by the width of their length: 1 byte, 4 bytes, 8 bytes.
      case 0x8c:  // SHORT_BINUNICODE
      case 'C':   // SHORT_BINBYTES
      case 'U':   // SHORT_BINSTRING (protocol 1)
        return sized(1, at);
      case 'X':  // BINUNICODE
      case 'B':  // BINBYTES
      case 'T':  // BINSTRING (protocol 1)
        return sized(4, at);
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
      case 0x96:  // BYTEARRAY8
        return sized(8, at);
      case 'J':
        return signedLong(4, at);  // BININT
      case 'K':                    // BININT1
        if (!need(1, at)) return false;
        pushScalar(json(static_cast<std::int64_t>(little(1))));
        return true;
      case 'M':  // BININT2
        if (!need(2, at)) return false;
        pushScalar(json(static_cast<std::int64_t>(little(2))));
        return true;
      case 0x8a:  // LONG1
        if (!need(1, at)) return false;
        return signedLong(static_cast<std::size_t>(little(1)), at);
      case 0x8b: {  // LONG4
        if (!need(4, at)) return false;
        return signedLong(static_cast<std::size_t>(little(4)), at);
      }
      case 'G': {  // BINFLOAT, big-endian
        if (!need(8, at)) return false;
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i)
          bits = (bits << 8) | static_cast<unsigned char>(in_[pos_ + static_cast<std::size_t>(i)]);
        pos_ += 8;
        double d = 0;
        std::memcpy(&d, &bits, sizeof d);
        pushScalar(std::isfinite(d) ? json(d) : json(nullptr));
        return true;
      }
      case 0x88:
        pushScalar(json(true));
        return true;  // NEWTRUE
      case 0x89:
        pushScalar(json(false));
        return true;  // NEWFALSE
      case 'N':
        pushScalar(json(nullptr));
        return true;  // NONE
      case 'q':       // BINPUT
        if (!need(1, at)) return false;
        return memoPut(little(1), at);
      case 'r':  // LONG_BINPUT
        if (!need(4, at)) return false;
        return memoPut(little(4), at);
      case 0x94:
        return memoPut(memo_.size(), at);  // MEMOIZE
      case 'h':                            // BINGET
        if (!need(1, at)) return false;
        return memoGet(little(1), at);
      case 'j':  // LONG_BINGET
        if (!need(4, at)) return false;
        return memoGet(little(4), at);
      case '0': {  // POP
        int v = -1;
        return pop(v, at);
      }
      case 'c': {  // GLOBAL module\nname\n
        const std::size_t a = in_.find('\n', pos_);
        const std::size_t b = a == std::string_view::npos ? a : in_.find('\n', a + 1);
        if (b == std::string_view::npos) return bad(at, "GLOBAL without its two lines");
        const std::string qualified =
            std::string(in_.substr(pos_, a - pos_)) + "." + std::string(in_.substr(a + 1, b - a - 1));
        pos_ = b + 1;
        return global(qualified, at);
      }
      case 0x93: {  // STACK_GLOBAL
        int n = -1, m = -1;
        if (!pop(n, at) || !pop(m, at)) return false;
        const json& name = scalarOf(n);
        const json& mod = scalarOf(m);
        if (!name.is_string() || !mod.is_string())
          return bad(at, "STACK_GLOBAL of values that are not names");
        return global(mod.get<std::string>() + "." + name.get<std::string>(), at);
      }
      case 'R': {  // REDUCE: only torch.jit._pickle's list builders, which return their argument
        int args = -1, callable = -1;
        if (!pop(args, at) || !pop(callable, at)) return false;
        const Node& a = nodes_[static_cast<std::size_t>(args)];
        if (nodes_[static_cast<std::size_t>(callable)].kind != Node::Kind::Global ||
            a.kind != Node::Kind::List || a.items.size() != 1)
          return bad(at, "REDUCE of something other than a torch.jit._pickle list builder");
        stack_.push_back(a.items.front());
        return true;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return bad(at, std::string("opcode ") + hex +
                           " is not one of plain data (an object, a tensor or text-protocol pickle); "
                           "PipeStudio reads dicts, lists, strings and numbers only");
      }
    }
  }

  bool global(const std::string& qualified, std::size_t at) {
    static constexpr std::string_view kBuilders[] = {
        "torch.jit._pickle.build_intlist", "torch.jit._pickle.build_doublelist",
        "torch.jit._pickle.build_boollist", "torch.jit._pickle.build_genericlist"};
    for (std::string_view b : kBuilders)
      if (qualified == b) {
        pushScalar(json(qualified));
        nodes_.back().kind = Node::Kind::Global;
        return true;
      }
    return bad(at, "the pickle names " + qualified.substr(0, 120) + ", which PipeStudio does not run");
  }

  bool toJson(int index, int depth, std::size_t& budget, json& out) {
    if (depth > kMaxDepth) return bad(pos_, "values nested deeper than " + std::to_string(kMaxDepth));
    if (budget == 0)
      return bad(pos_, "the pickle stands for more than " + std::to_string(valueBudget(in_.size())) +
                           " values (shared references that multiply)");
    --budget;
    const Node& n = nodes_[static_cast<std::size_t>(index)];
    switch (n.kind) {
      case Node::Kind::Scalar:
        out = scalars_[static_cast<std::size_t>(n.scalar)];
        return true;
      case Node::Kind::List:
        out = json::array();
        for (int item : n.items) {
          json v;
          if (!toJson(item, depth + 1, budget, v)) return false;
          out.push_back(std::move(v));
        }
        return true;
      case Node::Kind::Dict:
        out = json::object();
        for (const auto& e : n.entries) {
          json k, v;
          if (!toJson(e.first, depth + 1, budget, k) || !toJson(e.second, depth + 1, budget, v)) return false;
          out[k.is_string() ? k.get<std::string>() : k.dump(-1, ' ', false, json::error_handler_t::replace)] =
              std::move(v);
        }
        return true;
      case Node::Kind::Mark:
      case Node::Kind::Global:
        break;
    }
    return bad(pos_, "a MARK or a global left where a value belongs");
  }

  std::string_view in_;
  std::string_view name_;
  std::size_t pos_ = 0;
  // A scalar node's value (a name for a global); none for a container or a MARK.
  const json& scalarOf(int node) const {
    static const json none;
    const Node& n = nodes_[static_cast<std::size_t>(node)];
    return n.scalar >= 0 ? scalars_[static_cast<std::size_t>(n.scalar)] : none;
  }

  std::deque<Node> nodes_;
  std::vector<json> scalars_;
  std::vector<int> stack_;
  std::unordered_map<std::uint64_t, int> memo_;
  Diagnostics error_;
};

}  // namespace

Result<nlohmann::json> readPickle(std::string_view bytes, std::string_view name) {
  return Reader(bytes, name).run();
}

}  // namespace ps::core
