#!/usr/bin/env bash
# Builds the editor pages' bundles from the pinned npm packages (npm ci first): writes
# yjs-bundle.js (the y-websocket page) and tiptap-bundle.js (the rich-text page) to the
# directory given (default: yws/editor of this repository).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/../../yws/editor}
esbuild() {
  "$here/node_modules/.bin/esbuild" "$@" --bundle --format=iife --platform=browser --target=es2020 --minify \
    --legal-comments=eof --charset=utf8 --log-level=warning
}
esbuild "$here/bundle/entry.mjs" --global-name=NomicoreYjs \
  --banner:js="/* yjs 13.6.33, y-websocket 3.1.0, y-protocols 1.0.7, lib0 0.2.120 (each MIT licensed, (c) Kevin Jahns and contributors), bundled by make editor-bundle */" \
  --outfile="$out/yjs-bundle.js"
esbuild "$here/bundle/tiptap-entry.mjs" --global-name=NomicoreTiptap \
  --banner:js="/* Tiptap 3.31.3 (@tiptap/core, starter-kit, extension-collaboration, extension-collaboration-caret, pm; MIT, (c) Tiptap GmbH), @tiptap/y-tiptap 3.0.9 (MIT, (c) Kevin Jahns), ProseMirror (MIT, (c) Marijn Haverbeke and others), @hocuspocus/provider 4.8.0 (MIT, (c) Tiptap GmbH), yjs 13.6.33, y-protocols 1.0.7, lib0 0.2.120 (MIT, (c) Kevin Jahns and contributors), bundled by make editor-bundle */" \
  --outfile="$out/tiptap-bundle.js"
