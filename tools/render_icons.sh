#!/usr/bin/env bash
# Renders resources/icons/pipestudio.svg into the PNG sizes of the hicolor icon theme
# (resources/icons/hicolor/NxN/apps/pipestudio.png, installed under /usr/share/icons/hicolor):
# desktops and software centres that do not read SVG, and AppStream's 64 and 128 pixel icons,
# use them. Run after changing the SVG, and commit the PNGs (needs rsvg-convert: librsvg2-bin).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
svg=$here/resources/icons/pipestudio.svg
for n in 16 24 32 48 64 128 256; do
  out=$here/resources/icons/hicolor/${n}x${n}/apps/pipestudio.png
  mkdir -p "$(dirname "$out")"
  rsvg-convert --width "$n" --height "$n" --output "$out" "$svg"
  echo "render_icons: $out"
done
