// Finding ops (docs/gui.md, "Finding ops"): what the words of a search mean, the matches in time
// order, and the field above the timeline stepping through them.
#include "timeline/op_search.h"

#include <QLabel>
#include <QLineEdit>
#include <QtTest>

#include "document/schedule_document.h"
#include "shell/main_window.h"
#include "timeline/timeline_view.h"
#include "ui_fixtures.h"

using namespace ps::core;
using namespace ps::ui;

namespace {

using ps::test::op;

// The names of the matches, in order.
QStringList names(const Schedule& s, const std::vector<OpRef>& refs) {
  QStringList out;
  for (const OpRef& r : refs)
    out << QString::fromStdString(s.opName(s.devices[size_t(r.device)][size_t(r.step)].first));
  return out;
}

}  // namespace

class OpSearchTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { ps::test::useTestSettings(); }

  void wordsMeanOpsKindsMicrobatchesStagesAndDevices() {
    const Schedule s = ps::test::oneFOneB(4, 8);
    const Analysis a = [&] {
      ScheduleDocument d;
      d.load(s, defaultCostProfile(s));
      return d.analysis();
    }();
    auto find = [&](const QString& q) { return names(s, findOps(s, a.timeline, parseOpQuery(q, s))); };
    QCOMPARE(find(QStringLiteral("B3@s1")), QStringList{QStringLiteral("B3@s1")});
    QCOMPARE(find(QStringLiteral("b3@S1")), QStringList{QStringLiteral("B3@s1")});  // any case
    QCOMPARE(find(QStringLiteral("f3 s1")), QStringList{QStringLiteral("F3@s1")});
    // A kind with its micro-batch: one per stage, in time order (stage 0 first).
    QCOMPARE(find(QStringLiteral("F3")), (QStringList{QStringLiteral("F3@s0"), QStringLiteral("F3@s1"),
                                                      QStringLiteral("F3@s2"), QStringLiteral("F3@s3")}));
    QCOMPARE(find(QStringLiteral("mb 3 d2")),
             (QStringList{QStringLiteral("F3@s2"), QStringLiteral("B3@s2")}));
    QCOMPARE(find(QStringLiteral("device 2 B")).size(), 8);
    QCOMPARE(find(QStringLiteral("stage 0 m7")),
             (QStringList{QStringLiteral("F7@s0"), QStringLiteral("B7@s0")}));
    QCOMPARE(find(QStringLiteral("W")).size(), 0);  // 1F1B has no W
    const OpQuery bad = parseOpQuery(QStringLiteral("F3 banana"), s);
    QVERIFY(!bad.valid);
    QCOMPARE(bad.problem, QStringLiteral("banana"));
    QVERIFY(findOps(s, a.timeline, bad).empty());
    // Matches in time order.
    const auto refs = findOps(s, a.timeline, parseOpQuery(QStringLiteral("B"), s));
    double last = -1;
    for (const OpRef& r : refs) {
      const TimelineOp* t = nullptr;
      for (const auto& o : a.timeline.ops)
        if (o.device == r.device && o.step == r.step) t = &o;
      QVERIFY(t && t->start >= last);
      last = t->start;
    }
  }

  void theFieldStepsThroughMatches() {
    auto w = ps::test::shownWindow(ps::test::oneFOneB(4, 8), defaultCostProfile(4));
    QVERIFY(w);
    QLineEdit* find = w->findEdit();
    QVERIFY(find);
    w->focusFind();
    QTRY_VERIFY(find->hasFocus());
    QTest::keyClicks(find, QStringLiteral("F2"));
    QCOMPARE(w->timeline()->searchMatches().size(), size_t{4});
    QVERIFY2(w->findCountText().contains(QStringLiteral("4")), qPrintable(w->findCountText()));
    QTest::keyClick(find, Qt::Key_Return);
    QCOMPARE(*w->timeline()->selectedOp(), op(OpKind::F, 0, 2));
    QCOMPARE(w->findCountText(), QStringLiteral("1 / 4"));
    QTest::keyClick(find, Qt::Key_Return);
    QCOMPARE(*w->timeline()->selectedOp(), op(OpKind::F, 1, 2));
    QTest::keyClick(find, Qt::Key_Return, Qt::ShiftModifier);
    QCOMPARE(*w->timeline()->selectedOp(), op(OpKind::F, 0, 2));
    QTest::keyClick(find, Qt::Key_Return, Qt::ShiftModifier);  // wraps round to the last
    QCOMPARE(*w->timeline()->selectedOp(), op(OpKind::F, 3, 2));
    // A word that means nothing says so; Esc clears and goes back to the timeline.
    find->setText(QStringLiteral("F2 zz"));
    QVERIFY(w->timeline()->searchMatches().empty());
    QVERIFY(w->findCountText().contains(QStringLiteral("zz")));
    QTest::keyClick(find, Qt::Key_Escape);
    QVERIFY(find->text().isEmpty());
    QTRY_VERIFY(w->timeline()->hasFocus());
    ps::test::closeQuietly(w);
  }
};

QTEST_MAIN(OpSearchTest)
#include "op_search_test.moc"
