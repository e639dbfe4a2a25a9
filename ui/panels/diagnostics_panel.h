#pragma once
// Diagnostics dock: validation and simulation findings; clicking one selects its op. With a
// step-through playhead, findings about ops at the playhead are bold and later ones grey; a
// failed or hung run's own diagnostics (the failure) head the list.
#include <QSet>
#include <QTreeWidget>
#include <functional>
#include <optional>
#include <utility>

#include "pipestudio/core/model/result.h"

namespace ps::ui {

class DiagnosticsPanel : public QTreeWidget {
  Q_OBJECT
 public:
  // How an item relates to the playhead (stored under kPlayheadRole).
  enum class PlayheadMark { None = 0, Current = 1, Later = 2 };
  static constexpr int kPlayheadRole = Qt::UserRole + 3;
  static constexpr int kRunRole = Qt::UserRole + 4;       // true for the run's own diagnostics
  static constexpr int kFullTextRole = Qt::UserRole + 5;  // the finding before wrapping

  explicit DiagnosticsPanel(QWidget* parent = nullptr);
  void setDiagnostics(const ps::core::Diagnostics& ds);
  int errorCount() const { return errors_; }

  // The diagnostics of the run being stepped (e.g. where a failed run stopped), listed first
  // under `title`; empty clears them.
  void setRunDiagnostics(const ps::core::Diagnostics& ds, const QString& title);
  // `spanOf` gives an op's [start, end] in the stepped timeline (nullopt: not in it).
  using SpanOf = std::function<std::optional<std::pair<double, double>>(ps::core::OpRef)>;
  void setPlayhead(std::optional<double> time, SpanOf spanOf);
  PlayheadMark markOf(int row) const;
  // A row's whole text (what it shows is wrapped at the dock's width).
  QString fullText(int row) const;

 protected:
  void resizeEvent(QResizeEvent* e) override;

 Q_SIGNALS:
  void opActivated(ps::core::OpRef ref);

 private:
  void rebuild();
  void addItems(const ps::core::Diagnostics& ds, bool run);
  void applyPlayhead();
  int textWidth() const;
  void rewrap();
  int wrappedAt_ = -1;
  int errors_ = 0;
  ps::core::Diagnostics doc_;
  ps::core::Diagnostics run_;
  QString runTitle_;
  QSet<QString> shownMessages_;  // each finding once (rebuild)
  std::optional<double> playhead_;
  SpanOf spanOf_;
};

}  // namespace ps::ui
