#include "remote/command_dialog.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QShowEvent>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/form.h"
#include "widgets/indicators.h"

namespace ps::ui {

QString defaultModelParameters(const QString& model) {
  if (model == QStringLiteral("gpt")) return QStringLiteral("layers=8,hidden=256,heads=4,seq=128,vocab=1000");
  if (model == QStringLiteral("mlp")) return QStringLiteral("layers=8,hidden=512");
  return {};
}

void addModelItems(QComboBox* combo, bool torchscript) {
  combo->addItem(QObject::tr("GPT (built-in)"), QStringLiteral("gpt"));
  combo->addItem(QObject::tr("MLP (built-in)"), QStringLiteral("mlp"));
  if (torchscript) combo->addItem(QObject::tr("TorchScript file"), QStringLiteral("torchscript"));
}

CommandDialog::CommandDialog(QWidget* parent, QSettings* settings, TargetPicker::Mode targets)
    : QDialog(parent), settings_(settings) {
  if (!settings_) {
    settings_ = new QSettings(QStringLiteral("PipeStudio"), QStringLiteral("PipeStudio"));
    ownSettings_ = true;
  }
  localCli_ = defaultLocalCli();
  target_ = new TargetPicker(settings_, targets);
  connect(target_, &TargetPicker::targetChanged, this, [this] { updatePreview(); });
}

CommandDialog::~CommandDialog() {
  if (ownSettings_) delete settings_;
}

void CommandDialog::buildModelFields(bool torchscript, bool withDevice) {
  model_ = new QComboBox;
  model_->setObjectName(QStringLiteral("model"));
  addModelItems(model_, torchscript);
  params_ = new QLineEdit;
  params_->setObjectName(QStringLiteral("modelParameters"));
  params_->setToolTip(tr("key=value list (docs/engine.md, Models); keys not given keep their defaults"));
  if (withDevice) {
    device_ = new QComboBox;
    device_->addItem(QStringLiteral("cpu"));
    device_->addItem(QStringLiteral("cuda"));
    connect(device_, &QComboBox::currentIndexChanged, this, [this] { updatePreview(); });
  }
  microbatch_ = new QSpinBox;
  microbatch_->setRange(0, 1 << 16);
  microbatch_->setSpecialValueText(tr("default (2)"));
  warmup_ = makeSpinBox(0, 100000, 0);
  connect(model_, &QComboBox::currentIndexChanged, this, [this] {
    if (const QString p = defaultModelParameters(model_->currentData().toString()); !p.isEmpty()) {
      params_->setText(p);
      params_->setCursorPosition(0);
    }
    updatePreview();
  });
  connect(params_, &QLineEdit::textChanged, this, [this] { updatePreview(); });
  for (QSpinBox* s : {microbatch_, warmup_})
    connect(s, &QSpinBox::valueChanged, this, [this] { updatePreview(); });
}

void CommandDialog::buildOptimizerCombo(const QString& noneText, const QString& tip) {
  optimizer_ = new QComboBox;
  optimizer_->setObjectName(QStringLiteral("optimizer"));
  optimizer_->addItem(noneText, QString());
  optimizer_->addItem(QStringLiteral("SGD"), QStringLiteral("sgd"));
  optimizer_->addItem(QStringLiteral("AdamW"), QStringLiteral("adamw"));
  optimizer_->setToolTip(tip);
  connect(optimizer_, &QComboBox::currentIndexChanged, this, [this] { updatePreview(); });
}

void CommandDialog::addOutput(QVBoxLayout* v, const QString& startText, const QString& cancelText,
                              QPushButton* leading) {
  preview_ = new QLineEdit;
  preview_->setReadOnly(true);
  preview_->setObjectName(QStringLiteral("commandPreview"));
  progress_ = new QProgressBar;
  progress_->setRange(0, 1);
  progress_->setValue(0);
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  log_->setMinimumHeight(90);

  startButton_ = new QPushButton(startText);
  startButton_->setDefault(true);
  cancelButton_ = new QPushButton(cancelText);
  cancelButton_->setEnabled(false);
  closeButton_ = new QPushButton(tr("C&lose"));
  connect(closeButton_, &QPushButton::clicked, this, &QDialog::close);
  auto* buttons = new QHBoxLayout;
  if (leading) buttons->addWidget(leading);
  buttons->addStretch(1);
  for (QPushButton* b : {startButton_, cancelButton_, closeButton_}) buttons->addWidget(b);

  v->addWidget(new QLabel(tr("Command:")));
  v->addWidget(preview_);
  v->addWidget(progress_);
  v->addWidget(status_);
  v->addWidget(log_, 1);
  v->addLayout(buttons);
}

void CommandDialog::setPreview(const QString& text) {
  if (!preview_) return;
  preview_->setText(text);
  preview_->setCursorPosition(0);  // the start says what runs where
  preview_->setToolTip(text);
}

void CommandDialog::appendLog(const QString& text) {
  if (!text.isEmpty()) log_->appendPlainText(text);
}

void CommandDialog::appendStream(const QString& chunk) {
  pendingLine_ += chunk;
  const qsizetype end = pendingLine_.lastIndexOf(QLatin1Char('\n'));
  if (end < 0) return;
  appendLog(pendingLine_.left(end).trimmed());
  pendingLine_.remove(0, end + 1);
}

void CommandDialog::flushStream() {
  appendLog(pendingLine_.trimmed());
  pendingLine_.clear();
}

void CommandDialog::readModelFields(RunRequest& r) const {
  target_->applyTo(r);
  r.localCli = localCli_;
  r.model = model_->currentData().toString();
  r.modelParameters = params_->text().trimmed();
  r.device = device_ ? device_->currentText() : QStringLiteral("cpu");
  r.microbatchSize = microbatch_->value();
}

void CommandDialog::writeModelFields(const RunRequest& r) {
  target_->select(r);
  if (!r.localCli.isEmpty()) localCli_ = r.localCli;
  {
    const QSignalBlocker block(model_);  // keep the given parameters
    model_->setCurrentIndex(std::max(0, model_->findData(r.model)));
  }
  params_->setText(r.modelParameters);
  params_->setCursorPosition(0);
  if (device_) device_->setCurrentIndex(std::max(0, device_->findText(r.device)));
  microbatch_->setValue(r.microbatchSize);
}

void CommandDialog::setLocalCli(const QString& path) {
  localCli_ = path;
  updatePreview();
}

QString CommandDialog::commandPreview() const {
  return preview_->text();
}
QString CommandDialog::statusText() const {
  return status_->text();
}
QString CommandDialog::logText() const {
  return log_->toPlainText();
}

void CommandDialog::showEvent(QShowEvent* e) {
  QDialog::showEvent(e);
  makeIndicatorsVisible(this);
}

}  // namespace ps::ui
