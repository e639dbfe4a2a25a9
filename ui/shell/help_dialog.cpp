#include "shell/help_dialog.h"

#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

// The built-in copy lives in the ps_ui static library: register it before the first use.
static void initDocumentationResource() {
  Q_INIT_RESOURCE(pipestudio_docs);
}

namespace ps::ui {

DocumentationDialog::DocumentationDialog(const QString& docsDir, QWidget* parent)
    : QDialog(parent), docsDir_(docsDir) {
  initDocumentationResource();
  setWindowTitle(tr("PipeStudio Documentation"));
  auto* lay = new QVBoxLayout(this);
  where_ = new QLabel;
  where_->setWordWrap(true);
  where_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  browser_ = new QTextBrowser;
  browser_->setOpenExternalLinks(true);  // web links go to the browser; .md links open here
  builtIn_ = docsDir.isEmpty() || !QFileInfo(docsDir + QStringLiteral("/gui.md")).isFile();
  const QUrl source = builtIn_ ? QUrl(QStringLiteral("qrc:/docs/gui.md"))
                               : QUrl::fromLocalFile(docsDir + QStringLiteral("/gui.md"));
  browser_->setSource(source, QTextDocument::MarkdownResource);
  if (builtIn_)
    where_->setText(
        tr("The copy of the designer's guide built into this program (its pictures are not "
           "included). The whole documentation is in the docs/ folder of the source, or "
           "/usr/share/doc/pipestudio when installed from the package."));
  else
    where_->setText(tr("From %1 (the other documents, e.g. dsl.md, cli.md, debugger.md, are beside it).")
                        .arg(QDir::toNativeSeparators(docsDir + QStringLiteral("/gui.md"))));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  buttons->button(QDialogButtonBox::Close)->setText(tr("C&lose"));
  QPushButton* external = buttons->addButton(tr("Open in &Browser"), QDialogButtonBox::ActionRole);
  external->setEnabled(!builtIn_);
  external->setToolTip(builtIn_ ? tr("No documentation files were found next to the program")
                                : tr("Open gui.md with the desktop's program for it"));
  connect(external, &QPushButton::clicked, this, [this] { openExternally(); });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  lay->addWidget(where_);
  lay->addWidget(browser_, 1);
  lay->addWidget(buttons);
  resize(820, 640);
}

QString DocumentationDialog::whereText() const {
  return where_->text();
}

bool DocumentationDialog::openExternally() {
  if (builtIn_) return false;
  const QString file = docsDir_ + QStringLiteral("/gui.md");
  if (QDesktopServices::openUrl(QUrl::fromLocalFile(file))) return true;
  where_->setText(
      tr("No program to open %1 was found; it is shown here instead.").arg(QDir::toNativeSeparators(file)));
  return false;
}

}  // namespace ps::ui
