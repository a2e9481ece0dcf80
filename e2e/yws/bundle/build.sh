#!/usr/bin/env bash
# Builds the editor page's bundle from the pinned npm packages (npm ci first): writes the
# bundle to the path given (default: yws/editor/yjs-bundle.js of this repository).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/../../yws/editor/yjs-bundle.js}
"$here/node_modules/.bin/esbuild" "$here/bundle/entry.mjs" --bundle --format=iife --global-name=NomicoreYjs \
  --platform=browser --target=es2020 --minify --legal-comments=eof --charset=utf8 --log-level=warning \
  --banner:js="/* yjs 13.6.33, y-websocket 3.1.0, y-protocols 1.0.7, lib0 0.2.120 (each MIT licensed, (c) Kevin Jahns and contributors), bundled by make editor-bundle */" \
  --outfile="$out"
