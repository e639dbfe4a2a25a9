#pragma once
// Every colour the GUI paints with, in one place: the op kinds, the timeline's bands, outlines,
// arrows, playhead and the measured overlay, the legend and the docks' status colours. There
// is a light and a dark variant; which one applies follows the palette's window colour, so the
// timeline, its legend and the overlay switch together when the palette changes.
#include <QColor>
#include <QPalette>
#include <QString>
#include <array>

#include "pipestudio/core/model/schedule.h"
#include "timeline/timeline_geometry.h"

namespace ps::ui {

struct Theme {
  bool dark = false;

  // From the palette (so a style or platform theme keeps its own look).
  QColor base;             // background of the plot, labels and ruler
  QColor text;             // labels, critical-path outline
  QColor muted;            // stage names, ruler ticks' text
  QColor separator;        // lines between labels, ruler and plot
  QColor highlight;        // selection and drop indicator
  QColor labelBackground;  // behind an arrow's label

  // Fixed per variant.
  QColor band;       // a device's row behind its blocks
  QColor error;      // invalid ops, blocked ops at the playhead, breakpoints, drag refused
  QColor good;       // "Valid" in the status bar
  QColor deadlock;   // the deadlock cycle's outline and arrows
  QColor playhead;   // apart from every op kind's colour
  QColor onAccent;   // text and rims on the playhead flag and breakpoint dots
  QColor iteration;  // iteration ends and optimizer steps
  QColor arrowIn;    // the selection's dependencies
  QColor arrowOut;   // the selection's dependents
  QColor cursor;     // hover cursors in charts
  QColor darkText;   // text on light blocks
  QColor lightText;  // text on dark blocks

  // Op kinds (PyTorch's pipelining visualiser: F blue, I teal, W green, B orange, overlapped
  // pairs purple) and the measured overlay's deviation bands. The same in both variants: the
  // blocks read on either background and screenshots compare across them.
  QColor kindColor(ps::core::OpKind k) const;
  QColor overlapColor() const { return overlap; }
  // The kind colour mixed towards white for a device's later chunk c (0 = full colour).
  QColor blockColor(ps::core::OpKind k, int chunk, bool overlapped) const;
  // darkText or lightText, whichever reads better on `background`.
  QColor textOn(const QColor& background) const;
  QColor deviationColor(DeviationBand band) const;

  QColor overlap;
  // By OpKind value below kFirstUserKind.
  std::array<QColor, static_cast<size_t>(ps::core::OpKind::kBuiltinCount)> kinds;
  std::array<QColor, 6> userKinds;  // cycled for user-defined kinds
  std::array<QColor, 4> deviation;  // by DeviationBand
  // Curves of charts, one per device: distinct hues, none red (a capacity line) nor the
  // playhead's magenta, no grey (it reads as "disabled").
  std::array<QColor, 10> series;

  static const Theme& lightVariant();
  static const Theme& darkVariant();
  // The variant for `palette` (dark when its window colour is dark), with the palette's own
  // base, text and highlight colours.
  static Theme forPalette(const QPalette& palette);
  // The application palette's theme, for widgets outside the timeline (docks, status bar).
  static Theme current();
  // "#rrggbb" for rich text.
  static QString html(const QColor& c) { return c.name(QColor::HexRgb); }
};

// The application palettes for --palette light|dark (screenshots); normally the system's applies.
QPalette lightPalette();
QPalette darkPalette();

}  // namespace ps::ui
