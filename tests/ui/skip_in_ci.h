#pragma once
// A test that cannot run here (no sshd, no torchrun, a file missing) skips with the reason. In
// CI (CI=true, which .ci/run exports) everything the tests need is installed and started, so a
// skip there would pass without testing anything: the same condition fails the test instead.
#include <QString>
#include <QtTest>

inline bool psInCi() {
  return qgetenv("CI") == "true";
}

// Use in a test function (it returns from it either way).
#define PS_SKIP_UNLESS_CI(reason)                                                     \
  do {                                                                                \
    const QString psWhy_ = (reason);                                                  \
    if (psInCi()) QFAIL(qPrintable(psWhy_ + QStringLiteral(" (CI=true: required)"))); \
    QSKIP(qPrintable(psWhy_));                                                        \
  } while (false)
