// PyTorch's stage actions (UNSHARD / RESHARD / REDUCE_GRAD) in the designer: drawn in their
// own colours, the data-parallel collectives on the copy lane, and saved without loss.
#include <QtTest>

#include "document/schedule_document.h"
#include "pipestudio/core/analysis/simulator.h"
#include "pipestudio/core/io/pytorch_csv.h"
#include "pipestudio/core/model/cost_profile.h"
#include "timeline/op_style.h"
#include "timeline/timeline_geometry.h"

using namespace ps::core;
using namespace ps::ui;

class StageActionsTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void drawnOnTheirLanesInTheirColours();
  void savedWithoutLoss();
};

void StageActionsTest::drawnOnTheirLanesInTheirColours() {
  auto s = readPytorchCsv("0UNSHARD,0F0,0B0,0REDUCE_GRAD,0RESHARD\n");
  QVERIFY(s.ok());
  CostProfile p = uniformCostProfile("F=1,B=2,weight=1000", 1).value();
  p.dataParallelBandwidthBytesPerMs = 100;
  auto t = simulate(*s, makeSimulationModel(*s, p).value());
  QVERIFY(t.ok());
  const BlockIndex bi = BlockIndex::build(*s, *t);
  QVERIFY(bi.hasCopyLane());
  const auto& row = bi.row(0);
  QCOMPARE(row.size(), size_t(5));
  QCOMPARE(row[0].lane, 1);  // UNSHARD: an all-gather beside compute
  QCOMPARE(row[0].end, 10.0);
  QCOMPARE(row[1].lane, 0);
  QCOMPARE(row[3].lane, 1);  // REDUCE_GRAD
  QCOMPARE(row[3].start, 13.0);
  QCOMPARE(row[4].lane, 0);  // RESHARD frees memory on the compute stream
  // Each kind has a colour of its own, and a stage action is labelled by its kind.
  for (OpKind k : {OpKind::Unshard, OpKind::ReduceGrad})
    for (OpKind other : {OpKind::F, OpKind::B, OpKind::I, OpKind::W, OpKind::Offload, OpKind::SendF})
      QVERIFY(kindColor(k) != kindColor(other));
  QVERIFY(kindColor(OpKind::Unshard) != kindColor(OpKind::ReduceGrad));
  QCOMPARE(blockLabel(*s, Op{OpKind::ReduceGrad, 0, -1}), QStringLiteral("REDUCE_GRAD"));
}

void StageActionsTest::savedWithoutLoss() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string text =
      "0UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0REDUCE_GRAD,0RESHARD\r\n1RECV_F0,1F0,1B0,1SEND_B0\r\n";
  auto s = readPytorchCsv(text);
  QVERIFY(s.ok());
  QCOMPARE(int(csvFormatFor(*s)), int(CsvFormat::ComputeComms));
  const QString csv = dir.filePath(QStringLiteral("s.csv"));
  QVERIFY(writeScheduleFile(csv, *s).ok());
  QFile f(csv);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QCOMPARE(f.readAll().toStdString(), text);
  // A .pipe names an absolute profile path relative to itself.
  Schedule withProfile = *s;
  withProfile.profile = QDir(dir.path()).filePath(QStringLiteral("profiles/p.json")).toStdString();
  const QString pipe = dir.filePath(QStringLiteral("designs/d.pipe"));
  QVERIFY(QDir(dir.path()).mkpath(QStringLiteral("designs")));
  QVERIFY(writeScheduleFile(pipe, withProfile).ok());
  QFile g(pipe);
  QVERIFY(g.open(QIODevice::ReadOnly));
  QVERIFY2(g.readAll().contains("profile \"../profiles/p.json\""), "relative profile path");
}

QTEST_GUILESS_MAIN(StageActionsTest)
#include "stage_actions_test.moc"
