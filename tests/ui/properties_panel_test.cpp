// The cost-model panel reads byte sizes and times as the CLI and the DSL do: device memory
// "40GB", "80GiB", "512 MiB" (a plain number still GiB, empty unlimited), cost-table sizes
// "1.5GiB" (a plain number still MiB) and times "300us" (a plain number still ms); a value it
// cannot read leaves the profile alone and says which field and why.
#include "panels/properties_panel.h"

#include <QLabel>
#include <QLineEdit>
#include <QTableWidget>
#include <QtTest>

#include "document/schedule_document.h"
#include "pipestudio/core/io/dsl.h"
#include "pipestudio/core/planning/generators.h"
#include "widgets/units_text.h"

using namespace ps::ui;

namespace {
const char* kPipe =
    "devices 2\nstages 2\nmicrobatches 2\nplacement linear\n"
    "device 0: F0 F1 B0 B1\ndevice 1: F0 B0 F1 B1\n";
constexpr std::int64_t kGiB = std::int64_t(1) << 30;
constexpr std::int64_t kMiB = std::int64_t(1) << 20;
}  // namespace

class PropertiesPanelTest : public QObject {
  Q_OBJECT

  // A two-device schedule with the default cost profile.
  static bool loadTiny(ScheduleDocument& doc) {
    auto s = ps::core::parseDsl(kPipe);
    if (!s) return false;
    doc.load(*s, defaultCostProfile(*s));
    return true;
  }

  static void type(QLineEdit* e, const QString& text) {
    e->setText(text);
    e->setModified(true);  // as typing does
    Q_EMIT e->editingFinished();
  }

 private Q_SLOTS:
  void byteSizeTextReadsUnitsAndKeepsPlainNumbers() {
    QCOMPARE(*parseByteSizeText(QStringLiteral("80"), kGiB), 80 * kGiB);
    QCOMPARE(*parseByteSizeText(QStringLiteral("1.5"), kGiB), 3 * kGiB / 2);
    QCOMPARE(*parseByteSizeText(QStringLiteral("80GiB"), kGiB), 80 * kGiB);
    QCOMPARE(*parseByteSizeText(QStringLiteral(" 40GB "), kGiB), std::int64_t(40'000'000'000));
    QCOMPARE(*parseByteSizeText(QStringLiteral("512 MiB"), kGiB), 512 * kMiB);
    QCOMPARE(*parseByteSizeText(QStringLiteral("2"), kMiB), 2 * kMiB);
    QVERIFY(!parseByteSizeText(QStringLiteral("-1"), kGiB));
    QVERIFY(!parseByteSizeText(QStringLiteral("12 XB"), kGiB));
    QVERIFY(!parseByteSizeText(QStringLiteral("9999999999"), kGiB));  // over core's limit, as in the CLI
    const auto bad = parseByteSizeText(QStringLiteral("12 XB"), kGiB);
    const QString why = fieldError(QStringLiteral("Device memory"), bad.errors());
    QVERIFY2(why.startsWith(QStringLiteral("Device memory: '12 XB' is not a byte size")), qPrintable(why));
  }

  // DualPipe's routes: the panel says so, and the dependencies the timeline draws as arrows
  // follow each micro-batch's route (F4@s5 after F4@s4, the up route's first stage).
  void routedScheduleShowsItsRoutesAndRouteArrows() {
    auto s = ps::core::generateSchedule(ps::core::ScheduleKind::DualPipe, ps::core::GeneratorOptions{4, 8});
    QVERIFY(s.ok());
    ScheduleDocument doc;
    doc.load(*s, defaultCostProfile(*s));
    PropertiesPanel panel(&doc);
    auto* shape = panel.findChild<QLabel*>(QStringLiteral("shape"));
    QVERIFY(shape);
    QVERIFY2(shape->text().endsWith(QStringLiteral("8 micro-batches · 2 routes over 4 blocks")),
             qPrintable(shape->text()));
    using ps::core::Op;
    using ps::core::OpKind;
    QCOMPARE(doc.dependencies(Op{OpKind::F, 5, 4}), (std::vector<Op>{Op{OpKind::F, 4, 4}}));
    QVERIFY(doc.dependencies(Op{OpKind::F, 4, 4}).empty());
    QCOMPARE(doc.profile().layers.size(), size_t(4));  // one default layer per block, not per stage
  }

  void deviceMemoryTakesWhatTheCliTakes() {
    ScheduleDocument doc;
    QVERIFY(loadTiny(doc));
    PropertiesPanel panel(&doc);
    auto* memory = panel.findChild<QLineEdit*>(QStringLiteral("deviceMemory"));
    QVERIFY(memory);

    type(memory, QStringLiteral("40GB"));
    QCOMPARE(doc.profile().deviceMemoryBytes, std::int64_t(40'000'000'000));
    QVERIFY(panel.errorText().isEmpty());
    type(memory, QStringLiteral("80"));  // a plain number: GiB, as the field always read
    QCOMPARE(doc.profile().deviceMemoryBytes, 80 * kGiB);
    QCOMPARE(memory->text(),
             QString::fromStdString(ps::core::formatByteSize(80 * kGiB)));  // core's formatter
    QCOMPARE(*parseByteSizeText(memory->text(), kGiB), 80 * kGiB);

    type(memory, QStringLiteral("12 XB"));
    QCOMPARE(doc.profile().deviceMemoryBytes, 80 * kGiB);  // unchanged
    QVERIFY2(panel.errorText().startsWith(QStringLiteral("Device memory: '12 XB'")),
             qPrintable(panel.errorText()));

    type(memory, QString());  // unlimited
    QCOMPARE(doc.profile().deviceMemoryBytes, std::int64_t(0));
    QVERIFY(panel.errorText().isEmpty());
  }

  void costTableTakesUnits() {
    ScheduleDocument doc;
    QVERIFY(loadTiny(doc));
    const ps::core::CostProfile defaults = doc.profile();
    PropertiesPanel panel(&doc);
    QTableWidget* t = panel.costTable();
    QVERIFY(t->rowCount() >= 1);
    const std::string layer = doc.profile().layers[0].name;
    auto column = [&](const QString& header) {
      for (int c = 0; c < t->columnCount(); ++c)
        if (t->horizontalHeaderItem(c)->text() == header) return c;
      return -1;
    };
    t->item(0, column(QStringLiteral("Act MiB")))->setText(QStringLiteral("1.5GiB"));
    QCOMPARE(doc.profile().layers[0].activationBytes, 3 * kGiB / 2);
    t->item(0, column(QStringLiteral("Wt MiB")))->setText(QStringLiteral("3"));  // plain: MiB
    QCOMPARE(doc.profile().layers[0].weightBytes, 3 * kMiB);
    t->item(0, column(QStringLiteral("F ms")))->setText(QStringLiteral("300us"));
    QCOMPARE(doc.profile().layers[0].forwardMs, 0.3);
    t->item(0, column(QStringLiteral("R ms")))->setText(QStringLiteral("2"));
    QCOMPARE(*doc.profile().layers[0].recomputeMs, 2.0);
    QCOMPARE(doc.profile().layers[0].backwardWeightMs, defaults.layers[0].backwardWeightMs);

    t->item(0, column(QStringLiteral("Out MiB")))->setText(QStringLiteral("lots"));
    QVERIFY2(panel.errorText().startsWith(
                 QStringLiteral("Out MiB of %1: 'lots'").arg(QString::fromStdString(layer))),
             qPrintable(panel.errorText()));
    QCOMPARE(doc.profile().layers[0].weightBytes, 3 * kMiB);  // the profile kept its values
  }
};

QTEST_MAIN(PropertiesPanelTest)
#include "properties_panel_test.moc"
