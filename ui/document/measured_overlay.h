#pragma once
// The measured overlay's model (docs/gui.md, "Measured overlay"): a measured or imported
// timeline, what it is ("run 3", "rank0_trace.json"), and its comparison with the document's
// current plan, recomputed whenever the document changes. The shell owns one; the timeline,
// the stepper, the Op and Deviation docks read it and follow changed().
#include <QObject>
#include <QPointer>
#include <QString>
#include <optional>

#include "pipestudio/core/analysis/comparison.h"

namespace ps::ui {

class ScheduleDocument;

class MeasuredOverlay : public QObject {
  Q_OBJECT
 public:
  // Why changed() was emitted: another timeline, alignment or none (views fit it anew), or
  // the same one compared with an edited plan (views keep their zoom).
  enum class Change { Replaced, Recompared };
  Q_ENUM(Change)

  // Construct before any view of `doc`: the comparison is recomputed on the document's
  // changed() ahead of the views' own rebuilds, which then read the new figures.
  explicit MeasuredOverlay(ScheduleDocument* doc, QObject* parent = nullptr);

  void set(const ps::core::Timeline& measured, ps::core::ComparisonOptions options = {}, QString what = {});
  void setAlignment(ps::core::Alignment a);
  void clear();

  bool active() const { return measured_.has_value(); }
  const ps::core::Timeline* timeline() const { return measured_ ? &*measured_ : nullptr; }
  const ps::core::Comparison* comparison() const { return comparison_ ? &*comparison_ : nullptr; }
  ps::core::Alignment alignment() const { return options_.alignment; }
  // What is measured, as the window names it (empty without an overlay).
  const QString& what() const { return what_; }
  ScheduleDocument* document() const { return doc_; }

 Q_SIGNALS:
  // Set, cleared, realigned or recompared: timeline() and comparison() hold the new state.
  void changed(ps::ui::MeasuredOverlay::Change change);

 private:
  void recompare(Change change);

  QPointer<ScheduleDocument> doc_;
  std::optional<ps::core::Timeline> measured_;
  ps::core::ComparisonOptions options_;
  std::optional<ps::core::Comparison> comparison_;
  QString what_;
};

}  // namespace ps::ui
