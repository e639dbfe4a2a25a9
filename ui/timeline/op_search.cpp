#include "timeline/op_search.h"

#include <QRegularExpression>
#include <QStringList>
#include <algorithm>
#include <limits>
#include <tuple>

namespace ps::ui {

using namespace ps::core;

namespace {

std::optional<OpKind> kindNamed(const QString& name, const Schedule& s) {
  if (auto k = s.kindFromName(name.toStdString())) return k;
  return s.kindFromName(name.toUpper().toStdString());  // "f3", "send_f2", "offload"
}

bool matches(const OpQuery::Term& t, const Op& op, int device) {
  return (!t.kind || *t.kind == op.kind) && (!t.microbatch || *t.microbatch == op.microbatch) &&
         (!t.stage || *t.stage == op.stage) && (!t.device || *t.device == device);
}

}  // namespace

OpQuery parseOpQuery(const QString& text, const Schedule& s) {
  OpQuery q;
  // "device 1", "stage 2", "mb 3": the number belongs to the word before it.
  QStringList words = text.simplified().split(QLatin1Char(' '), Qt::SkipEmptyParts);
  for (int i = 0; i + 1 < words.size(); ++i) {
    static const QRegularExpression prefix(QStringLiteral("^(device|dev|d|stage|s|mb|m|microbatch)$"),
                                           QRegularExpression::CaseInsensitiveOption);
    bool number = false;
    words[i + 1].toInt(&number);
    if (number && prefix.match(words[i]).hasMatch()) {
      words[i] += words[i + 1];
      words.removeAt(i + 1);
    }
  }
  static const QRegularExpression device(QStringLiteral("^(?:device|dev|d)(\\d+)$"),
                                         QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression stage(QStringLiteral("^(?:@s|s|stage)(\\d+)$"),
                                        QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression mb(QStringLiteral("^(?:mb|m|microbatch)(\\d+)$"),
                                     QRegularExpression::CaseInsensitiveOption);
  // An op name: kind letters, then an optional micro-batch, then an optional @sN.
  static const QRegularExpression name(QStringLiteral("^([A-Za-z_]+?)(\\d+)?(?:@s(\\d+))?$"),
                                       QRegularExpression::CaseInsensitiveOption);
  for (const QString& w : words) {
    OpQuery::Term t;
    if (auto m = device.match(w); m.hasMatch()) {
      t.device = m.captured(1).toInt();
    } else if (auto m2 = stage.match(w); m2.hasMatch()) {
      t.stage = m2.captured(1).toInt();
    } else if (auto m3 = mb.match(w); m3.hasMatch()) {
      t.microbatch = m3.captured(1).toInt();
    } else if (auto m4 = name.match(w); m4.hasMatch() && kindNamed(m4.captured(1), s)) {
      t.kind = kindNamed(m4.captured(1), s);
      if (!m4.captured(2).isEmpty()) t.microbatch = m4.captured(2).toInt();
      if (!m4.captured(3).isEmpty()) t.stage = m4.captured(3).toInt();
    } else {
      q.valid = false;
      q.problem = w;
      continue;
    }
    q.terms.push_back(t);
  }
  return q;
}

std::vector<OpRef> findOps(const Schedule& s, const Timeline& timeline, const OpQuery& query) {
  std::vector<OpRef> out;
  if (!query.valid || query.terms.empty()) return out;
  for (int d = 0; d < static_cast<int>(s.devices.size()); ++d) {
    const auto& row = s.devices[static_cast<size_t>(d)];
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      const Step& st = row[static_cast<size_t>(i)];
      auto all = [&](const Op& op) {
        return std::all_of(query.terms.begin(), query.terms.end(),
                           [&](const OpQuery::Term& t) { return matches(t, op, d); });
      };
      if (all(st.first) || (st.second && all(*st.second))) out.push_back(OpRef{d, i});
    }
  }
  // Time order: the start of each (device, step) in the timeline; what it lacks goes last.
  auto start = [&](const OpRef& r) {
    auto lo = std::lower_bound(timeline.ops.begin(), timeline.ops.end(), r.device,
                               [](const TimelineOp& o, int dev) { return o.device < dev; });
    for (auto it = lo; it != timeline.ops.end() && it->device == r.device; ++it)
      if (it->step == r.step) return it->start;
    return std::numeric_limits<double>::infinity();
  };
  std::vector<std::pair<double, OpRef>> keyed;
  keyed.reserve(out.size());
  for (const OpRef& r : out) keyed.emplace_back(start(r), r);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second.device, a.second.step) <
           std::tie(b.first, b.second.device, b.second.step);
  });
  for (size_t i = 0; i < keyed.size(); ++i) out[i] = keyed[i].second;
  return out;
}

}  // namespace ps::ui
