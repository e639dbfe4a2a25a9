#include "timeline/theme.h"

#include <QApplication>
#include <algorithm>

namespace ps::ui {

using ps::core::OpKind;

namespace {

// The colours an application palette is made of; the roles that share a colour share a field.
struct PaletteSpec {
  QColor window, base, alternateBase, button, text, highlight, placeholder, toolTipBase, disabled;
};

QPalette makePalette(const PaletteSpec& s) {
  QPalette p;
  p.setColor(QPalette::Window, s.window);
  p.setColor(QPalette::Base, s.base);
  p.setColor(QPalette::AlternateBase, s.alternateBase);
  p.setColor(QPalette::Button, s.button);
  for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText, QPalette::ToolTipText})
    p.setColor(role, s.text);
  p.setColor(QPalette::Highlight, s.highlight);
  p.setColor(QPalette::HighlightedText, QColor(0xff, 0xff, 0xff));
  p.setColor(QPalette::PlaceholderText, s.placeholder);
  p.setColor(QPalette::ToolTipBase, s.toolTipBase);
  for (auto role : {QPalette::Text, QPalette::ButtonText, QPalette::WindowText})
    p.setColor(QPalette::Disabled, role, s.disabled);
  return p;
}

// The fixed colours of a variant; the palette-derived ones are filled in by forPalette().
Theme variant(bool dark) {
  Theme t;
  t.dark = dark;
  t.band = QColor(0xf4, 0xf6, 0xf9);  // dark: the base lightened (forPalette)
  t.error = QColor(0xe5, 0x39, 0x35);
  t.good = QColor(0x2e, 0x9d, 0x4e);
  t.deadlock = QColor(0xff, 0x6f, 0x00);
  t.playhead = QColor(0xd8, 0x1b, 0x60);
  t.onAccent = QColor(0xff, 0xff, 0xff);
  t.iteration = dark ? QColor(0xb3, 0x88, 0xff) : QColor(0x6a, 0x1b, 0x9a);
  t.arrowIn = dark ? QColor(0x90, 0xca, 0xf9) : QColor(0x15, 0x65, 0xc0);
  t.arrowOut = dark ? QColor(0xa5, 0xd6, 0xa7) : QColor(0x2e, 0x7d, 0x32);
  t.cursor = QColor(0x80, 0x80, 0x80);
  t.darkText = QColor(0x1e, 0x1e, 0x1e);
  t.lightText = QColor(0xff, 0xff, 0xff);
  t.overlap = QColor(0x8e, 0x44, 0xad);
  t.kinds = {
      QColor(0x3b, 0x7d, 0xd8),  // F: blue
      QColor(0xf0, 0x8c, 0x2e),  // B: orange
      QColor(0x1a, 0xa3, 0x9a),  // I: teal
      QColor(0x4c, 0xaf, 0x50),  // W: green
      QColor(0xd9, 0x4f, 0x8a),  // R: pink
      QColor(0x8d, 0x6e, 0x63),  // Offload: brown
      QColor(0xb0, 0x8f, 0x5a),  // Reload: tan
      QColor(0x90, 0xa4, 0xae),  // SendF: grey-blue
      QColor(0x90, 0xa4, 0xae),  // RecvF
      QColor(0xa1, 0x88, 0x7f),  // SendB: grey-brown
      QColor(0xa1, 0x88, 0x7f),  // RecvB
      QColor(0x7e, 0x57, 0xc2),  // Unshard: deep violet
      QColor(0x7e, 0x57, 0xc2),  // Reshard
      QColor(0xc0, 0xa0, 0x20),  // ReduceGrad: ochre
  };
  t.userKinds = {QColor(0xe5, 0x3e, 0x3e), QColor(0x00, 0x97, 0xa7), QColor(0x9e, 0x9d, 0x24),
                 QColor(0x5c, 0x6b, 0xc0), QColor(0xef, 0x6c, 0x00), QColor(0x6d, 0x4c, 0x41)};
  t.deviation = {QColor(0x9e, 0x9e, 0x9e),   // Unknown
                 QColor(0x43, 0xa0, 0x47),   // Good
                 QColor(0xff, 0xb3, 0x00),   // Warn
                 QColor(0xe5, 0x39, 0x35)};  // Bad
  t.series = {QColor(0x1f, 0x77, 0xb4), QColor(0xff, 0x7f, 0x0e), QColor(0x2c, 0xa0, 0x2c),
              QColor(0x94, 0x67, 0xbd), QColor(0x17, 0xbe, 0xcf), QColor(0xa6, 0x76, 0x1d),
              QColor(0xbc, 0xbd, 0x22), QColor(0x00, 0x3f, 0x8c), QColor(0x00, 0x80, 0x6b),
              QColor(0xd9, 0xa4, 0x00)};
  return t;
}

QColor withAlpha(QColor c, float a) {
  c.setAlphaF(a);
  return c;
}

}  // namespace

QPalette lightPalette() {
  return makePalette({QColor(0xf3, 0xf4, 0xf6), QColor(0xff, 0xff, 0xff), QColor(0xf6, 0xf8, 0xfa),
                      QColor(0xf3, 0xf4, 0xf6), QColor(0x1f, 0x23, 0x28), QColor(0x2f, 0x6f, 0xde),
                      QColor(0x6a, 0x73, 0x7d), QColor(0xff, 0xff, 0xff), QColor(0xa0, 0xa4, 0xaa)});
}

QPalette darkPalette() {
  return makePalette({QColor(0x25, 0x27, 0x2b), QColor(0x1b, 0x1d, 0x21), QColor(0x23, 0x26, 0x2b),
                      QColor(0x2d, 0x30, 0x35), QColor(0xe6, 0xe6, 0xe6), QColor(0x4c, 0x8d, 0xf6),
                      QColor(0x9a, 0xa0, 0xa6), QColor(0x2d, 0x30, 0x35), QColor(0x70, 0x74, 0x7a)});
}

Theme Theme::forPalette(const QPalette& pal) {
  // Dark when the window is: a dark palette may still give lists and editors a light base.
  Theme t = variant(pal.color(QPalette::Window).lightnessF() < 0.5);
  t.base = pal.color(QPalette::Base);
  t.text = pal.color(QPalette::Text);
  t.muted = withAlpha(t.text, 0.6f);
  t.separator = withAlpha(t.text, 0.12f);
  t.highlight = pal.color(QPalette::Highlight);
  t.labelBackground = QColor(t.base.red(), t.base.green(), t.base.blue(), 220);
  if (t.dark) t.band = t.base.lighter(118).toRgb();
  return t;
}

const Theme& Theme::lightVariant() {
  static const Theme t = forPalette(lightPalette());
  return t;
}

const Theme& Theme::darkVariant() {
  static const Theme t = forPalette(darkPalette());
  return t;
}

Theme Theme::current() {
  return forPalette(QApplication::palette());
}

QColor Theme::kindColor(OpKind k) const {
  const auto i = static_cast<size_t>(k);
  if (i < kinds.size()) return kinds[i];
  return userKinds[(i - ps::core::kFirstUserKind) % userKinds.size()];
}

QColor Theme::blockColor(OpKind k, int chunk, bool overlapped) const {
  QColor c = overlapped ? overlap : kindColor(k);
  if (chunk <= 0) return c;
  // Mix towards white: 0.38 for chunk 1, less for each later chunk so they stay distinct.
  const double t = std::min(0.6, 0.38 + 0.1 * (chunk - 1));
  return QColor::fromRgbF(static_cast<float>(c.redF() + (1 - c.redF()) * t),
                          static_cast<float>(c.greenF() + (1 - c.greenF()) * t),
                          static_cast<float>(c.blueF() + (1 - c.blueF()) * t));
}

QColor Theme::textOn(const QColor& bg) const {
  const double lum = 0.299 * bg.redF() + 0.587 * bg.greenF() + 0.114 * bg.blueF();
  return lum > 0.62 ? darkText : lightText;
}

QColor Theme::deviationColor(DeviationBand band) const {
  const auto i = static_cast<size_t>(band);
  return i < deviation.size() ? deviation[i] : deviation[0];
}

}  // namespace ps::ui
