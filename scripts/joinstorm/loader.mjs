// loader.mjs: loads the join storm's document into a Node relay (Hocuspocus, the y-websocket
// server) through a provider, prints "loaded" once synced and stays connected until killed:
// both servers drop a document when its last connection closes.
//
//   node loader.mjs '{"kind","url","room","file"}'
import * as Y from 'yjs'
import WebSocket from 'ws'
import { WebsocketProvider } from 'y-websocket'
import { HocuspocusProvider } from '@hocuspocus/provider'
import { readFileSync } from 'node:fs'

const cfg = JSON.parse(process.argv[2])
const doc = new Y.Doc()
Y.applyUpdate(doc, readFileSync(cfg.file))
let done = false
const loaded = () => { if (!done) { done = true; console.log('loaded') } }
if (cfg.kind === 'hocuspocus') {
  const p = new HocuspocusProvider({ url: cfg.url, name: cfg.room, document: doc, WebSocketPolyfill: WebSocket })
  p.on('synced', ({ state }) => { if (state) loaded() })
} else {
  const p = new WebsocketProvider(cfg.url, cfg.room, doc, { WebSocketPolyfill: WebSocket, disableBc: true })
  p.on('sync', (s) => { if (s) loaded() })
}
process.on('SIGINT', () => process.exit(0))
