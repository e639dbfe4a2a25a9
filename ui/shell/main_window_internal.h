#pragma once
// Shared by main_window.cpp (documents, docks) and main_window_actions.cpp (menus, toolbar,
// recent files). Not for other widgets.
#include <QSettings>
#include <QString>

namespace ps::ui::shell_detail {

QSettings settings();
// Each kind of file dialog starts in the folder it last used (QSettings "dialogDirs/<purpose>"),
// not in whatever folder another dialog visited last.
void rememberDialogDir(const QString& purpose, const QString& path);

}  // namespace ps::ui::shell_detail
