// editors.mjs: a share of the join storm's editors, in a process of their own (the driver,
// joinstorm.mjs, starts several so that the editors' Yjs work spreads over the cores).
//
//   node editors.mjs CONFIG_JSON
//
// CONFIG_JSON: {"kind": "y-websocket"|"hocuspocus", "url", "room", "indices": [...],
// "clients": N, "spreadMs"}. The process says {"ready": true} once loaded; on the stdin line
// "start T" (epoch ms), editor i opens its provider at T + i·spreadMs/N, on a fresh Y.Doc,
// and reports on stdout one JSON line when its
// provider says synced: {"i", "syncedMs"} (ms since startAt). Every editor stays connected.
// When stdin says "verify", each editor's text is checked (length and SHA-256 against the
// document the driver loaded) and one line {"verified": n, "bad": [...]} is printed; when
// stdin closes, the providers are destroyed and the process exits.
import * as Y from 'yjs'
import WebSocket from 'ws'
import { WebsocketProvider } from 'y-websocket'
import { HocuspocusProvider } from '@hocuspocus/provider'
import { createHash } from 'node:crypto'
import { createInterface } from 'node:readline'

const cfg = JSON.parse(process.argv[2])
const editors = []
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')

const open = (i) => {
  const doc = new Y.Doc()
  const e = { i, doc, provider: null, synced: false, connections: 0 }
  const synced = () => {
    if (e.synced) return
    e.synced = true
    out({ i, syncedMs: Date.now() - cfg.startAt })
  }
  if (cfg.kind === 'hocuspocus') {
    e.provider = new HocuspocusProvider({ url: cfg.url, name: cfg.room, document: doc, WebSocketPolyfill: WebSocket })
    e.provider.on('synced', ({ state }) => { if (state) synced() })
    e.provider.on('status', ({ status }) => { if (status === 'connected') e.connections++ })
  } else {
    e.provider = new WebsocketProvider(cfg.url, cfg.room, doc, { WebSocketPolyfill: WebSocket, disableBc: true })
    e.provider.on('sync', (s) => { if (s) synced() })
    e.provider.on('status', ({ status }) => { if (status === 'connected') e.connections++ })
  }
  editors.push(e)
}

const start = (startAt) => {
  cfg.startAt = startAt
  for (const i of cfg.indices) {
    setTimeout(() => open(i), Math.max(0, startAt + (i * cfg.spreadMs) / cfg.clients - Date.now()))
  }
}

const verify = () => {
  const bad = []
  let connections = 0
  for (const e of editors) {
    connections += e.connections
    const text = e.doc.getText('body').toString()
    const sha = createHash('sha256').update(text).digest('hex')
    if (!e.synced || text.length !== cfg.textLength || sha !== cfg.textSha256) {
      bad.push({ i: e.i, synced: e.synced, length: text.length })
    }
  }
  out({ verified: editors.length, bad, connections })
}

const rl = createInterface({ input: process.stdin })
rl.on('line', (l) => {
  const [word, arg] = l.trim().split(' ')
  if (word === 'start') start(Number(arg))
  if (word === 'verify') verify()
})
out({ ready: true })
rl.on('close', () => {
  for (const e of editors) { e.provider.destroy(); e.doc.destroy() }
  setTimeout(() => process.exit(0), 100).unref()
})
