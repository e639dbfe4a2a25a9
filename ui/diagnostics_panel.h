#pragma once
// Diagnostics dock: validation and simulation findings; clicking one selects its op.
#include <QTreeWidget>

#include "pipestudio/core/result.h"

namespace ps::ui {

class DiagnosticsPanel : public QTreeWidget {
  Q_OBJECT
 public:
  explicit DiagnosticsPanel(QWidget* parent = nullptr);
  void setDiagnostics(const ps::core::Diagnostics& ds);
  int errorCount() const { return errors_; }

 Q_SIGNALS:
  void opActivated(ps::core::OpRef ref);

 private:
  int errors_ = 0;
};

}  // namespace ps::ui
