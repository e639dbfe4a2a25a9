#include "document/measured_overlay.h"

#include "document/schedule_document.h"

namespace ps::ui {

using namespace ps::core;

MeasuredOverlay::MeasuredOverlay(ScheduleDocument* doc, QObject* parent) : QObject(parent), doc_(doc) {
  Q_ASSERT(doc);
  connect(doc_, &ScheduleDocument::changed, this, [this] {
    if (measured_) recompare(Change::Recompared);
  });
}

void MeasuredOverlay::set(const Timeline& measured, ComparisonOptions options, QString what) {
  measured_ = measured;
  options_ = options;
  what_ = std::move(what);
  recompare(Change::Replaced);
}

void MeasuredOverlay::setAlignment(Alignment a) {
  options_.alignment = a;
  if (measured_) recompare(Change::Replaced);
}

void MeasuredOverlay::clear() {
  if (!measured_) return;
  measured_.reset();
  comparison_.reset();
  what_.clear();
  Q_EMIT changed(Change::Replaced);
}

void MeasuredOverlay::recompare(Change change) {
  const Analysis& a = doc_->analysis();
  comparison_ = compareTimelines(a.schedule, a.timeline, *measured_, options_);
  Q_EMIT changed(change);
}

}  // namespace ps::ui
