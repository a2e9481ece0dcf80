// The editor page's bundle (yws/editor/yjs-bundle.js): yjs and the stock y-websocket
// provider from the pinned packages of ../package.json, as one script that defines
// window.NomicoreYjs. Rebuilt byte for byte by `make editor-bundle`.
export * as Y from 'yjs'
export { WebsocketProvider } from 'y-websocket'
