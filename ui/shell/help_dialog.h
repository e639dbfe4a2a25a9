#pragma once
// Help › Documentation: the designer's guide (docs/gui.md) shown in the program, from the docs
// folder found beside it, else from the copy built into it; the dialog says which, and where
// the files are. Opening them in a browser is offered, and a failure to do so is said, never
// silent.
#include <QDialog>
#include <QString>

class QLabel;
class QTextBrowser;

namespace ps::ui {

class DocumentationDialog : public QDialog {
  Q_OBJECT
 public:
  // `docsDir`: the folder with gui.md ("" when none was found: the built-in copy is shown).
  explicit DocumentationDialog(const QString& docsDir, QWidget* parent = nullptr);
  QTextBrowser* browser() const { return browser_; }
  QString whereText() const;
  bool showsBuiltInCopy() const { return builtIn_; }
  // Opens gui.md with the desktop's handler; false (and says so in the dialog) without one.
  bool openExternally();

 private:
  QString docsDir_;
  bool builtIn_ = false;
  QTextBrowser* browser_ = nullptr;
  QLabel* where_ = nullptr;
};

}  // namespace ps::ui
